/**
 * A fake control plane for the agent's tests: `/v1/workers/register` and `/v1/workers/{id}/heartbeat`
 * over real HTTP, checking every request against the control plane's own schemas (so the agent is
 * held to the contract), recording what it was told, and handing out a desired set the test sets.
 */
import { once } from "node:events"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import {
  type DesiredAttempt,
  HeartbeatRequest,
  type ObservedAttempt,
  RegisterWorkerRequest,
  WorkerCredentialHeader,
} from "@swarmplane/core/contract"

export interface Heartbeat {
  workerId: string
  attempts: ObservedAttempt[]
  at: number
  /** The `waitS` the agent asked for, if any. */
  waitS?: number
}

export interface FakeControlPlane {
  url: string
  token: string
  registrations: { workerId: string; body: unknown; idempotencyKey: string | undefined }[]
  heartbeats: Heartbeat[]
  /** Heartbeats answered with an injected failure. */
  rejected: number
  /** When each refused heartbeat arrived (ms since the epoch). */
  rejectedAt: number[]
  /** Workers that left (`POST /v1/workers/{id}/leave`), in order. */
  left: string[]
  /** Requests that broke the contract (bad body, bad token); a test should expect none. */
  violations: string[]
  /** The desired set every worker gets from now on. */
  setDesired(desired: DesiredAttempt[]): void
  /** Answer the next heartbeats of this worker with 410 `worker.dead`. */
  declareDead(workerId: string): void
  /** Answer heartbeats with this status (e.g. 503, or 429 with a `Retry-After` in s) until set back to undefined. */
  failWith(status: number | undefined, retryAfterS?: number): void
  /** The newest report of an attempt, if any heartbeat carried it. */
  latest(attemptUid: string): ObservedAttempt | undefined
  /** Resolve with the first report of the attempt (from now on) that matches; reject at the deadline. */
  waitForReport(
    attemptUid: string,
    match: (report: ObservedAttempt) => boolean,
    timeoutMs?: number,
  ): Promise<ObservedAttempt>
  /** Resolve once a heartbeat matches (the next ones, from now on); reject at the deadline. */
  waitForHeartbeat(match: (beat: Heartbeat) => boolean, timeoutMs?: number): Promise<Heartbeat>
  close(): Promise<void>
}

/**
 * `holdS`: hold heartbeats that ask to wait, as the real control plane does, until `setDesired` or
 * the wait ends (and say so in answers); absent, heartbeats are answered at once, as by a control
 * plane from before held heartbeats.
 */
export async function startFakeControlPlane(
  options: { token?: string; heartbeatIntervalS?: number; holdS?: number } = {},
): Promise<FakeControlPlane> {
  const token = options.token ?? "test-token"
  const interval = options.heartbeatIntervalS ?? 1
  let desired: DesiredAttempt[] = []
  let failure: number | undefined
  let failureRetryAfter: number | undefined
  const dead = new Set<string>()
  // Each worker's credential, as the real control plane issues them: only it may heartbeat or leave.
  const workers = new Map<string, string>()
  const actingAs = (req: IncomingMessage, workerId: string) =>
    req.headers[WorkerCredentialHeader.toLowerCase()] === workers.get(workerId)
  const waiters = new Set<(beat: Heartbeat) => void>()
  /** Held heartbeats, answered when the desired set is set. */
  const held = new Set<() => void>()
  const fake: Omit<FakeControlPlane, "url" | "close"> = {
    token,
    registrations: [],
    heartbeats: [],
    rejected: 0,
    rejectedAt: [],
    left: [],
    violations: [],
    setDesired: (next) => {
      desired = next
      for (const answer of [...held]) answer()
    },
    declareDead: (id) => dead.add(id),
    failWith: (status, retryAfterS) => {
      failure = status
      failureRetryAfter = retryAfterS
    },
    latest: (uid) =>
      fake.heartbeats
        .flatMap((b) => b.attempts)
        .filter((a) => a.attemptUid === uid)
        .at(-1),
    waitForReport: async (uid, match, timeoutMs) => {
      const beat = await fake.waitForHeartbeat(
        (b) => b.attempts.some((a) => a.attemptUid === uid && match(a)),
        timeoutMs,
      )
      return beat.attempts.find((a) => a.attemptUid === uid && match(a)) as ObservedAttempt
    },
    waitForHeartbeat: (match, timeoutMs = 20_000) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(check)
          reject(
            new Error(
              `no matching heartbeat within ${timeoutMs} ms; last: ${JSON.stringify(fake.heartbeats.at(-1))}`,
            ),
          )
        }, timeoutMs)
        const check = (beat: Heartbeat) => {
          if (!match(beat)) return
          clearTimeout(timer)
          waiters.delete(check)
          resolve(beat)
        }
        waiters.add(check)
      }),
  }

  const server = createServer(async (req, res) => {
    const text = await readBody(req)
    if (req.headers.authorization !== `Bearer ${token}`) {
      fake.violations.push(`bad authorization on ${req.url}`)
      return send(res, 401, error("auth.unauthorized", "bad token"))
    }
    const body: unknown = JSON.parse(text)
    const [path = "", query = ""] = (req.url ?? "").split("?")
    const waitS = Number(new URLSearchParams(query).get("waitS") ?? 0)
    if (req.method === "POST" && path === "/v1/workers/register") {
      const parsed = RegisterWorkerRequest.safeParse(body)
      if (!parsed.success) return violation(res, `register: ${parsed.error.message}`)
      const workerId = `w-${fake.registrations.length + 1}`
      const key = req.headers["idempotency-key"]
      fake.registrations.push({ workerId, body, idempotencyKey: typeof key === "string" ? key : undefined })
      const credential = `swc_fake-${workerId}`
      workers.set(workerId, credential)
      return send(res, 201, {
        worker: { id: workerId, ...parsed.data },
        heartbeatIntervalS: interval,
        credential,
      })
    }
    const leaving = /^\/v1\/workers\/([^/]+)\/leave$/.exec(path)
    if (req.method === "POST" && leaving?.[1]) {
      const workerId = decodeURIComponent(leaving[1])
      if (!workers.has(workerId)) return send(res, 404, error("worker.not_found", `worker ${workerId}`))
      if (!actingAs(req, workerId)) {
        fake.violations.push(`leave of ${workerId} without its credential`)
        return send(res, 403, error("worker.credential_invalid", "not this worker's credential"))
      }
      dead.add(workerId)
      fake.left.push(workerId)
      return send(res, 200, { id: workerId, health: "dead" })
    }
    const match = /^\/v1\/workers\/([^/]+)\/heartbeat$/.exec(path)
    if (req.method === "POST" && match?.[1]) {
      const workerId = decodeURIComponent(match[1])
      if (!workers.has(workerId)) return send(res, 404, error("worker.not_found", `worker ${workerId}`))
      if (!actingAs(req, workerId)) {
        fake.violations.push(`heartbeat of ${workerId} without its credential`)
        return send(res, 403, error("worker.credential_invalid", "not this worker's credential"))
      }
      if (dead.has(workerId))
        return send(res, 410, error("worker.dead", `worker ${workerId} was declared dead`))
      if (failure) {
        fake.rejected++
        fake.rejectedAt.push(Date.now())
        const headers: Record<string, string> =
          failureRetryAfter === undefined ? {} : { "retry-after": String(failureRetryAfter) }
        return send(res, failure, error("internal", "injected failure"), headers)
      }
      const parsed = HeartbeatRequest.safeParse(body)
      if (!parsed.success) return violation(res, `heartbeat: ${parsed.error.message}`)
      const beat = { workerId, attempts: parsed.data.attempts, at: Date.now(), ...(waitS ? { waitS } : {}) }
      fake.heartbeats.push(beat)
      for (const waiter of [...waiters]) waiter(beat)
      const holdS = options.holdS
      if (holdS && waitS > 0) {
        // Held until the test changes the desired set, the wait ends, or the agent goes away.
        await new Promise<void>((resolve) => {
          const timer = setTimeout(done, Math.min(waitS, holdS) * 1000)
          function done() {
            clearTimeout(timer)
            held.delete(done)
            resolve()
          }
          held.add(done)
          res.once("close", done)
        })
        if (res.destroyed) return
      }
      return send(res, 200, { desired, heartbeatIntervalS: interval, ...(holdS ? { holdS } : {}) })
    }
    return send(res, 404, error("route.not_found", `no route ${req.method} ${path}`))
  })

  const violation = (res: ServerResponse, message: string) => {
    fake.violations.push(message)
    send(res, 400, error("request.invalid", message))
  }

  server.listen(0, "127.0.0.1")
  await once(server, "listening")
  const { port } = server.address() as AddressInfo
  // The same object, not a copy: counters such as `rejected` must stay live.
  return Object.assign(fake, {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  })
}

function error(code: string, message: string) {
  return { error: { code, message, details: [] } }
}

function send(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, { "content-type": "application/json", ...headers })
  res.end(JSON.stringify(body))
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = []
  for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk)
  return Buffer.concat(chunks).toString("utf8")
}
