/**
 * The world a hostile-input property runs in: an API on a memory store whose live items can be compared
 * before and after a request, with a workers backend (a local scale group), a Slurm backend, swarms on
 * both, a job and a registered worker; and the invariants every answer keeps (`expectSafe`).
 */
import { expect } from "vitest"
import { MemoryStore } from "../../store/memory"
import type { StateStore } from "../../store/port"
import { testApi } from "../testing"

/** A store whose live items can be compared before and after a request (the write count cannot see a net nothing). */
export function snapshotting(inner: StateStore): StateStore & { snapshot: () => string } {
  const live = new Map<string, string>()
  const id = (k: { pk: string; sk: string }) => `${k.pk}\u0000${k.sk}`
  const refresh = async (k: { pk: string; sk: string }) => {
    const item = await inner.get(k)
    if (item) live.set(id(k), JSON.stringify(item))
    else live.delete(id(k))
  }
  return {
    ...inner,
    get: inner.get.bind(inner),
    getMany: inner.getMany.bind(inner),
    query: inner.query.bind(inner),
    queryIndex: inner.queryIndex.bind(inner),
    async create(item) {
      try {
        return await inner.create(item)
      } finally {
        await refresh(item)
      }
    },
    async createMany(items) {
      try {
        return await inner.createMany(items)
      } finally {
        for (const item of items) await refresh(item)
      }
    },
    async update(item) {
      try {
        return await inner.update(item)
      } finally {
        await refresh(item)
      }
    },
    async delete(key, expected) {
      try {
        return await inner.delete(key, expected)
      } finally {
        await refresh(key)
      }
    },
    snapshot: () => JSON.stringify([...live.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))),
  } as StateStore & { snapshot: () => string }
}

export const slurmBackendConfig = {
  type: "slurm",
  loginHost: "login",
  user: "svc",
  sshKeySecret: "k",
  hostKey: "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
  partition: "debug",
  account: "ml",
  extraSbatch: ["--exclusive"],
  setup: ["module load cuda"],
  container: { launcher: "apptainer", extraArgs: ["--nv"] },
}

/** A project with a workers backend (a local scale group), a Slurm one, a swarm, a job and a registered worker. */
export async function world() {
  const shadow = snapshotting(MemoryStore())
  const api = await testApi({ store: shadow })
  const ok = async (method: string, path: string, body: unknown, headers?: Record<string, string>) => {
    const res = await api.call(method, path, { body, ...(headers ? { headers } : {}) })
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${res.text}`)
    return res.json
  }
  await ok("POST", "/v1/backends", {
    id: "local",
    config: {
      type: "workers",
      attributes: { zone: "a" },
      scaleGroups: [
        { name: "cpu", provider: { type: "local" }, max: 2, resources: { cpu: 1, memoryMiB: 512 } },
      ],
    },
  })
  await ok("POST", "/v1/backends", { id: "hpc", config: slurmBackendConfig })
  await ok("POST", "/v1/swarms", { name: "s", model: "echo", backendId: "local" })
  await ok("POST", "/v1/swarms", { name: "t", model: "m", backendId: "hpc" })
  const job = await ok("POST", "/v1/jobs", { command: ["true"], backendId: "local", tasks: 2 })
  const reg = await ok("POST", "/v1/workers/register", {
    backendId: "local",
    name: "w",
    resources: { cpu: 2, memoryMiB: 1024 },
  })
  return {
    ...api,
    shadow,
    jobId: job.id as string,
    workerId: reg.worker.id as string,
    credential: reg.credential as string,
  }
}
export type World = Awaited<ReturnType<typeof world>>

export const get = async (w: World, path: string, key?: string) => {
  const res = await w.call("GET", path, key ? { key } : {})
  expect(res.status, `GET ${path}: ${res.text}`).toBe(200)
  return res.json
}

export interface Sent {
  text: string | undefined
  headers?: Record<string, string> | undefined
  /** Where a mutation broke the body, for the refusal to name. */
  mutated?: string
}

/** The invariants of every answer. Returns the response for route-specific checks. */
export async function expectSafe(w: World, method: string, path: string, sent: Sent) {
  // The rate limit refills on the injected clock: these are a few requests a second, not a flood.
  w.clock.advance(1000)
  const writes = w.store.writes()
  const before = w.shadow.snapshot()
  const queued = w.queue.pending().length
  const res = await w.call(method, path, {
    raw: sent.text,
    headers: {
      ...(sent.text === undefined ? {} : { "Content-Type": "application/json" }),
      ...sent.headers,
    },
  })
  const shown =
    sent.text === undefined ? "" : sent.text.length > 300 ? `${sent.text.slice(0, 300)}...` : sent.text
  const what = `${method} ${path} ${shown} → ${res.status} ${res.text.slice(0, 500)}`
  expect(res.status, what).toBeLessThan(500)
  expect(w.logger.entries?.filter((e: { level: string }) => e.level === "error") ?? [], what).toEqual([])
  if (res.status >= 400) {
    expect(res.status, what).not.toBe(429)
    expect(res.json?.error, what).toMatchObject({ code: expect.stringMatching(/^[a-z_]+(\.[a-z0-9_]+)+$/) })
    expect(res.json.error.message, what).toMatch(/\S/)
    if (res.json.error.code === "request.invalid") {
      const details = res.json.error.details as { path: string; message: string }[]
      expect(details.length, what).toBeGreaterThan(0)
      for (const d of details) {
        expect(typeof d.path, what).toBe("string")
        expect(d.message, what).toMatch(/\S/)
        // The message names the field and says what to send: zod's bare wording is no hint.
        expect(d.message, what).not.toMatch(/^Invalid input$/)
        if (d.path) expect(res.json.error.message, what).toContain(`${d.path}: `)
      }
      if (sent.mutated !== undefined) expect(namesField(details, sent.mutated), what).toBe(true)
    }
    // Refused: nothing written, nothing queued (an Idempotency-Key's reservation is released).
    if (!sent.headers?.["Idempotency-Key"]) expect(w.store.writes(), `${what}: writes`).toBe(writes)
    expect(w.shadow.snapshot(), `${what}: stored items`).toBe(before)
    expect(w.queue.pending().length, what).toBe(queued)
  }
  return { res, what }
}

/** Whether a refusal names the mutated field, an object that holds it (a whole-object rule) or a sibling (a rule between two fields). */
function namesField(details: { path: string }[], mutated: string): boolean {
  const parent = mutated.split(".").slice(0, -1).join(".")
  return details.some(
    (d) =>
      d.path === "" ||
      d.path === mutated ||
      mutated.startsWith(`${d.path}.`) ||
      d.path.startsWith(`${mutated}.`) ||
      (parent !== "" ? d.path.startsWith(`${parent}.`) || d.path === parent : true),
  )
}

interface Operation {
  requestBody?: unknown
  parameters?: { in: string; name: string }[]
}

/** The API's operations, from its OpenAPI document: whether each takes a body, and its query parameters. */
export async function operations() {
  const api = await testApi()
  const doc = (await api.call("GET", "/openapi.json", { key: null })).json as {
    paths: Record<string, Record<string, Operation>>
  }
  return Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.entries(ops).map(([method, op]) => ({
      route: `${method.toUpperCase()} ${path}`,
      method: method.toUpperCase(),
      path,
      body: op.requestBody !== undefined,
      query: (op.parameters ?? []).filter((p) => p.in === "query").map((p) => p.name),
    })),
  )
}

export const runs = (n: number) => ({ numRuns: Number(process.env.HOSTILE_RUNS ?? n) })

/**
 * One world for runs in a row while they are refused (a refusal leaves it as it was, which every run
 * checks), a new one after a request made something.
 */
export function reuse() {
  let current: Promise<World> | undefined
  return {
    get: () => {
      current ??= world()
      return current
    },
    spoil: () => {
      current = undefined
    },
  }
}
export type Worlds = ReturnType<typeof reuse>
