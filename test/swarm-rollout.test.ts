/**
 * Serving that survives updates, on a local plane with real agents: a steady stream of streamed chat
 * completions through a 2-replica echo swarm's URL while the swarm is updated twice (new replica spec:
 * a rolling update) and scaled 2 → 4 → 2. Not one request may fail, the URL never changes, and the
 * latencies of each phase are printed beside those before it.
 */
import { afterAll, beforeAll, expect, test } from "vitest"
import { type Plane, startPlane, stopAgents, until, workersPool } from "./support/plane"
import { phaseTable, steadyLoad } from "./support/steady-load"

let p: Plane
beforeAll(async () => {
  p = await startPlane()
  await workersPool(p, "pool", ["load-a", "load-b"])
})
afterAll(async () => {
  await stopAgents()
  await p.stop()
})

/** Service time of each replica per request, ms; the rate of requests per second. */
const DelayMs = Number(process.env.SWARMPLANE_LOAD_DELAY_MS ?? 20)
const RatePerS = Number(process.env.SWARMPLANE_LOAD_RATE ?? 40)

test("a steady request rate through two rolling updates and a scale 2 → 4 → 2: zero failed requests, one URL", {
  timeout: 240_000,
}, async () => {
  const spec = (replicas: number, delayMs: number) => ({
    name: "llm",
    model: "echo",
    replicas,
    cpusPerReplica: 0.5,
    memoryMiBPerReplica: 128,
    args: ["--delay-ms", String(delayMs)],
    // A router heartbeat is 1 s here: 3 s of drain covers it and every request in flight.
    rollout: { maxSurge: 1, maxUnavailable: 0, drainTimeoutS: 3 },
    backendId: "pool",
  })
  const get = async () => (await p.call("GET", "/v1/swarms/llm")).json
  /** Until the swarm serves its current spec in full, and nothing of an older one is left. */
  const settled = async (what: string, replicas: number) =>
    until(
      what,
      async () => {
        const s = await get()
        const set = s.replicaSet?.replicas ?? []
        return (
          s.phase === "RUNNING" &&
          s.observedGeneration === s.generation &&
          set.length === replicas &&
          set.every((r: { state: string }) => r.state === "serving") &&
          s
        )
      },
      90_000,
    )

  expect((await p.call("POST", "/v1/swarms", spec(2, DelayMs))).status).toBe(202)
  const first = await settled("the swarm to serve with 2 replicas", 2)
  const url: string = first.url
  const firstRouter = first.handle.meta.router

  const load = steadyLoad(url, { ratePerS: RatePerS, stream: true })
  await new Promise((r) => setTimeout(r, 3_000))

  const step = async (phase: string, replicas: number, delayMs: number) => {
    load.mark(phase)
    const before = await get()
    expect((await p.call("POST", "/v1/swarms", spec(replicas, delayMs))).status).toBe(202)
    const after = await settled(`the swarm to settle after ${phase}`, replicas)
    expect(after.url).toBe(url)
    expect(after.handle.meta.router).toBe(firstRouter)
    return { before, after }
  }
  const u1 = await step("update 1", 2, DelayMs + 1)
  // A new replica spec: every replica was replaced.
  const slots = (s: { replicaSet: { replicas: { slot: number }[] } }) =>
    s.replicaSet.replicas.map((r) => r.slot)
  expect(slots(u1.after).some((slot: number) => slots(u1.before).includes(slot))).toBe(false)
  await step("update 2", 2, DelayMs)
  const up = await step("scale 2 → 4", 4, DelayMs)
  // A scale keeps the replicas that run and adds to them.
  expect(slots(up.after)).toEqual(expect.arrayContaining(slots(up.before)))
  await step("scale 4 → 2", 2, DelayMs)
  load.mark("after")
  await new Promise((r) => setTimeout(r, 2_000))
  const { phases, failures } = await load.stop()

  console.log(
    `steady load, ${RatePerS} req/s of streamed chat completions, ${DelayMs} ms service time per request\n${phaseTable(phases)}`,
  )
  expect(failures).toEqual([])
  for (const ph of phases) expect(ph.requests, ph.phase).toBeGreaterThan(0)
})

test("an update whose new replicas keep failing is rolled back: the old replicas serve on, no request fails, and the swarm says why", {
  timeout: 240_000,
}, async () => {
  const spec = (command?: string[]) => ({
    name: "steady",
    model: "echo",
    replicas: 2,
    cpusPerReplica: 0.5,
    memoryMiBPerReplica: 128,
    ...(command ? { command } : {}),
    rollout: { maxSurge: 1, maxUnavailable: 0, drainTimeoutS: 3 },
    backendId: "pool",
  })
  expect((await p.call("POST", "/v1/swarms", spec())).status).toBe(202)
  const up = await until(
    "the swarm to serve",
    async () => {
      const s = (await p.call("GET", "/v1/swarms/steady")).json
      return s.phase === "RUNNING" && s.observedGeneration === s.generation && s
    },
    60_000,
  )
  const load = steadyLoad(up.url, { ratePerS: 10, stream: false })
  expect(
    (await p.call("POST", "/v1/swarms", spec(["sh", "-c", "echo 'no model here' >&2; exit 3"]))).status,
  ).toBe(202)
  const rolledBack = await until(
    "the update to be rolled back",
    async () => {
      const s = (await p.call("GET", "/v1/swarms/steady")).json
      return s.replicaSet?.rolledBack && s
    },
    150_000,
  )
  const { phases, failures } = await load.stop()
  expect(failures).toEqual([])
  expect(phases[0]!.requests).toBeGreaterThan(0)
  expect(rolledBack).toMatchObject({ phase: "RUNNING", url: up.url, generation: 2, observedGeneration: 1 })
  expect(rolledBack.message).toMatch(
    /^update to generation 2 rolled back \(replica \d+ keeps failing: 5 attempts in a row ended before it was ready; the last: exited with code 3.*\); generation 1 serves$/,
  )
  // The old replicas still serve, and the failed one is stopped.
  const serving = rolledBack.replicaSet.replicas.filter((r: { state: string }) => r.state === "serving")
  expect(serving.map((r: { generation: number }) => r.generation)).toEqual([1, 1])
  // `swarmplane swarm up --wait` would stop waiting: the API says the wait is settled.
  const waited = await p.call("GET", "/v1/swarms/steady?wait=RUNNING&timeoutS=1")
  expect(waited.json.replicaSet.rolledBack.generation).toBe(2)
})

test("a swarm scaled to 0 by its spec stops, leaves the reconcile passes alone, and serves again when scaled up", {
  timeout: 120_000,
}, async () => {
  const spec = (replicas: number) => ({
    name: "zero",
    model: "echo",
    replicas,
    cpusPerReplica: 0.5,
    memoryMiBPerReplica: 128,
    backendId: "pool",
  })
  const phase = (want: string) =>
    until(
      `the swarm to be ${want}`,
      async () => {
        const s = (await p.call("GET", "/v1/swarms/zero")).json
        return s.phase === want && s.observedGeneration === s.generation && s
      },
      60_000,
    )
  expect((await p.call("POST", "/v1/swarms", spec(1))).status).toBe(202)
  await phase("RUNNING")
  expect((await p.call("POST", "/v1/swarms", spec(0))).status).toBe(202)
  const stopped = await until(
    "the swarm to stop at 0 replicas",
    async () => {
      const s = (await p.call("GET", "/v1/swarms/zero")).json
      return s.phase === "STOPPED" && !s.handle && s
    },
    60_000,
  )
  expect(stopped).toMatchObject({
    desired: "running",
    message: "0 replicas: update `replicas` to serve again",
  })
  expect(stopped.url).toBeUndefined()
  // Nothing to observe: it is out of the backend's active index, so no pass reads it.
  const active = await p.plane.runtime.repos.active.of("default", "pool")
  expect(active.swarms.map((s) => s.data.name)).not.toContain("zero")
  expect((await p.call("POST", "/v1/swarms", spec(1))).status).toBe(202)
  const again = await phase("RUNNING")
  const res = await fetch(`${again.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: "back" }] }),
  })
  expect(res.status).toBe(200)
  expect((await p.call("DELETE", "/v1/swarms/zero")).status).toBe(202)
})
