/**
 * The agent's side of `/v1/workers`: register and heartbeat over HTTPS with `fetch`. Every failure is
 * an `ApiError` that says whether trying again can help, so the loop never has to read status codes.
 */
import type { z } from "@hono/zod-openapi"
import { retryAfterMs } from "@swarmplane/core/contract/retry-after"
import {
  type DesiredAttempt,
  type ObservedAttempt,
  type RegisterWorkerRequest,
  WorkerCredentialHeader,
} from "@swarmplane/core/contract/worker"

export type RegisterBody = z.input<typeof RegisterWorkerRequest>

export interface Registration {
  workerId: string
  heartbeatIntervalS: number
}

export interface HeartbeatAnswer {
  desired: DesiredAttempt[]
  heartbeatIntervalS: number
  /** The longest the control plane holds a heartbeat that asks to wait; absent: it does not hold them. */
  holdS?: number
}

export interface ControlPlane {
  /** Register; `idempotencyKey` makes a retry after a lost answer return the same worker. */
  register(body: RegisterBody, idempotencyKey: string, signal?: AbortSignal): Promise<Registration>
  /**
   * `waitS`: ask the control plane to hold the answer until the desired set changes, at most this long
   * (a long-poll); absent or 0, it answers at once.
   */
  heartbeat(
    workerId: string,
    attempts: ObservedAttempt[],
    signal?: AbortSignal,
    waitS?: number,
  ): Promise<HeartbeatAnswer>
  /** Shutting down on purpose: the worker is dead at once rather than after the heartbeat grace. */
  leave(workerId: string): Promise<void>
}

/** A failed call. `status` 0 means no HTTP answer at all (network, timeout). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly retryable: boolean,
    /** The server's `Retry-After` (429, 503): no try before this many ms. */
    readonly retryAfterMs?: number,
  ) {
    super(message)
  }

  /** The control plane declared this worker dead (or forgot it): its id is no use any more. */
  get workerGone(): boolean {
    return this.status === 410 || (this.status === 404 && this.code === "worker.not_found")
  }
}

export interface ControlPlaneOptions {
  /** Base URL, e.g. `https://abc.lambda-url.us-east-1.on.aws` or `http://127.0.0.1:8787`. */
  api: string
  token: string
  fetch?: typeof fetch
  /** Per request; a heartbeat that hangs must not hold up the next one for long. */
  timeoutMs?: number
}

export function controlPlane(options: ControlPlaneOptions): ControlPlane {
  const doFetch = options.fetch ?? fetch
  const base = options.api.replace(/\/+$/, "")
  // The credential each registration returned: only it may heartbeat or leave as that worker.
  const credentials = new Map<string, string>()
  const as = (workerId: string): Record<string, string> => {
    const credential = credentials.get(workerId)
    return credential ? { [WorkerCredentialHeader]: credential } : {}
  }

  async function post(
    path: string,
    body: unknown,
    headers: Record<string, string>,
    signal?: AbortSignal,
    heldMs = 0,
  ) {
    // A held heartbeat may take its hold on top of the usual answer time.
    const timeout = AbortSignal.timeout((options.timeoutMs ?? 15_000) + heldMs)
    let res: Response
    try {
      res = await doFetch(`${base}${path}`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${options.token}`,
          "content-type": "application/json",
          ...headers,
        },
        body: JSON.stringify(body),
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      })
    } catch (error) {
      const cause = error instanceof Error ? (error.cause ?? error) : error
      throw new ApiError(0, "network", `POST ${path}: ${describe(cause)}`, true)
    }
    const text = await res.text().catch(() => "")
    const json = parseJson(text)
    if (res.ok && json !== undefined) return json
    const error = isRecord(json) && isRecord(json.error) ? json.error : {}
    const code =
      typeof error.code === "string" ? error.code : res.ok ? "response.invalid" : `http.${res.status}`
    const message = typeof error.message === "string" ? error.message : text.slice(0, 200) || res.statusText
    // 409: an earlier try with the same idempotency key is still running; 429 and 5xx: transient.
    const retryable = res.ok || [408, 409, 429].includes(res.status) || res.status >= 500
    throw new ApiError(
      res.status,
      code,
      `POST ${path}: ${res.status} ${code}: ${message}`,
      retryable,
      retryAfterMs(res.headers.get("retry-after"), Date.now(), 60_000),
    )
  }

  return {
    async register(body, idempotencyKey, signal) {
      const json = await post("/v1/workers/register", body, { "idempotency-key": idempotencyKey }, signal)
      const worker = isRecord(json) && isRecord(json.worker) ? json.worker : {}
      if (typeof worker.id !== "string") throw invalid("/v1/workers/register", "no worker.id")
      if (isRecord(json) && typeof json.credential === "string") credentials.set(worker.id, json.credential)
      return { workerId: worker.id, heartbeatIntervalS: intervalOf(json) }
    },
    async heartbeat(workerId, attempts, signal, waitS) {
      const path = `/v1/workers/${encodeURIComponent(workerId)}/heartbeat`
      const query = waitS ? `?waitS=${Math.round(waitS)}` : ""
      const json = await post(`${path}${query}`, { attempts }, as(workerId), signal, (waitS ?? 0) * 1000)
      const desired = isRecord(json) ? json.desired : undefined
      if (!Array.isArray(desired) || !desired.every(isDesired)) throw invalid(path, "bad desired set")
      const holdS = isRecord(json) && typeof json.holdS === "number" ? json.holdS : undefined
      return { desired, heartbeatIntervalS: intervalOf(json), ...(holdS !== undefined ? { holdS } : {}) }
    },
    async leave(workerId) {
      await post(`/v1/workers/${encodeURIComponent(workerId)}/leave`, {}, as(workerId))
    },
  }
}

/** Just enough checking that a malformed answer cannot make the agent stop or start the wrong work. */
function isDesired(value: unknown): value is DesiredAttempt {
  return (
    isRecord(value) &&
    typeof value.attemptUid === "string" &&
    (value.action === "run" || value.action === "stop") &&
    (value.kind === "task" || value.kind === "replica" || value.kind === "router") &&
    (value.command === undefined ||
      (Array.isArray(value.command) && value.command.every((a) => typeof a === "string")))
  )
}

function intervalOf(json: unknown): number {
  const s = isRecord(json) ? json.heartbeatIntervalS : undefined
  return typeof s === "number" && Number.isFinite(s) && s >= 0 ? s : 10
}

function invalid(path: string, what: string): ApiError {
  // A control plane mid-deploy can answer oddly for a moment; trying again is the right response.
  return new ApiError(200, "response.invalid", `POST ${path}: unexpected answer (${what})`, true)
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value)
}

function describe(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as NodeJS.ErrnoException).code
    return code && !error.message.includes(code) ? `${code} ${error.message}` : error.message
  }
  return String(error)
}
