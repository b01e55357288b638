/**
 * Browser module `/ui/api.js`: the API client of the dashboard. The key is kept in sessionStorage only
 * (gone when the tab closes) and travels only in the `Authorization` header, never in a URL; errors
 * become `ApiError` with the API's `{ error: { code, message, details } }`.
 */
// biome-ignore lint/complexity/noUselessStringRaw: every browser module is raw, so an escape added later reaches the browser as written
export const apiJs = String.raw`/* swarmplane dashboard: the API client. The key lives in sessionStorage and only in the Authorization header. */
const StorageKey = "swarmplane.apiKey"

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message)
    this.name = "ApiError"
    this.status = status
    this.code = code
    this.details = details
  }
}

export const session = {
  get key() {
    try {
      return sessionStorage.getItem(StorageKey)
    } catch {
      return null
    }
  },
  save(key) {
    sessionStorage.setItem(StorageKey, key)
  },
  clear() {
    try {
      sessionStorage.removeItem(StorageKey)
    } catch {}
  },
}

/** Call the API on this origin. Resolves with the JSON body; rejects with ApiError (or AbortError). */
export async function api(path, options = {}) {
  const { method = "GET", key = session.key, signal, headers = {} } = options
  let res
  try {
    res = await fetch(path, {
      method,
      signal,
      cache: "no-store",
      credentials: "omit",
      headers: { Accept: "application/json", ...(key ? { Authorization: "Bearer " + key } : {}), ...headers },
    })
  } catch (error) {
    if (error && error.name === "AbortError") throw error
    throw new ApiError(0, "network", "The control plane did not answer; check your connection.")
  }
  const text = await res.text()
  let body
  try {
    body = text ? JSON.parse(text) : undefined
  } catch {
    body = undefined
  }
  if (!res.ok) {
    const e = body && typeof body.error === "object" && body.error ? body.error : {}
    throw new ApiError(
      res.status,
      e.code || "http." + res.status,
      e.message || res.statusText || "the request failed",
      e.details,
    )
  }
  return body
}

/** A fresh Idempotency-Key, so a retried POST is answered once. */
export function idempotencyKey() {
  const bytes = crypto.getRandomValues(new Uint8Array(16))
  return "dashboard-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")
}
`
