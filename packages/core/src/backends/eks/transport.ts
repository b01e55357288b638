/**
 * One HTTPS exchange with a cluster's API server, and one call with its retries (client.ts says the
 * policy). TLS is verified against the cluster CA given by `KubeAccess` and nothing else; the bearer
 * token goes only into the `Authorization` header, and `scrub` keeps it out of every message.
 */
import { createHash } from "node:crypto"
import { Agent, request } from "node:https"
import { BackendError } from "../../util/errors"
import { retryAfterMs } from "../../util/retry-after"
import { hint, KubeApiError, retryableStatus, statusOf } from "./api-error"

/** Where the API server is and how to authenticate to it; auth.ts `eksAccess` is one. */
export interface KubeAccess {
  cluster(): Promise<{ endpoint: string; caPem: string }>
  token(options?: { refresh?: boolean }): Promise<string>
}

export interface TransportOptions {
  access: KubeAccess
  /** Milliseconds since the epoch, on the same clock as `deadline`. */
  now?: () => number
  /** Waits between retries; injected so tests do not wait in real time. */
  sleep?: (ms: number) => Promise<void>
  /** Timeout of one request, ms. */
  timeoutMs?: number
  /** No request starts, and none runs, past this time (ms since the epoch, on `now`'s clock). */
  deadline?: number
  /** Tries after the first one. */
  retries?: number
  /** First backoff, ms; doubled per retry up to `maxBackoffMs`. */
  backoffMs?: number
  maxBackoffMs?: number
  /** Jitter source in [0, 1). */
  random?: () => number
  /** Told of every request sent (a benchmark counts a pass's calls). */
  onRequest?: (method: Method, path: string) => void
}

export type Method = "GET" | "POST" | "PATCH" | "DELETE"
type Query = Record<string, string | number | undefined>

/** One keep-alive agent per API server and CA, for the life of the process (a warm Lambda reuses it). */
const agents = new Map<string, Agent>()
function agentFor(endpoint: string, caPem: string): Agent {
  const key = `${endpoint}\0${createHash("sha256").update(caPem).digest("hex")}`
  let agent = agents.get(key)
  if (!agent) {
    // `ca` replaces the system roots: only a certificate the cluster CA signed is accepted.
    agent = new Agent({ ca: caPem, keepAlive: true, maxSockets: 16 })
    agents.set(key, agent)
  }
  return agent
}

const seconds = (ms: number) => (ms < 1000 ? `${ms} ms` : `${Math.round(ms / 1000)} s`)

export interface Answer {
  status: number
  text: string
  retryAfter?: string
}

/** One HTTPS exchange; rejects on a network failure or the timeout. */
function exchange(
  url: URL,
  init: { method: Method; headers: Record<string, string>; body?: string; agent: Agent; timeoutMs: number },
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(url, {
      method: init.method,
      headers: init.headers,
      agent: init.agent,
      signal: AbortSignal.timeout(init.timeoutMs),
    })
    req.on("error", reject)
    req.on("response", (res) => {
      const chunks: Buffer[] = []
      res.on("data", (chunk: Buffer) => chunks.push(chunk))
      res.on("error", reject)
      res.on("end", () => {
        const retryAfter = res.headers["retry-after"]
        resolve({
          status: res.statusCode ?? 0,
          text: Buffer.concat(chunks).toString("utf8"),
          retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter,
        })
      })
    })
    req.end(init.body)
  })
}

export interface CallInit {
  query?: Query
  body?: unknown
  contentType?: string
  /** A create with a name may be retried after a 5xx: a second landing answers 409 AlreadyExists. */
  namedCreate?: boolean
}

/** The call function of one client, and the scrubber of the tokens it has sent. */
export function kubeTransport(options: TransportOptions) {
  const now = options.now ?? Date.now
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)))
  const timeoutMs = options.timeoutMs ?? 30_000
  const retries = options.retries ?? 3
  const backoffMs = options.backoffMs ?? 500
  const maxBackoffMs = options.maxBackoffMs ?? 10_000
  const random = options.random ?? Math.random
  const tokens = new Set<string>()

  /** Never let a token through, even if a server echoes it back. */
  const scrub = (text: string) => {
    let out = text
    for (const token of tokens) out = out.split(token).join("***")
    return out
  }

  /** One call with its retries: the 2xx answer, or a 404's, or a thrown `KubeApiError`. */
  async function call(method: Method, path: string, init: CallInit = {}): Promise<Answer> {
    const { endpoint, caPem } = await options.access.cluster()
    const url = new URL(endpoint.replace(/\/+$/, "") + path)
    for (const [key, value] of Object.entries(init.query ?? {}))
      if (value !== undefined) url.searchParams.append(key, String(value))
    const agent = agentFor(endpoint, caPem)
    const shown = `${method} ${path}`
    const repeatable = method !== "POST" || init.namedCreate === true
    let refreshed = false
    for (let attempt = 0; ; ) {
      const left = options.deadline === undefined ? timeoutMs : options.deadline - now()
      if (left <= 0)
        throw new KubeApiError(
          `Kubernetes ${shown}: the pass's deadline passed before an answer`,
          true,
          method,
          path,
        )
      const token = await options.access.token()
      tokens.add(token)
      const timeout = Math.min(timeoutMs, left)
      let failure: KubeApiError
      let waitAtLeast = 0
      try {
        options.onRequest?.(method, path)
        const answer = await exchange(url, {
          method,
          agent,
          timeoutMs: timeout,
          headers: {
            authorization: `Bearer ${token}`,
            accept: "application/json",
            ...(init.body !== undefined ? { "content-type": init.contentType ?? "application/json" } : {}),
          },
          body: init.body !== undefined ? JSON.stringify(init.body) : undefined,
        })
        if ((answer.status >= 200 && answer.status < 300) || answer.status === 404) return answer
        if (answer.status === 401 && !refreshed) {
          // The token may have lapsed between signing and use: one fresh token, one more try.
          refreshed = true
          tokens.add(await options.access.token({ refresh: true }))
          continue
        }
        const status = statusOf(answer.status, answer.text)
        failure = new KubeApiError(
          scrub(
            `Kubernetes ${shown} answered ${answer.status}${status.reason ? ` ${status.reason}` : ""}${
              status.message ? `: ${status.message}` : ""
            }${hint[answer.status] ?? ""}`,
          ),
          retryableStatus(answer.status, status.reason),
          method,
          path,
          answer.status,
          status.reason,
          status.details,
        )
        waitAtLeast =
          retryAfterMs(answer.retryAfter, now()) ??
          (status.details?.retryAfterSeconds ? status.details.retryAfterSeconds * 1000 : 0)
      } catch (error) {
        // A refused refresh is the access's own error (EKS, credentials), not a network failure.
        if (error instanceof BackendError) throw error
        const timedOut =
          error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError")
        const why = timedOut
          ? `no answer within ${seconds(timeout)}`
          : error instanceof Error
            ? error.message
            : String(error)
        failure = new KubeApiError(
          scrub(`Kubernetes ${shown}: ${why}`),
          true,
          method,
          path,
          undefined,
          undefined,
          undefined,
          {
            cause: error,
          },
        )
      }
      // A 4xx is the request's or the token's fault: retrying cannot help. An unnamed create is tried
      // again only after a 429 (refused before anything was made): after a 5xx it may exist.
      const busy = failure.status === undefined || failure.status === 429 || failure.status >= 500
      if (!busy || (!repeatable && failure.status !== 429)) throw failure
      if (attempt >= retries) throw failure
      const backoff = Math.min(maxBackoffMs, backoffMs * 2 ** attempt) * (0.5 + random() / 2)
      const delay = Math.max(waitAtLeast, backoff)
      if (options.deadline !== undefined && now() + delay >= options.deadline) throw failure
      await sleep(delay)
      attempt++
    }
  }

  return { call, scrub }
}
