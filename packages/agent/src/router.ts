/**
 * The swarm router: one endpoint in front of a swarm's ready replicas. A streaming HTTP reverse proxy
 * (request and response bodies are piped, never buffered, so SSE token streams flow through) that
 * sends each request to the replica with the fewest requests in flight (ties taken in turn), and retries
 * once elsewhere when an upstream cannot be reached: the connection is refused, unreachable, or not up
 * within `connectTimeoutMs` (a machine that is gone drops packets rather than refusing). An upstream
 * that could not be reached is left out for `cooldownMs`, so a lost replica does not cost every Nth
 * request a timeout until the control plane notices; when every upstream is cooling down, all are tried
 * as usual. Per replica it measures what router-metrics.ts says, served at `/_swarmplane/metrics`.
 */
import {
  type ClientRequest,
  createServer,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type Server,
  type ServerResponse,
} from "node:http"
import { request as httpsRequest } from "node:https"
import type { AddressInfo } from "node:net"
import { type Passage, type RouterMetrics, routerMetrics } from "./router-metrics"

/** Path the router answers itself, to tell its own state apart from a replica's. */
export const RouterStatusPath = "/_swarmplane/router"
/** Its measurements of each replica, in Prometheus' text format. */
export const RouterMetricsPath = "/_swarmplane/metrics"

export interface Router {
  readonly server: Server
  /**
   * Replace the upstreams (base URLs such as `http://10.0.0.5:8000`). Requests in flight go on; requests
   * held for want of one (see `holdMs`) go to the new ones.
   */
  setUpstreams(upstreams: readonly string[]): void
  /**
   * A swarm scaled to zero: with no upstream, hold each request up to `ms` for one to come (0: answer
   * 503 at once, the default), then answer 503 with `Retry-After`.
   */
  setHold(ms: number): void
  /** Requests held now for want of an upstream. */
  waiting(): number
  upstreams(): readonly string[]
  /** What it measured of each replica (in flight, answers, tokens, latency percentiles). */
  readonly metrics: RouterMetrics
  listen(port?: number, host?: string): Promise<number>
  close(): Promise<void>
}

/** Headers that describe one connection, not the message; a proxy must not forward them. */
const hopByHop = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
])

export interface RouterOptions {
  /** How long a connection to an upstream may take before the next one is tried. Default 3 s. */
  connectTimeoutMs?: number
  /** How long an unreachable upstream is left out of the rotation. Default 10 s. */
  cooldownMs?: number
  /**
   * How a request picks its replica: the fewest requests in flight (default), or each in turn
   * (`round-robin`, what the router did before; kept as the benchmark's baseline).
   */
  balance?: "least-outstanding" | "round-robin"
  /** Called when a request starts waiting for an upstream (so the agent can ask for a wake at once). */
  onWaiting?: () => void
  now?: () => number
}

/** Connection errors after which nothing was sent, so another upstream can take the request whole. */
const Unreachable = new Set(["ECONNREFUSED", "EHOSTUNREACH", "ENETUNREACH", "EHOSTDOWN", "ECONNTIMEOUT"])

export function createRouter(initial: readonly string[] = [], options: RouterOptions = {}): Router {
  const connectTimeoutMs = options.connectTimeoutMs ?? 3000
  const cooldownMs = options.cooldownMs ?? 10_000
  const byLoad = options.balance !== "round-robin"
  const now = options.now ?? Date.now
  /** Upstream origin → when it may be tried again. */
  const cooling = new Map<string, number>()
  let given: string[] = []
  let targets: URL[] = []
  let next = 0
  const metrics = routerMetrics()
  let holdMs = 0
  /** Requests waiting for an upstream, oldest first. */
  const held = new Set<{ go: () => void; timer: NodeJS.Timeout }>()
  const setUpstreams = (upstreams: readonly string[]) => {
    // An unparsable upstream is skipped rather than failing every request.
    const parsed = upstreams.flatMap((u) => (URL.canParse(u) ? [[u, new URL(u)] as const] : []))
    given = parsed.map(([u]) => u)
    targets = parsed.map(([, url]) => url)
    metrics.retain(targets.map((u) => u.origin))
    if (targets.length > 0)
      for (const h of [...held]) {
        held.delete(h)
        clearTimeout(h.timer)
        h.go()
      }
  }
  setUpstreams(initial)

  /** Hold a request until an upstream comes or `holdMs` passes (then 503 with `Retry-After`). */
  const hold = (req: IncomingMessage, res: ServerResponse, arrived: number) => {
    const entry = {
      go: () => route(req, res, arrived),
      timer: setTimeout(() => {
        held.delete(entry)
        metrics.queued((now() - arrived) / 1000)
        const retryS = Math.max(1, Math.ceil(holdMs / 10_000))
        res.setHeader("retry-after", String(retryS))
        sendError(
          res,
          503,
          "router.waking",
          `the swarm is scaled to zero and no replica was ready within ${Math.round(holdMs / 1000)} s; retry in ${retryS} s`,
        )
      }, holdMs),
    }
    held.add(entry)
    // A client that gave up is not served later.
    res.once("close", () => {
      if (held.delete(entry)) clearTimeout(entry.timer)
    })
    options.onWaiting?.()
  }

  const server = createServer((req, res) => {
    if (req.url === RouterStatusPath) {
      const t = now()
      const coolingDown = given.filter((_, i) => (cooling.get(targets[i]?.origin ?? "") ?? 0) > t)
      // Scaled to zero it is ready too: it holds requests while a replica wakes.
      sendJson(res, 200, { upstreams: given, ready: targets.length > 0 || holdMs > 0, coolingDown })
      return
    }
    if (req.url === RouterMetricsPath && req.method === "GET") {
      const text = metrics.prometheus()
      res.writeHead(200, {
        "content-type": "text/plain; version=0.0.4; charset=utf-8",
        "content-length": Buffer.byteLength(text),
      })
      res.end(text)
      return
    }
    const arrived = now()
    if (targets.length === 0 && holdMs > 0) return hold(req, res, arrived)
    route(req, res, arrived)
  })

  const route = (req: IncomingMessage, res: ServerResponse, arrived: number) => {
    if (targets.length === 0) {
      sendError(res, 503, "router.no_upstream", "no ready replica to route to yet; retry shortly")
      return
    }
    metrics.queued((now() - arrived) / 1000)
    // The fewest in flight among those not cooling down (all, if every one is), ties taken in turn
    // from a rotating start; the retry goes to the next least loaded.
    const t = now()
    const warm = targets.filter((u) => (cooling.get(u.origin) ?? 0) <= t)
    const pool = warm.length > 0 ? warm : targets
    const start = next++ % pool.length
    const order = pool
      .map((u, i) => ({
        u,
        load: byLoad ? metrics.inFlight(u.origin) : 0,
        turn: (i - start + pool.length) % pool.length,
      }))
      .sort((x, y) => x.load - y.load || x.turn - y.turn)
      .slice(0, 2)
      .map((x) => x.u)
    const options: ForwardOptions = {
      connectTimeoutMs,
      unreachable: (u: URL) => cooling.set(u.origin, now() + cooldownMs),
      metrics,
    }
    bufferBody(req, (body) => forward(req, res, [...new Set(order)], options, body))
  }

  return {
    server,
    setUpstreams,
    setHold: (ms: number) => {
      holdMs = Math.max(0, ms)
    },
    waiting: () => held.size,
    upstreams: () => given,
    metrics,
    listen: (port = 0, host = "127.0.0.1") =>
      new Promise((resolve, reject) => {
        server.once("error", reject)
        server.listen(port, host, () => {
          server.off("error", reject)
          resolve((server.address() as AddressInfo).port)
        })
      }),
    close: () =>
      new Promise((resolve) => {
        for (const h of held) clearTimeout(h.timer)
        held.clear()
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}

interface ForwardOptions {
  connectTimeoutMs: number
  /** Called for an upstream that could not be reached. */
  unreachable: (target: URL) => void
  metrics: RouterMetrics
}

/** Request bodies up to this size are held, so a request whose replica dies before answering is sent again. */
export const MaxBufferedBody = 1024 * 1024

/**
 * The request body, whole, when it is small (an LLM request is a few KB); `undefined` for a larger one,
 * which is streamed instead (and read only once a connection is up).
 */
function bufferBody(req: IncomingMessage, then: (body: Buffer | undefined) => void): void {
  // No length and no chunked encoding: no body (a GET).
  const length = Number(req.headers["content-length"] ?? 0)
  if (req.headers["transfer-encoding"] || !(length <= MaxBufferedBody)) {
    then(undefined)
    return
  }
  const chunks: Buffer[] = []
  req.on("data", (chunk: Buffer) => chunks.push(chunk))
  req.once("end", () => then(Buffer.concat(chunks)))
  req.once("error", () => undefined)
}

/**
 * Send the request to the first target; if it cannot be reached, to the next. A streamed body is only
 * read once a connection is up, so an attempt that never connected consumed nothing and the retry is
 * whole. A held body goes to the next target too when the first fails before any of its answer came
 * (a replica that died or was requeued mid-request, a stale kept-alive connection): the client sees
 * one answer, never the failure of a replica that was going away.
 */
function forward(
  req: IncomingMessage,
  res: ServerResponse,
  targets: URL[],
  options: ForwardOptions,
  body?: Buffer,
): void {
  const [target, ...rest] = targets
  if (!target) return
  const upstream = openUpstream(target, req)
  const passage = options.metrics.begin(target.origin)
  let connected = false
  let answered = false
  let timer: NodeJS.Timeout | undefined
  const onConnected = () => {
    clearTimeout(timer)
    connected = true
    if (body) upstream.end(body)
    else req.pipe(upstream)
  }
  upstream.once("socket", (socket) => {
    if (!socket.connecting) return onConnected() // A reused keep-alive connection.
    socket.once("connect", onConnected)
    timer = setTimeout(() => {
      const error: NodeJS.ErrnoException = new Error(`no connection within ${options.connectTimeoutMs} ms`)
      error.code = "ECONNTIMEOUT"
      upstream.destroy(error)
    }, options.connectTimeoutMs)
  })
  upstream.once("response", (answer) => {
    answered = true
    relay(answer, res, passage)
  })
  upstream.on("error", (error: NodeJS.ErrnoException) => {
    clearTimeout(timer)
    const unreachable = !connected && Unreachable.has(error.code ?? "")
    if (unreachable) options.unreachable(target)
    if (answered) passage.done()
    else passage.failed()
    const again = unreachable || (body !== undefined && !answered && !res.headersSent && !clientGone(res))
    if (again && rest.length > 0) return forward(req, res, rest, options, body)
    if (!res.headersSent)
      sendError(res, 502, "router.upstream_failed", `upstream ${target.origin} failed: ${error.message}`)
    else res.destroy(error)
  })
  // A client that goes away must not leave a generation running upstream.
  res.once("close", () => {
    if (!res.writableFinished) upstream.destroy()
    // The client went away before any answer: nothing more will come of this passage.
    if (!answered) passage.failed()
  })
}

const clientGone = (res: ServerResponse) => res.destroyed || res.writableEnded

function openUpstream(target: URL, req: IncomingMessage): ClientRequest {
  const request = target.protocol === "https:" ? httpsRequest : httpRequest
  const base = target.pathname.replace(/\/$/, "")
  const headers = forwardedHeaders(req, target)
  return request({
    protocol: target.protocol,
    hostname: target.hostname.replace(/^\[|\]$/g, ""),
    port: target.port || undefined,
    method: req.method,
    path: base + (req.url ?? "/"),
    headers,
  })
}

/** The client's headers minus hop-by-hop ones, with the upstream's host and `x-forwarded-*` added. */
export function forwardedHeaders(req: IncomingMessage, target: URL): OutgoingHttpHeaders {
  const headers = withoutHopByHop(req.headers)
  const client = req.socket.remoteAddress ?? ""
  const prior = req.headers["x-forwarded-for"]
  headers["x-forwarded-for"] = prior ? `${prior}, ${client}` : client
  if (req.headers.host) headers["x-forwarded-host"] ??= req.headers.host
  headers["x-forwarded-proto"] ??= "http"
  headers.host = target.host
  return headers
}

function relay(answer: IncomingMessage, res: ServerResponse, passage: Passage): void {
  res.writeHead(answer.statusCode ?? 502, answer.statusMessage, withoutHopByHop(answer.headers))
  passage.answered(answer.statusCode ?? 502, answer.headers["content-type"])
  // Flush headers at once: a streaming answer should reach the client as soon as it starts.
  res.flushHeaders()
  // Measured as it goes by (never held back), then piped on untouched.
  answer.on("data", (chunk: Buffer) => passage.chunk(chunk))
  answer.once("end", () => passage.done())
  answer.once("close", () => passage.done())
  answer.pipe(res)
  answer.once("error", (error) => res.destroy(error))
}

function withoutHopByHop(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  // Headers named in `Connection` are hop-by-hop too.
  const named = String(headers.connection ?? "")
    .split(",")
    .map((h) => h.trim().toLowerCase())
  const out: OutgoingHttpHeaders = {}
  for (const [key, value] of Object.entries(headers))
    if (value !== undefined && !hopByHop.has(key) && !named.includes(key)) out[key] = value
  return out
}

function sendError(res: ServerResponse, status: 502 | 503, code: string, message: string): void {
  // Both shapes in one: swarmplane's `{ code, message, details }` and the `type` OpenAI clients read.
  const type = status === 503 ? "service_unavailable" : "bad_gateway"
  sendJson(res, status, { error: { code, message, type, details: [] } })
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body)
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) })
  res.end(text)
}
