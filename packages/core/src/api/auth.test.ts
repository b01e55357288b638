/**
 * Who may do what: every route of the OpenAPI document, called by every kind of caller, against a table
 * that is the spec. Each call runs in a world of its own (so one caller's change never decides another's
 * answer), where team-a owns a backend, a swarm, a job, a worker and keys of every role.
 */
import { describe, expect, test } from "vitest"
import { type CallOptions, testApi } from "./testing"

const Callers = [
  "anon",
  "credential",
  "revoked",
  "expired",
  "foreign",
  "read",
  "write",
  "worker",
  "admin",
  "operator",
] as const
type Caller = (typeof Callers)[number]

const dayMs = 86_400_000

/** team-a and its objects, team-b (the foreign project), and a key of each kind. */
async function world() {
  const api = await testApi()
  const admin = (await api.call("POST", "/v1/projects", { body: { name: "team-a" } })).json.adminKey.key
  const foreign = (await api.call("POST", "/v1/projects", { body: { name: "team-b" } })).json.adminKey.key
  const as =
    (key: string) =>
    (method: string, path: string, opts: CallOptions = {}) =>
      api.call(method, path, { key, ...opts })
  const a = as(admin)
  const key = async (body: Record<string, unknown>) => {
    const res = await a("POST", "/v1/projects/team-a/keys", { body })
    expect(res.status).toBe(201)
    return res.json as { id: string; key: string }
  }
  const read = await key({ role: "read" })
  const write = await key({ role: "write" })
  const worker = await key({ role: "worker", name: "agents" })
  const revoked = await key({ role: "admin" })
  const expired = await key({ role: "admin", expiresInDays: 1 })
  const victim = await key({ role: "read", name: "to revoke" })
  expect((await a("DELETE", `/v1/projects/team-a/keys/${revoked.id}`)).status).toBe(200)
  api.clock.advance(2 * dayMs)

  expect(
    (await a("POST", "/v1/backends", { body: { id: "pool", config: { type: "workers" } } })).status,
  ).toBe(201)
  expect((await a("POST", "/v1/swarms", { body: { name: "llm", model: "echo" } })).status).toBe(202)
  const job = await a("POST", "/v1/jobs", { body: { command: ["true"] } })
  expect(job.status).toBe(202)
  const reg = await as(worker.key)("POST", "/v1/workers/register", {
    body: { backendId: "pool", resources: { cpu: 1, memoryMiB: 64 } },
  })
  expect(reg.status).toBe(201)
  return {
    api,
    keys: {
      admin,
      foreign,
      operator: api.adminKey,
      read: read.key,
      write: write.key,
      worker: worker.key,
      revoked: revoked.key,
      expired: expired.key,
    },
    ids: { job: job.json.id as string, worker: reg.json.worker.id as string, victim: victim.id },
    credential: reg.json.credential as string,
  }
}
type World = Awaited<ReturnType<typeof world>>

/** A route's path with its parameters filled: with team-a's objects, or with names nothing has. */
function fill(path: string, w: World, missing = false): string {
  const object = (prefix: string) => {
    if (missing) return "nope"
    if (prefix === "jobs") return w.ids.job
    if (prefix === "workers") return w.ids.worker
    if (prefix === "backends") return "pool"
    if (prefix === "keys") return w.ids.victim
    throw new Error(`no object for {id} under /${prefix}: add one to fill()`)
  }
  return path
    .replace("{project}", missing ? "nope" : "team-a")
    .replace("{name}", missing ? "nope" : "llm")
    .replace("{index}", missing ? "99" : "0")
    .replace(/\/([a-z]+)\/\{id\}/, (_, prefix: string) => `/${prefix}/${object(prefix)}`)
}

const bodies: Record<string, unknown> = {
  "POST /v1/projects": { name: "team-c" },
  "POST /v1/projects/{project}/keys": { role: "read" },
  "POST /v1/backends": { id: "pool", config: { type: "workers" } },
  "POST /v1/swarms": { name: "llm", model: "echo" },
  "POST /v1/jobs": { command: ["true"] },
  "POST /v1/workers/register": { backendId: "pool", resources: { cpu: 1, memoryMiB: 64 } },
  "POST /v1/workers/{id}/heartbeat": { attempts: [] },
}

/** One call of `route` by `caller` in world `w`. A worker key sends its worker's credential, as an agent does. */
function callAs(w: World, caller: Caller | "missing", route: string) {
  const [method, path] = route.split(" ") as [string, string]
  const credential = { "Swarmplane-Worker-Credential": w.credential }
  const key =
    caller === "anon" || caller === "credential" ? null : w.keys[caller === "missing" ? "admin" : caller]
  return w.api.call(method, fill(path, w, caller === "missing"), {
    key,
    ...(bodies[route] === undefined ? {} : { body: bodies[route] }),
    ...(caller === "credential" || caller === "worker" ? { headers: credential } : {}),
  })
}

/**
 * The spec: what each caller gets from each route. Callers without a working key (none, a worker
 * credential alone, a revoked key, an expired key) get 401 from every `/v1` route and are not repeated.
 * The foreign project's admin acts in its own project: it creates there, and of team-a's objects it gets
 * exactly what a missing object gets (checked below). The operator is the admin of the operator project:
 * it may create projects and manage any project's keys, and is a stranger to team-a's objects otherwise.
 */
const columns = ["foreign", "read", "write", "worker", "admin", "operator"] as const
// biome-ignore format: the table reads best aligned
const spec: Record<string, readonly number[]> = {
  //                                          [foreign, read, write, worker, admin, operator]
  "GET /health":                              [200, 200, 200, 200, 200, 200],
  "GET /v1/me":                               [200, 200, 200, 200, 200, 200],
  "POST /v1/projects":                        [403, 403, 403, 403, 403, 201],
  "POST /v1/projects/{project}/keys":         [404, 403, 403, 403, 201, 201],
  "GET /v1/projects/{project}/keys":          [404, 403, 403, 403, 200, 200],
  "DELETE /v1/projects/{project}/keys/{id}":  [404, 403, 403, 403, 200, 200],
  "POST /v1/backends":                        [201, 403, 403, 403, 200, 201],
  "GET /v1/backends":                         [200, 200, 200, 403, 200, 200],
  "GET /v1/backends/{id}":                    [404, 200, 200, 403, 200, 404],
  "GET /v1/backends/{id}/status":             [404, 200, 200, 403, 200, 404],
  "POST /v1/swarms":                          [400, 403, 202, 403, 202, 400],
  "GET /v1/swarms":                           [200, 200, 200, 403, 200, 200],
  "GET /v1/swarms/{name}":                    [404, 200, 200, 403, 200, 404],
  "DELETE /v1/swarms/{name}":                 [404, 403, 202, 403, 202, 404],
  "GET /v1/swarms/{name}/events":             [404, 200, 200, 403, 200, 404],
  "GET /v1/swarms/{name}/metrics":            [404, 200, 200, 403, 200, 404],
  "POST /v1/jobs":                            [400, 403, 202, 403, 202, 400],
  "GET /v1/jobs":                             [200, 200, 200, 403, 200, 200],
  "GET /v1/jobs/{id}":                        [404, 200, 200, 403, 200, 404],
  "GET /v1/jobs/{id}/tasks":                  [404, 200, 200, 403, 200, 404],
  "GET /v1/jobs/{id}/tasks/{index}/logs":     [404, 200, 200, 403, 200, 404],
  "POST /v1/jobs/{id}/cancel":                [404, 403, 202, 403, 202, 404],
  "GET /v1/jobs/{id}/events":                 [404, 200, 200, 403, 200, 404],
  "GET /v1/jobs/{id}/logs":                   [404, 200, 200, 403, 200, 404],
  "POST /v1/workers/register":                [400, 403, 403, 201, 201, 400],
  "POST /v1/workers/{id}/heartbeat":          [404, 403, 403, 200, 403, 404],
  "POST /v1/workers/{id}/leave":              [404, 403, 403, 200, 403, 404],
  "GET /v1/workers":                          [200, 200, 200, 403, 200, 200],
}

const unauthorized: Partial<Record<Caller, string>> = {
  anon: "auth.unauthorized",
  credential: "auth.unauthorized",
  revoked: "auth.key_revoked",
  expired: "auth.key_expired",
}

/** What `caller` must get from `route`: the status, and the error code where the table alone is loose. */
function expected(route: string, caller: Caller): { status: number; code?: string } {
  const code = unauthorized[caller]
  if (code) return route === "GET /health" ? { status: 200 } : { status: 401, code }
  const status = spec[route]![columns.indexOf(caller as (typeof columns)[number])]!
  if (status !== 403) return { status }
  if (route.startsWith("POST /v1/workers/"))
    return { status, code: caller === "admin" ? "worker.credential_invalid" : "worker.role_required" }
  return { status, code: "auth.forbidden" }
}

describe("every route of the OpenAPI document, called by every kind of caller", async () => {
  const doc = (await (await testApi()).call("GET", "/openapi.json", { key: null })).json
  const routes = Object.entries(doc.paths as Record<string, object>).flatMap(([path, ops]) =>
    Object.keys(ops).map((method) => `${method.toUpperCase()} ${path}`),
  )

  test("the table names exactly the document's routes", () => {
    expect(Object.keys(spec).sort()).toEqual([...routes].sort())
  })

  test.each(routes)("%s", async (route) => {
    const [, path] = route.split(" ") as [string, string]
    const got: string[] = []
    const want: string[] = []
    for (const caller of Callers) {
      const w = await world()
      const before = w.api.store.writes()
      const res = await callAs(w, caller, route)
      const { status, code } = expected(route, caller)
      got.push(`${caller} ${res.status}${code ? ` ${res.json?.error?.code}` : ""}`)
      want.push(`${caller} ${status}${code ? ` ${code}` : ""}`)
      // A refused call writes nothing.
      if (res.status >= 400) expect(w.api.store.writes(), `${caller}: ${res.text}`).toBe(before)
      // Of another project's objects, a stranger learns what it would of objects that do not exist.
      if (caller === "foreign" && path.includes("{")) {
        const missing = await callAs(await world(), "missing", route)
        expect([res.status, res.json?.error?.code], `${route} foreign vs missing`).toEqual([
          missing.status,
          missing.json?.error?.code,
        ])
      }
    }
    expect(got).toEqual(want)
  })
})

describe("the worker role", () => {
  test("a write key may not register a worker: 403 worker.role_required says how to get a worker key, and nothing is written", async () => {
    const w = await world()
    const before = w.api.store.writes()
    const res = await w.api.call("POST", "/v1/workers/register", {
      key: w.keys.write,
      body: bodies["POST /v1/workers/register"],
    })
    expect(res.status).toBe(403)
    expect(res.json.error.code).toBe("worker.role_required")
    expect(res.json.error.message).toContain(
      'create a key with role "worker" via POST /v1/projects/team-a/keys',
    )
    expect(res.json.error.message).toContain("give it to the agent")
    expect(w.api.store.writes()).toBe(before)
  })

  test("a worker key reads nothing: the 403 names the role the route needs", async () => {
    const w = await world()
    const cases: [string, string, string][] = [
      ["GET", "/v1/jobs", "read"],
      ["POST", "/v1/jobs", "write"],
      ["GET", "/v1/projects/team-a/keys", "admin"],
      ["POST", "/v1/backends", "admin"],
    ]
    for (const [method, path, role] of cases) {
      const res = await w.api.call(method, path, { key: w.keys.worker, body: bodies[`${method} ${path}`] })
      expect(res.status, `${method} ${path}`).toBe(403)
      expect(res.json.error.message).toContain(`needs a key with role "${role}"; yours is "worker"`)
    }
    const me = await w.api.call("GET", "/v1/me", { key: w.keys.worker })
    expect(me.json).toMatchObject({ project: "team-a", role: "worker", operator: false })
  })
})
