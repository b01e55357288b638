/**
 * The Lepton client against a small scripted HTTP server: each request gets the next scripted answer
 * (a status and body, a hang, or a dropped connection), and every request is recorded. Backoff waits go
 * to an injected sleep that only advances an injected clock, so no test waits in real time for them.
 */
import { createServer, type IncomingMessage, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { afterEach, describe, expect, test } from "vitest"
import { LeptonApiError, type LeptonClientOptions, leptonClient } from "./client"

const Token = "tok-SECRET-4242"

type Answer =
  | { status: number; body?: unknown; headers?: Record<string, string> }
  | "hang"
  | "drop"
  | ((url: URL) => { status: number; body?: unknown })

interface Seen {
  method: string
  url: URL
  authorization?: string
  body?: unknown
}

const servers: Server[] = []
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  }
})

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  const text = Buffer.concat(chunks).toString()
  return text ? JSON.parse(text) : undefined
}

/** A server answering `script` in order (the last answer repeats), and a client of it. */
async function scripted(script: Answer[], options: Partial<LeptonClientOptions> = {}) {
  const seen: Seen[] = []
  let next = 0
  const server = createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", "http://x")
    seen.push({
      method: req.method ?? "",
      url,
      authorization: req.headers.authorization,
      body: await readBody(req),
    })
    const answer = script[Math.min(next++, script.length - 1)]!
    if (answer === "hang") return
    if (answer === "drop") return req.socket.destroy()
    const { status, body, headers } = typeof answer === "function" ? { ...answer(url), headers: {} } : answer
    res.writeHead(status, { "content-type": "application/json", ...headers })
    res.end(body === undefined ? "" : typeof body === "string" ? body : JSON.stringify(body))
  })
  servers.push(server)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as AddressInfo).port
  let now = Date.parse("2026-01-01T00:00:00Z")
  const waits: number[] = []
  const client = leptonClient({
    baseUrl: `http://127.0.0.1:${port}/api/v2/workspaces/ws123/`,
    token: Token,
    now: () => now,
    sleep: async (ms) => {
      waits.push(ms)
      now += ms
    },
    random: () => 0,
    timeoutMs: 5_000,
    retries: 3,
    ...options,
  })
  return { client, seen, waits, advance: (ms: number) => (now += ms), now: () => now }
}

const deployment = (id: string, state: string) => ({
  metadata: { id, name: id, brand_new_field: 1 },
  spec: { whatever: true },
  status: { state, endpoint: { internal_endpoint: "http://in", external_endpoint: "https://out" } },
})

/** The error a call threw (it must throw). */
async function failure(call: Promise<unknown>): Promise<LeptonApiError> {
  const error = await call.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(error).toBeInstanceOf(LeptonApiError)
  return error as LeptonApiError
}

describe("the Lepton client", () => {
  test("sends the token as a bearer token under the workspace base, and reads unknown fields and states", async () => {
    const { client, seen } = await scripted([{ status: 200, body: deployment("sp-a", "Hibernating") }])
    const got = await client.deployments.get("sp-a")
    expect(got?.status?.state).toBe("Hibernating")
    expect(got?.metadata.id).toBe("sp-a")
    expect(seen[0]!.url.pathname).toBe("/api/v2/workspaces/ws123/deployments/sp-a")
    expect(seen[0]!.authorization).toBe(`Bearer ${Token}`)
  })

  test("a 500 then a 200 is retried once after a backoff, and succeeds", async () => {
    const { client, seen, waits } = await scripted([
      { status: 500, body: { code: "Internal", message: "oops" } },
      { status: 200, body: [deployment("sp-a", "Ready")] },
    ])
    const list = await client.deployments.list()
    expect(list.map((d) => d.metadata.id)).toEqual(["sp-a"])
    expect(seen).toHaveLength(2)
    expect(waits).toHaveLength(1)
    expect(waits[0]).toBeGreaterThan(0)
  })

  test("a dropped connection is retried", async () => {
    const { client, seen } = await scripted(["drop", { status: 200, body: deployment("sp-a", "Ready") }])
    expect((await client.deployments.get("sp-a"))?.status?.state).toBe("Ready")
    expect(seen).toHaveLength(2)
  })

  test("a 429 with Retry-After: 2 waits at least 2 s of the injected clock before trying again", async () => {
    const { client, seen, waits } = await scripted([
      {
        status: 429,
        body: { code: "TooManyRequests", message: "slow down" },
        headers: { "retry-after": "2" },
      },
      { status: 200, body: { workspace_name: "my-ws", workspace_state: "normal", new_thing: [] } },
    ])
    expect((await client.workspace()).workspace_name).toBe("my-ws")
    expect(seen).toHaveLength(2)
    expect(waits.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(2000)
  })

  test("a Retry-After given as an HTTP date is read against the injected clock", async () => {
    const { client, waits } = await scripted([
      { status: 503, body: {}, headers: { "retry-after": "Thu, 01 Jan 2026 00:00:03 GMT" } },
      { status: 200, body: [] },
    ])
    expect(await client.deployments.list()).toEqual([])
    expect(waits).toEqual([3000])
  })

  test("5xx retries back off exponentially and stop after `retries`, with the last error", async () => {
    const { client, seen, waits } = await scripted(
      [{ status: 503, body: { code: "Unavailable", message: "down" } }],
      {
        retries: 3,
        backoffMs: 100,
      },
    )
    const error = await failure(client.deployments.list())
    expect(seen).toHaveLength(4)
    expect(waits).toEqual([50, 100, 200]) // jitter 0 halves each step
    expect(error.status).toBe(503)
    expect(error.retryable).toBe(true)
  })

  const refusals: [number, string, string][] = [
    [401, "Unauthorized", "invalid token"],
    [403, "Forbidden", "token of another workspace"],
    [404, "NotFound", "no such workspace"],
    [400, "InvalidRequest", "no valid field to update"],
  ]
  for (const [status, code, message] of refusals)
    test(`a ${status} is not retried; the error names the call, the status and Lepton's message, never the token`, async () => {
      // The server even echoes the token back: it must still not reach the error.
      const { client, seen, waits } = await scripted([
        { status, body: { code, message: `${message} (got ${Token})` } },
      ])
      const error = await failure(client.deployments.list())
      expect(seen).toHaveLength(1)
      expect(waits).toEqual([])
      expect(error.status).toBe(status)
      expect(error.code).toBe(code)
      // A refused token may be fixed in the secret: the next pass tries again; a bad request will not pass.
      expect(error.retryable).toBe(status === 401 || status === 403)
      expect(error.message).toContain(`GET /deployments answered ${status}`)
      expect(error.message).toContain(message)
      expect(error.message).not.toContain(Token)
      expect(JSON.stringify(error)).not.toContain(Token)
    })

  test("a 404 on a get is `undefined` (gone), and deleting what is gone is done", async () => {
    const { client } = await scripted([{ status: 404, body: { code: "NotFound", message: "no" } }])
    expect(await client.deployments.get("sp-gone")).toBeUndefined()
    expect(await client.jobs.get("sp-gone")).toBeUndefined()
    await expect(client.deployments.delete("sp-gone")).resolves.toBeUndefined()
    await expect(client.jobs.stop("sp-gone")).resolves.toBeUndefined()
  })

  test("a hanging answer times out, and is named as such", async () => {
    const { client, seen } = await scripted(["hang"], { timeoutMs: 150, retries: 0 })
    const error = await failure(client.deployments.get("sp-a"))
    expect(error.retryable).toBe(true)
    expect(error.status).toBeUndefined()
    expect(error.message).toMatch(/GET \/deployments\/sp-a: no answer within/)
    expect(seen).toHaveLength(1)
  })

  test("no request starts past the overall deadline, and no retry waits beyond it", async () => {
    const past = await scripted([{ status: 200, body: [] }], { deadline: Date.parse("2025-12-31T00:00:00Z") })
    const late = await failure(past.client.deployments.list())
    expect(late.message).toContain("deadline")
    expect(past.seen).toHaveLength(0)

    const soon = await scripted([{ status: 503, body: {}, headers: { "retry-after": "30" } }], {
      deadline: Date.parse("2026-01-01T00:00:10Z"),
    })
    const error = await failure(soon.client.deployments.list())
    expect(error.status).toBe(503)
    expect(soon.seen).toHaveLength(1)
    expect(soon.waits).toEqual([])
  })

  test("jobs list follows pages from 1 to the first empty one (250 jobs at page_size 100: 4 requests)", async () => {
    const jobs = Array.from({ length: 250 }, (_, i) => ({
      metadata: { id: `j-${i}` },
      status: { state: "Running" },
    }))
    const { client, seen } = await scripted([
      (url) => {
        const page = Number(url.searchParams.get("page"))
        const size = Number(url.searchParams.get("page_size"))
        return { status: 200, body: { jobs: jobs.slice((page - 1) * size, page * size) } }
      },
    ])
    const all = await client.jobs.list({ pageSize: 100 })
    expect(all.map((j) => j.metadata.id)).toEqual(jobs.map((j) => j.metadata.id))
    expect(seen.map((s) => s.url.searchParams.get("page"))).toEqual(["1", "2", "3", "4"])
    expect(seen.every((s) => s.url.searchParams.get("job_query_mode") === "alive_only")).toBe(true)
  })

  test("jobs list reads a bare array too, with the SDK's page size of 500 by default", async () => {
    const { client, seen } = await scripted([
      { status: 200, body: [{ metadata: { id: "j-1" }, status: { state: "Completed" } }] },
      { status: 200, body: [] },
    ])
    expect((await client.jobs.list()).map((j) => j.metadata.id)).toEqual(["j-1"])
    expect(seen[0]!.url.searchParams.get("page_size")).toBe("500")
  })

  test("a job create returns Lepton's id; a 500 on create is not retried (it may have landed), a 429 is", async () => {
    const body = { metadata: { id: "sp-a-1", name: "sp-a-1" }, spec: {} as never }
    const ok = await scripted([
      { status: 429, body: {}, headers: { "retry-after": "1" } },
      {
        status: 201,
        body: { metadata: { id: "sp-a-1-x7k2", name: "sp-a-1" }, status: { state: "Starting" } },
      },
    ])
    expect((await ok.client.jobs.create(body)).metadata.id).toBe("sp-a-1-x7k2")
    expect(ok.seen.map((s) => s.method)).toEqual(["POST", "POST"])
    expect(ok.seen[0]!.body).toEqual(body)

    const lost = await scripted([{ status: 500, body: { message: "gateway" } }])
    const error = await failure(lost.client.jobs.create(body))
    expect(error.retryable).toBe(true)
    expect(lost.seen).toHaveLength(1)
  })

  test("get asks for alive and archived jobs; stop is a PATCH of spec.stopped; delete asks alive_only", async () => {
    const { client, seen } = await scripted([
      { status: 200, body: { metadata: { id: "j" }, status: { state: "Archived", job_history: [] } } },
      { status: 200, body: {} },
      { status: 200 },
    ])
    await client.jobs.get("j")
    await client.jobs.stop("j")
    await client.jobs.delete("j")
    expect(seen[0]!.url.searchParams.get("job_query_mode")).toBe("alive_and_archive")
    expect([seen[1]!.method, seen[1]!.url.pathname, seen[1]!.body]).toEqual([
      "PATCH",
      "/api/v2/workspaces/ws123/jobs/j",
      { spec: { stopped: true } },
    ])
    expect([seen[2]!.method, seen[2]!.url.searchParams.get("job_query_mode")]).toEqual([
      "DELETE",
      "alive_only",
    ])
  })

  test("a deployment patch sends the merge patch as it is; readiness and replica logs are read", async () => {
    const { client, seen } = await scripted([
      { status: 200, body: deployment("sp-a", "Scaling") },
      { status: 200, body: { "sp-a-r1": [{ reason: "Ready", message: "" }], "sp-a-r2": null } },
      { status: 200, body: "line 1\nline 2" },
    ])
    const patch = { spec: { resource_requirement: { min_replicas: 3, max_replicas: 3 } } }
    expect((await client.deployments.patch("sp-a", patch))?.status?.state).toBe("Scaling")
    expect(seen[0]!.body).toEqual(patch)
    expect(Object.keys(await client.deployments.readiness("sp-a"))).toEqual(["sp-a-r1", "sp-a-r2"])
    expect(await client.deployments.replicaLog("sp-a", "sp-a-r1")).toContain("line 2")
    expect(seen[2]!.url.pathname).toBe("/api/v2/workspaces/ws123/deployments/sp-a/replicas/sp-a-r1/log")
  })

  test("an answer that is not what the contract says is a retryable error naming the call", async () => {
    const { client } = await scripted([{ status: 200, body: { not: "an array" } }])
    const error = await failure(client.deployments.list())
    expect(error.message).toContain("GET /deployments: unexpected answer")
    expect(error.retryable).toBe(true)
  })
})

describe("the Lepton client's node groups and shapes", () => {
  const group = {
    metadata: { id: "ng-abc123", name: "h100-pool" },
    spec: { gpu_product: "NVIDIA-H100-80GB-HBM3", desired_nodes: 2, workspaces: ["ws123"] },
    status: { ready_nodes: 1, quota_enabled: true },
  }

  test("nodeGroups.list reads GET /dedicated-node-groups with ids, names and node counts", async () => {
    const { client, seen } = await scripted([{ status: 200, body: [group] }])
    const groups = await client.nodeGroups.list()
    expect(seen[0]!.method).toBe("GET")
    expect(seen[0]!.url.pathname).toBe("/api/v2/workspaces/ws123/dedicated-node-groups")
    expect(groups).toHaveLength(1)
    expect(groups[0]!.metadata).toMatchObject({ id: "ng-abc123", name: "h100-pool" })
    expect(groups[0]!.spec?.desired_nodes).toBe(2)
    expect(groups[0]!.status?.ready_nodes).toBe(1)
  })

  test("nodeGroups.nodes reads one group's nodes, with GPUs allocated and total, the id escaped", async () => {
    const node = {
      metadata: { id: "node-1" },
      spec: {
        dedicated_node_group: "ng/odd",
        resource: { gpu: { product: "NVIDIA-H100-80GB-HBM3", allocated: 3, total: 8 } },
        unschedulable: false,
      },
      status: { status: ["Ready"], workloads: [] },
    }
    const { client, seen } = await scripted([{ status: 200, body: [node] }])
    const nodes = await client.nodeGroups.nodes("ng/odd")
    expect(seen[0]!.url.pathname).toBe("/api/v2/workspaces/ws123/dedicated-node-groups/ng%2Fodd/nodes")
    expect(nodes[0]!.spec?.resource?.gpu).toMatchObject({ allocated: 3, total: 8 })
  })

  test("shapes.list filters by node group only when one is given", async () => {
    const shape = {
      metadata: { id: "s" },
      spec: { name: "gpu.1xh100-80gb", accelerator_num: 1, node_group_id: "ng-abc123" },
    }
    const { client, seen } = await scripted([{ status: 200, body: [shape] }])
    expect((await client.shapes.list("ng-abc123"))[0]!.spec.name).toBe("gpu.1xh100-80gb")
    expect(seen[0]!.url.pathname).toBe("/api/v2/workspaces/ws123/shapes")
    expect(seen[0]!.url.searchParams.get("node_groups")).toBe("ng-abc123")
    await client.shapes.list()
    expect(seen[1]!.url.searchParams.has("node_groups")).toBe(false)
  })

  test("a node group list that is not what the contract says is an error naming the path", async () => {
    const { client } = await scripted([{ status: 200, body: [{ metadata: { name: "no-id" } }] }])
    const error = await failure(client.nodeGroups.list())
    expect(error.message).toContain("GET /dedicated-node-groups: unexpected answer")
  })
})

describe("the Lepton client's bounded read of a replica's log", () => {
  const limits = { maxBytes: 1 << 20, maxMs: 20_000, idleMs: 200, keepChars: 10_000 }

  /**
   * A log endpoint that writes `chunks` (and `later` half a second after), then ends the stream or
   * (`follow`) keeps it open as a running replica's.
   */
  async function logServer(chunks: string[], follow: boolean, status = 200, later?: string) {
    const seen: string[] = []
    const server = createServer((req, res) => {
      seen.push(req.url ?? "")
      if (status !== 200) {
        res.writeHead(status, { "content-type": "application/json" })
        res.end(JSON.stringify({ code: "X", message: `no ${Token}` }))
        return
      }
      res.writeHead(200, { "content-type": "text/plain" })
      for (const chunk of chunks) res.write(chunk)
      if (later) setTimeout(() => res.write(later), 500).unref()
      if (!follow) res.end()
    })
    servers.push(server)
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const port = (server.address() as AddressInfo).port
    const client = leptonClient({ baseUrl: `http://127.0.0.1:${port}/api/v2/workspaces/ws123`, token: Token })
    return { client, seen }
  }

  test("a stream that ends is read whole, ended", async () => {
    const { client, seen } = await logServer(["line 1\n", "line 2\n"], false)
    expect(await client.jobs.replicaLogTail("sp-j-1", "sp-j-1-0-abcde", limits)).toEqual({
      text: "line 1\nline 2\n",
      ended: true,
    })
    expect(seen).toEqual(["/api/v2/workspaces/ws123/jobs/sp-j-1/replicas/sp-j-1-0-abcde/log"])
  })

  test("a stream that follows a running replica is left once its backlog is through, with what it sent", async () => {
    const { client } = await logServer(["line 1\n", "line 2\n"], true)
    // The overall bound is far off: the read ends on the pause after the backlog.
    const read = await client.jobs.replicaLogTail("j", "r", limits)
    expect(read).toEqual({ text: "line 1\nline 2\n", ended: false })
  })

  test("only the newest keepChars are kept, and reading stops after maxBytes", async () => {
    const many = Array.from({ length: 100 }, (_, i) => `line ${i}\n`)
    const { client } = await logServer(many, false)
    const kept = await client.jobs.replicaLogTail("j", "r", { ...limits, keepChars: 16 })
    expect(kept).toEqual({ text: "line 98\nline 99\n", ended: true })
    const { client: other } = await logServer(["a".repeat(5000)], true, 200, "b".repeat(5000))
    const capped = await other.jobs.replicaLogTail("j", "r", { ...limits, maxBytes: 4000, idleMs: 20_000 })
    expect(capped?.ended).toBe(false)
    expect(capped?.text).not.toContain("b")
  })

  test("no job or replica (404) is undefined; another refusal is an error without the token, not retried", async () => {
    const { client } = await logServer([], false, 404)
    expect(await client.jobs.replicaLogTail("j", "r", limits)).toBeUndefined()
    const { client: busy, seen } = await logServer([], false, 503)
    const error = await failure(busy.jobs.replicaLogTail("j", "r", limits))
    expect(error.status).toBe(503)
    expect(error.retryable).toBe(true)
    expect(error.message).not.toContain(Token)
    expect(seen).toHaveLength(1)
  })

  test("a deadline already passed makes no request", async () => {
    const { client: _, seen } = await logServer(["x"], false)
    const late = leptonClient({
      baseUrl: "http://127.0.0.1:9/api/v2/workspaces/ws123",
      token: Token,
      now: () => 2_000,
      deadline: 1_000,
    })
    const error = await failure(late.jobs.replicaLogTail("j", "r", limits))
    expect(error.message).toContain("deadline")
    expect(seen).toHaveLength(0)
  })
})
