/** Injected API faults: the next matching requests answer 429 (with Retry-After), 500 or 503. */

/** A fault the next matching API requests answer with instead of being served. */
export interface Fault {
  /** How many requests it answers (default 1). */
  count?: number
  status: 429 | 500 | 503
  /** For a 429: the `Retry-After` seconds (default 1). */
  retryAfterSeconds?: number
  method?: string
  /** Matches the request path (e.g. `/apis/batch/v1/namespaces/team-a/jobs`): a prefix, or a RegExp. */
  path?: string | RegExp
}

export function takeFault(faults: Fault[], method: string, path: string): Fault | undefined {
  const i = faults.findIndex(
    (f) =>
      (f.method === undefined || f.method.toUpperCase() === method) &&
      (f.path === undefined || (typeof f.path === "string" ? path.startsWith(f.path) : f.path.test(path))),
  )
  const fault = faults[i]
  if (!fault) return undefined
  fault.count = (fault.count ?? 1) - 1
  if (fault.count <= 0) faults.splice(i, 1)
  return fault
}
