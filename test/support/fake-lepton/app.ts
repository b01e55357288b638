/**
 * The fake Lepton's HTTP surface (Part A of the backend contracts): the workspace-scoped API under
 * `/api/v2/workspaces/{workspace_id}` with bearer auth (401 missing or wrong token, 403 a token of
 * another workspace, 404 an unknown workspace), errors as `{code, message}`, injected faults (429 with
 * `Retry-After`, 500, 503; before serving, or after it as a lost answer; slow answers) for testing a
 * client's retries and a backend's fault runs, and the deployments' endpoints under
 * `/endpoints/{workspace_id}/{deployment}`.
 */
import { type Context, Hono } from "hono"
import { stream } from "hono/streaming"
import type { Deployments } from "./deployments"
import type { Jobs, QueryMode } from "./jobs"
import type { NodeGroups } from "./node-groups"
import { type Json, LeptonError, type ReplicaLog, type Workspace } from "./state"

/** A request as a fault's `when` sees it: one object per request, whichever faults it is shown to. */
export interface FaultRequest {
  method: string
  /** The path after the workspace base, e.g. `/jobs/abc`. */
  path: string
}

/**
 * A fault the next matching requests answer with, instead of being served; with `after`, once they
 * were served (the request took effect, its answer is lost); with only `delayMs`, they are served late.
 */
export interface Fault {
  /** How many requests it answers (default 1; `Infinity` for every matching one). */
  count?: number
  /** The status answered; none: the request is served as usual, `delayMs` late. */
  status?: 429 | 500 | 503
  /** For a 429: the `Retry-After` seconds (default 1). */
  retryAfterSeconds?: number
  method?: string
  /** Matches the path after the workspace base (e.g. `/jobs`): a prefix, or a RegExp. */
  path?: string | RegExp
  /** Serve the request first, then answer with `status`: a create that landed whose answer was lost. */
  after?: boolean
  /** Answer this many ms later (a slow Lepton): before serving, or with `after` once served. */
  delayMs?: number | ((request: FaultRequest) => number)
  /** Only the requests this accepts (a test's seeded dice); one it declines does not use up `count`. */
  when?: (request: FaultRequest) => boolean
}

export interface FakeLeptonState {
  ws: Workspace
  token: string
  /** Other workspaces of the same "environment": their tokens are valid, but not here (403). */
  others: Map<string, string>
  deployments: Deployments
  jobs: Jobs
  nodeGroups: NodeGroups
  faults: Fault[]
  /** Requests the API received (method and path after the base), faults included. */
  requests: { method: string; path: string; query: string }[]
  /** The server's cap on a list's `page_size`: a larger one gets this many (and the client pages on). */
  maxPageSize: number
}

const modes = new Set(["alive_only", "archive_only", "alive_and_archive"])

export function fakeLeptonApp(s: FakeLeptonState): Hono {
  const app = new Hono()
  const base = `/api/v2/workspaces/${s.ws.id}`

  app.onError((error) => {
    if (error instanceof LeptonError)
      return Response.json({ code: error.code, message: error.message }, { status: error.status })
    return Response.json({ code: "InternalError", message: "internal error" }, { status: 500 })
  })

  app.all("/endpoints/:ws/:deployment/*", (c) => {
    const prefix = `/endpoints/${c.req.param("ws")}/${c.req.param("deployment")}`
    if (c.req.param("ws") !== s.ws.id) return c.text("no such endpoint\n", 404)
    const path = c.req.path.slice(prefix.length) + new URL(c.req.url).search
    return s.deployments.forward(c.req.param("deployment"), path, c.req.raw)
  })

  // Auth and injected faults, for everything under any workspace's base.
  app.use("/api/v2/workspaces/:ws/*", async (c, next) => {
    const path = c.req.path.slice(`/api/v2/workspaces/${c.req.param("ws")}`.length)
    s.requests.push({ method: c.req.method, path, query: new URL(c.req.url).searchParams.toString() })
    const request: FaultRequest = { method: c.req.method, path }
    const fault = takeFault(s.faults, request)
    if (fault && !fault.after) {
      await delay(fault, request)
      if (fault.status !== undefined) return faultAnswer(fault.status, fault.retryAfterSeconds)
    }
    const ws = c.req.param("ws")
    const auth = c.req.header("authorization") ?? ""
    const token = auth.startsWith("Bearer ") ? auth.slice("Bearer ".length) : undefined
    if (ws !== s.ws.id && !s.others.has(ws))
      throw new LeptonError(404, "NotFound", `workspace ${ws} not found`)
    const own = ws === s.ws.id ? s.token : s.others.get(ws)
    if (token !== own) {
      const elsewhere = token !== undefined && [s.token, ...s.others.values()].includes(token)
      if (elsewhere) throw new LeptonError(403, "Forbidden", "the token is not valid for this workspace")
      throw new LeptonError(401, "Unauthorized", "missing or invalid token")
    }
    await next()
    if (fault?.after) {
      await delay(fault, request)
      if (fault.status !== undefined) c.res = faultAnswer(fault.status, fault.retryAfterSeconds)
    }
  })

  // The workspace resolver (the gateway's own route, under the same auth).
  app.get(`/api/v2/workspaces/:ws`, (c) => {
    const ws = c.req.param("ws")
    if (ws !== s.ws.id && !s.others.has(ws))
      throw new LeptonError(404, "NotFound", `workspace ${ws} not found`)
    return c.json({ id: ws, display_name: ws })
  })
  app.get(`${base}/workspace`, (c) => c.json(workspaceInfo(s)))
  app.get(`${base}/tokens`, (c) =>
    c.json([{ masked_value: mask(s.token), expires_at: s.ws.now() + 86_400_000 }]),
  )

  app.get(`${base}/dedicated-node-groups`, (c) => c.json(s.nodeGroups.list()))
  app.get(`${base}/dedicated-node-groups/:id`, (c) => c.json(s.nodeGroups.get(c.req.param("id"))))
  app.get(`${base}/dedicated-node-groups/:id/nodes`, (c) => c.json(s.nodeGroups.nodes(c.req.param("id"))))
  app.get(`${base}/shapes`, (c) => c.json(s.nodeGroups.shapes(c.req.query("node_groups"))))

  app.get(`${base}/deployments`, (c) => c.json(s.deployments.list()))
  app.post(`${base}/deployments`, async (c) => c.json(s.deployments.create(await body(c.req.raw))))
  app.get(`${base}/deployments/:id`, (c) => c.json(s.deployments.get(c.req.param("id"))))
  app.patch(`${base}/deployments/:id`, async (c) =>
    c.json(s.deployments.patch(c.req.param("id"), await body(c.req.raw), c.req.query("dryrun") === "true")),
  )
  app.put(`${base}/deployments/:id/restart`, (c) => c.json(s.deployments.restart(c.req.param("id"))))
  app.delete(`${base}/deployments/:id`, (c) => c.json(s.deployments.delete(c.req.param("id"))))
  app.get(`${base}/deployments/:id/readiness`, (c) => c.json(s.deployments.readiness(c.req.param("id"))))
  app.get(`${base}/deployments/:id/termination`, (c) => c.json(s.deployments.terminations(c.req.param("id"))))
  app.get(`${base}/deployments/:id/replicas`, (c) => c.json(s.deployments.replicas(c.req.param("id"))))
  app.get(`${base}/deployments/:id/replicas/:replica/log`, (c) =>
    replicaLog(c, s.deployments.log(c.req.param("id"), c.req.param("replica"))),
  )
  app.get(`${base}/deployments/:id/events`, (c) => {
    s.deployments.get(c.req.param("id")) // 404 for an unknown deployment; the fake records no events
    return c.json([])
  })

  app.get(`${base}/jobs`, (c) => {
    const page = positive(c.req.query("page"), "page", 1)
    const pageSize = Math.min(positive(c.req.query("page_size"), "page_size", 50), s.maxPageSize)
    const states = c.req.queries("status") ?? []
    return c.json({
      jobs: s.jobs.list(mode(c.req.query("job_query_mode"), "alive_only"), page, pageSize, states),
    })
  })
  app.post(`${base}/jobs`, async (c) => c.json(s.jobs.create(await body(c.req.raw))))
  app.get(`${base}/jobs/:id`, (c) =>
    c.json(s.jobs.get(c.req.param("id"), mode(c.req.query("job_query_mode"), "alive_and_archive"))),
  )
  app.patch(`${base}/jobs/:id`, async (c) => c.json(s.jobs.patch(c.req.param("id"), await body(c.req.raw))))
  app.delete(`${base}/jobs/:id`, (c) =>
    c.json(s.jobs.delete(c.req.param("id"), mode(c.req.query("job_query_mode"), "alive_and_archive"))),
  )
  app.get(`${base}/jobs/:id/replicas`, (c) =>
    c.json(s.jobs.replicas(c.req.param("id"), mode(c.req.query("job_query_mode"), "alive_and_archive"))),
  )
  app.get(`${base}/jobs/:id/replicas/:replica/log`, (c) =>
    replicaLog(c, s.jobs.log(c.req.param("id"), c.req.param("replica"))),
  )
  app.get(`${base}/jobs/:id/events`, (c) => {
    s.jobs.get(c.req.param("id"), "alive_and_archive") // 404 for an unknown job; no events recorded
    return c.json([])
  })

  app.get(`${base}/usersecrets`, (c) => c.json([...s.ws.secrets.keys()].map((name) => ({ name }))))
  app.post(`${base}/usersecrets`, async (c) => {
    const items = await body(c.req.raw)
    if (!Array.isArray(items)) throw new LeptonError(400, "InvalidRequest", "body: an array of {name, value}")
    for (const i of items)
      if (
        i &&
        typeof i === "object" &&
        !Array.isArray(i) &&
        typeof i.name === "string" &&
        typeof i.value === "string"
      )
        s.ws.secrets.set(i.name, i.value)
      else throw new LeptonError(400, "InvalidRequest", "body: each secret needs a name and a string value")
    return c.json({})
  })

  app.all("*", () => {
    throw new LeptonError(404, "NotFound", "no such resource")
  })
  return app
}

/**
 * A replica's log as Lepton serves it: streamed text that stays open while the replica runs (what it
 * writes is sent as it comes) and ends when it exits, or at once for one that has ended.
 */
function replicaLog(c: Context, log: ReplicaLog): Response {
  const live = log.live
  if (!live?.isAlive()) return c.text(log.text)
  c.header("Content-Type", "text/plain; charset=UTF-8")
  return stream(c, async (out) => {
    const stop: (() => void)[] = []
    const ended = new Promise<void>((resolve) => {
      stop.push(live.onOutput((text) => void out.write(text)))
      void live.exited.then(() => resolve())
      out.onAbort(() => resolve())
    })
    await out.write(log.text)
    await ended
    for (const s of stop) s()
  })
}

function takeFault(faults: Fault[], request: FaultRequest): Fault | undefined {
  const { method, path } = request
  const i = faults.findIndex(
    (f) =>
      (f.method === undefined || f.method.toUpperCase() === method) &&
      (f.path === undefined || (typeof f.path === "string" ? path.startsWith(f.path) : f.path.test(path))) &&
      (f.when?.(request) ?? true),
  )
  const fault = faults[i]
  if (!fault) return undefined
  fault.count = (fault.count ?? 1) - 1
  if (fault.count <= 0) faults.splice(i, 1)
  return fault
}

/** An injected fault's answer: a 429 with `Retry-After`, or a 5xx, as `{code, message}`. */
function faultAnswer(status: 429 | 500 | 503, retryAfterSeconds = 1): Response {
  const headers: Record<string, string> = status === 429 ? { "Retry-After": String(retryAfterSeconds) } : {}
  const code = status === 429 ? "TooManyRequests" : "ServiceUnavailable"
  return Response.json({ code, message: `injected ${status}` }, { status, headers })
}

async function delay(fault: Fault, request: FaultRequest): Promise<void> {
  const ms = typeof fault.delayMs === "function" ? fault.delayMs(request) : (fault.delayMs ?? 0)
  if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms))
}

async function body(request: Request): Promise<Json> {
  try {
    return (await request.json()) as Json
  } catch {
    throw new LeptonError(400, "InvalidRequest", "body: must be JSON")
  }
}

function positive(raw: string | undefined, name: string, fallback: number): number {
  if (raw === undefined) return fallback
  const n = Number(raw)
  if (!Number.isInteger(n) || n < 1)
    throw new LeptonError(400, "InvalidRequest", `${name}: must be an integer >= 1`)
  return n
}

function mode(raw: string | undefined, fallback: QueryMode): QueryMode {
  if (raw === undefined) return fallback
  if (!modes.has(raw))
    throw new LeptonError(
      400,
      "InvalidRequest",
      "job_query_mode: one of alive_only, archive_only, alive_and_archive",
    )
  return raw as QueryMode
}

function mask(token: string): string {
  return `${token.slice(0, 2)}...${token.slice(-2)}`
}

/** `WorkspaceInfo`: one CPU shape; the quota is the fake's capacity in "accelerators". */
function workspaceInfo(s: FakeLeptonState) {
  const limit = Number.isFinite(s.ws.capacity) ? s.ws.capacity : 1_000_000
  return {
    build_time: "2026-07-01T00:00:00Z",
    git_commit: "fake-lepton",
    workspace_name: s.ws.id,
    workspace_tier: "enterprise",
    workspace_state: "normal",
    supported_shapes: {
      "cpu.small": {
        description: "a local process",
        cpu: 1,
        memory: 1024,
        accelerator_type: "",
        accelerator_num: 0,
      },
    },
    workspace_disk_usage_bytes: 0,
    workloads: {
      num_deployments: s.deployments.list().length,
      num_jobs: s.jobs.list("alive_only", 1, Number.MAX_SAFE_INTEGER, []).length,
      num_pods: 0,
      num_secrets: s.ws.secrets.size,
      num_image_pull_secrets: 0,
    },
    resource_quota: {
      limit: { cpu: limit, memory: limit * 1024, accelerator_num: limit },
      used: { cpu: s.ws.used(), memory: s.ws.used() * 1024, accelerator_num: s.ws.used() },
    },
  }
}
