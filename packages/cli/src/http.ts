/**
 * The transport under the API client: one JSON request over `fetch`, with the key, a timeout, retries
 * of transient failures (POSTs always carry an `Idempotency-Key`, so a retry never does the work
 * twice), and every failure turned into an `ApiError`.
 */
import { randomUUID } from "node:crypto"
import { retryAfterMs } from "@swarmplane/core/contract/retry-after"

/**
 * A failed call. `status` is the HTTP status, 0 when no answer came (then `code` is
 * `network.unreachable` or `network.timeout` and the message names the URL and the fix).
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
    /** The server's `Retry-After` (429, 503), ms: the next try waits at least this long. */
    readonly retryAfterMs?: number,
  ) {
    super(message)
    this.name = "ApiError"
  }
}

export interface HttpOptions {
  /** Base URL, e.g. `http://127.0.0.1:8787`. */
  api: string
  key?: string
  fetch?: typeof fetch
  /** Per request, ms (a `?wait` long poll adds its own wait). Default 30 s. */
  timeoutMs?: number
  /** Pause between retries, ms; tests set 0. Default 500, doubling. */
  retryDelayMs?: number
  /** Every wait between tries goes through this; tests record it. Default a real timer. */
  sleep?: (ms: number) => Promise<void>
}

export interface Request {
  method: "GET" | "POST" | "DELETE"
  path: string
  query?: Record<string, string | number | undefined>
  body?: unknown
  idempotencyKey?: string
  /** Extra time this request may take on the server (long polls), ms. */
  extraTimeoutMs?: number
}

export interface Answer<T> {
  status: number
  body: T
  headers: Headers
}

const Attempts = 3
/** A CLI call waits at most this long on one `Retry-After` before it tries again. */
const MaxRetryAfterMs = 10_000

export type Transport = <T>(request: Request) => Promise<Answer<T>>

export function transport(options: HttpOptions): Transport {
  const doFetch = options.fetch ?? fetch
  const base = options.api.replace(/\/+$/, "")
  const delay = options.retryDelayMs ?? 500
  const sleep = options.sleep ?? realSleep

  return async <T>(request: Request): Promise<Answer<T>> => {
    const url = new URL(`${base}${request.path}`)
    for (const [name, value] of Object.entries(request.query ?? {}))
      if (value !== undefined) url.searchParams.set(name, String(value))
    const headers: Record<string, string> = { accept: "application/json" }
    if (options.key) headers.authorization = `Bearer ${options.key}`
    if (request.body !== undefined) headers["content-type"] = "application/json"
    if (request.method === "POST") headers["idempotency-key"] = request.idempotencyKey ?? randomUUID()
    const body = request.body === undefined ? undefined : JSON.stringify(request.body)

    for (let attempt = 1; ; attempt++) {
      try {
        return await once<T>(doFetch, url, request.method, headers, body, timeoutOf(options, request))
      } catch (error) {
        if (!(error instanceof ApiError) || !retryable(error) || attempt >= Attempts) throw error
        const pause = Math.max(delay * 2 ** (attempt - 1), error.retryAfterMs ?? 0)
        await sleep(pause)
      }
    }
  }
}

function realSleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

function timeoutOf(options: HttpOptions, request: Request): number {
  return (options.timeoutMs ?? 30_000) + (request.extraTimeoutMs ?? 0)
}

/** Worth another try: the server may answer next time and no try can have done the work twice. */
function retryable(error: ApiError): boolean {
  if (error.code === "network.unreachable") return false // nothing listens: fail fast, with the fix
  if (error.status === 0) return true
  return (
    error.status === 429 ||
    error.status === 502 ||
    error.status === 503 ||
    error.status === 504 ||
    error.code === "idempotency.in_progress"
  )
}

async function once<T>(
  doFetch: typeof fetch,
  url: URL,
  method: string,
  headers: Record<string, string>,
  body: string | undefined,
  timeoutMs: number,
): Promise<Answer<T>> {
  let res: Response
  try {
    res = await doFetch(url, { method, headers, body, signal: AbortSignal.timeout(timeoutMs) })
  } catch (error) {
    throw networkError(url, error, timeoutMs)
  }
  const text = await res.text().catch(() => "")
  let json: unknown
  try {
    json = text ? JSON.parse(text) : undefined
  } catch {}
  if (res.ok && json !== undefined) return { status: res.status, body: json as T, headers: res.headers }
  const error = isRecord(json) && isRecord(json.error) ? json.error : {}
  const code =
    typeof error.code === "string" ? error.code : res.ok ? "response.invalid" : `http.${res.status}`
  const message =
    typeof error.message === "string"
      ? error.message
      : res.ok
        ? `${method} ${url.pathname} answered ${res.status} without a JSON body; is ${url.origin} a swarmplane API?`
        : `${method} ${url.pathname} failed with ${res.status} ${res.statusText}${text ? `: ${text.slice(0, 200)}` : ""}`
  throw new ApiError(
    res.status,
    code,
    message,
    error.details,
    retryAfterMs(res.headers.get("retry-after"), Date.now(), MaxRetryAfterMs),
  )
}

function networkError(url: URL, error: unknown, timeoutMs: number): ApiError {
  const name = error instanceof Error ? error.name : ""
  if (name === "TimeoutError" || name === "AbortError")
    return new ApiError(
      0,
      "network.timeout",
      `the control plane at ${url.origin} did not answer within ${Math.round(timeoutMs / 1000)} s; is it overloaded or stuck? check it, or try again`,
    )
  const cause = error instanceof Error ? (error.cause ?? error) : error
  const code = isRecord(cause) && typeof cause.code === "string" ? cause.code : ""
  const detail = (cause instanceof Error ? cause.message : String(cause)) || code || "connection failed"
  // A connection that broke mid-way may work on a retry; nothing listening, or no such host, will not.
  if (["ECONNRESET", "EPIPE", "UND_ERR_SOCKET", "ETIMEDOUT"].includes(code))
    return new ApiError(
      0,
      "network.error",
      `the connection to the control plane at ${url.origin} failed (${detail}); try again`,
    )
  return new ApiError(
    0,
    "network.unreachable",
    `cannot reach the control plane at ${url.origin} (${detail}); is the control plane running? start it with swarmplane dev, or check the API URL (swarmplane profile list, --api, SWARMPLANE_API)`,
  )
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value)
}
