/**
 * Calls to the swarm's OpenAI-compatible endpoint, with retries: 408, 429, 5xx, connection errors,
 * timeouts and unreadable answers are retried up to `maxRetries` times with exponential backoff and
 * jitter, never sooner than a `Retry-After` asks; any other answer is final. A stop (the runner's
 * signal) ends a call with `StoppedError`, which is not a row's failure.
 */
import { Agent as HttpAgent, request as httpRequest } from "node:http"
import { Agent as HttpsAgent, request as httpsRequest } from "node:https"
import { setTimeout as sleep } from "node:timers/promises"
import { retryAfterMs } from "@swarmplane/core/contract/retry-after"

export interface RetryPolicy {
  /** Retries after the first try (so at most `maxRetries + 1` requests per row). */
  maxRetries: number
  /** Backoff before the first retry, doubled each time, capped at `maxMs`. */
  initialMs: number
  maxMs: number
}

/** Why a row failed for good, as written in its `error` field. */
export interface RowError {
  message: string
  /** The HTTP status of the last answer, when there was one. */
  status?: number
  /** Requests made for the row. */
  attempts: number
}

export type CallResult = { ok: true; response: unknown; attempts: number } | { ok: false; error: RowError }

export class StoppedError extends Error {
  constructor() {
    super("stopped")
  }
}

/**
 * The pause before retry `n` (1-based): "equal jitter", a uniform draw in [b/2, b] where
 * b = min(maxMs, initialMs · 2^(n-1)). Half the step stays fixed so retries still back off; the other
 * half spreads out clients that failed together.
 */
export function backoffMs(n: number, policy: RetryPolicy, random: () => number = Math.random): number {
  const base = Math.min(policy.maxMs, policy.initialMs * 2 ** Math.min(n - 1, 30))
  return base / 2 + random() * (base / 2)
}

/** `http://host:port/v1/` → `http://host:port`: paths are added per API. */
export function endpointBase(endpoint: string): string {
  return endpoint.replace(/\/+$/, "").replace(/\/v1$/, "")
}

export interface ClientOptions {
  endpoint: string
  token?: string
  timeoutMs: number
  policy: RetryPolicy
  /** Aborted when the runner stops: calls end with `StoppedError`. */
  signal?: AbortSignal
  /** Called before each retry (for the `retries` counter). */
  onRetry?: (reason: string) => void
  random?: () => number
}

export interface EndpointClient {
  /** POST `body` to `path`; the result of the last try. Rejects only with `StoppedError`. */
  post(path: string, body: unknown): Promise<CallResult>
  /** The model ids of `GET /v1/models`, with the same retries. */
  models(): Promise<string[]>
  /** Close the kept-alive connections. */
  close(): void
}

type Try =
  | { done: true; result: CallResult }
  | { done: false; reason: string; status?: number; wait?: number }

export function endpointClient(options: ClientOptions): EndpointClient {
  const base = endpointBase(options.endpoint)
  const headers: Record<string, string> = { "content-type": "application/json" }
  if (options.token) headers.authorization = `Bearer ${options.token}`

  // node:http with keep-alive connections rather than fetch: a fetch costs ~4× the CPU of a plain
  // request here (bench/batch.ts), and a shard's runner is mostly requests.
  const url = new URL(base)
  const secure = url.protocol === "https:"
  const agent = secure ? new HttpsAgent({ keepAlive: true }) : new HttpAgent({ keepAlive: true })
  const send = secure ? httpsRequest : httpRequest

  function exchange(method: string, path: string, body: string | undefined, signal: AbortSignal) {
    return new Promise<{ status: number; retryAfter: string | null; text: string }>((resolve, reject) => {
      const req = send(
        new URL(`${url.pathname.replace(/\/+$/, "")}${path}`, url),
        {
          method,
          agent,
          signal,
          headers: body === undefined ? headers : { ...headers, "content-length": Buffer.byteLength(body) },
        },
        (res) => {
          const chunks: Buffer[] = []
          res.on("data", (chunk: Buffer) => chunks.push(chunk))
          res.on("error", reject)
          res.on("end", () => {
            const retryAfter = res.headers["retry-after"]
            resolve({
              status: res.statusCode ?? 0,
              retryAfter: typeof retryAfter === "string" ? retryAfter : null,
              text: Buffer.concat(chunks).toString("utf8"),
            })
          })
        },
      )
      req.on("error", reject)
      req.end(body)
    })
  }

  async function once(method: string, path: string, body: unknown, attempts: number): Promise<Try> {
    const timeout = AbortSignal.timeout(options.timeoutMs)
    const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout
    try {
      const res = await exchange(method, path, body === undefined ? undefined : JSON.stringify(body), signal)
      const { status, text } = res
      if (status >= 200 && status < 300) {
        try {
          return { done: true, result: { ok: true, response: JSON.parse(text), attempts } }
        } catch {
          return { done: false, reason: `HTTP ${status} with a body that is not JSON`, status }
        }
      }
      const reason = `HTTP ${status}: ${errorText(text)}`
      if (status === 408 || status === 429 || status >= 500) {
        const wait = retryAfterMs(res.retryAfter)
        return { done: false, reason, status, ...(wait === undefined ? {} : { wait }) }
      }
      return { done: true, result: { ok: false, error: { message: reason, status, attempts } } }
    } catch (error) {
      if (options.signal?.aborted) throw new StoppedError()
      if (timeout.aborted) return { done: false, reason: `no answer within ${options.timeoutMs / 1000} s` }
      return { done: false, reason: `request failed: ${causeText(error)}` }
    }
  }

  async function call(method: string, path: string, body?: unknown): Promise<CallResult> {
    for (let attempts = 1; ; attempts++) {
      const t = await once(method, path, body, attempts)
      if (t.done) return t.result
      if (attempts > options.policy.maxRetries) {
        const error: RowError = { message: `${t.reason} (after ${attempts} tries)`, attempts }
        if (t.status !== undefined) error.status = t.status
        return { ok: false, error }
      }
      options.onRetry?.(t.reason)
      const pause = Math.max(t.wait ?? 0, backoffMs(attempts, options.policy, options.random))
      try {
        await sleep(pause, undefined, { signal: options.signal })
      } catch {
        throw new StoppedError()
      }
    }
  }

  return {
    close: () => agent.destroy(),
    post: (path, body) => call("POST", path, body),
    async models() {
      const result = await call("GET", "/v1/models")
      if (!result.ok) throw new Error(`GET ${base}/v1/models failed: ${result.error.message}`)
      const data = (result.response as { data?: unknown }).data
      if (!Array.isArray(data)) throw new Error(`GET ${base}/v1/models: the answer has no "data" list`)
      return data.flatMap((m: unknown) =>
        typeof m === "object" && m !== null && "id" in m && typeof m.id === "string" ? [m.id] : [],
      )
    },
  }
}

/** The `error.message` of an OpenAI-style error body, else the start of the body. */
function errorText(text: string): string {
  try {
    const parsed: unknown = JSON.parse(text)
    if (typeof parsed === "object" && parsed !== null && "error" in parsed) {
      const e = parsed.error
      if (typeof e === "object" && e !== null && "message" in e && typeof e.message === "string")
        return e.message.slice(0, 500)
      if (typeof e === "string") return e.slice(0, 500)
    }
  } catch {}
  return text.slice(0, 500) || "(empty body)"
}

/** fetch's "fetch failed" hides the socket error in `cause`; show both. */
function causeText(error: unknown): string {
  if (!(error instanceof Error)) return String(error)
  const cause = error.cause
  if (cause instanceof Error) {
    const code = (cause as NodeJS.ErrnoException).code
    return `${error.message} (${code ?? cause.message})`
  }
  return error.message
}
