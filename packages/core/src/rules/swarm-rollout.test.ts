import { describe, expect, test } from "vitest"
import type { ReplicaSlot, Rollout, Swarm } from "../model/swarm"
import { planRollout, type ReplicaObservation, type RouterObservation } from "./swarm-rollout"
import { swarmFixture } from "./testing"

const t0 = Date.parse("2026-01-01T00:00:00.000Z")
const at = (ms: number) => new Date(t0 + ms).toISOString()

const swarm = (patch: Partial<Swarm> = {}): Swarm =>
  swarmFixture({ memoryMiBPerReplica: 256, generation: 2, ...patch })

const serving = (slot: number, generation: number): ReplicaSlot => ({
  slot,
  generation,
  state: "serving",
  since: at(0),
  url: `http://10.0.0.1:${9000 + slot}`,
})
const starting = (slot: number, generation: number): ReplicaSlot => ({
  slot,
  generation,
  state: "starting",
  since: at(0),
})
const draining = (slot: number, generation: number, sinceMs = 0, url = true): ReplicaSlot => ({
  slot,
  generation,
  state: "draining",
  since: at(sinceMs),
  ...(url ? { url: `http://10.0.0.1:${9000 + slot}` } : {}),
})
const ready = (slot: number): ReplicaObservation => ({
  state: "ready",
  url: `http://10.0.0.1:${9000 + slot}`,
})
const up: RouterObservation = { state: "ready", url: "http://10.0.0.1:21000" }

/** One step: the swarm with these replicas, seen as given (`ready` for a serving one unless said). */
function step(
  replicas: ReplicaSlot[],
  seen: Record<number, ReplicaObservation> = {},
  o: { swarm?: Partial<Swarm>; rollout?: Rollout; now?: number; router?: RouterObservation } = {},
) {
  const observed = new Map<number, ReplicaObservation>()
  for (const r of replicas)
    observed.set(r.slot, seen[r.slot] ?? (r.state === "starting" ? { state: "starting" } : ready(r.slot)))
  const nextSlot = Math.max(-1, ...replicas.map((r) => r.slot)) + 1
  return planRollout({
    swarm: swarm({
      ...(o.rollout ? { rollout: o.rollout } : {}),
      ...o.swarm,
      replicaSet: { nextSlot, ...(o.swarm?.replicaSet ?? {}), replicas },
    }),
    replicas: observed,
    router: o.router ?? up,
    now: t0 + (o.now ?? 1000),
  })
}
const shape = (rs: ReplicaSlot[]) => rs.map((r) => `${r.slot}:g${r.generation}:${r.state}`)

describe("an update, replica by replica", () => {
  test("surge 1: one new replica starts beside the two old; none leaves the router yet", () => {
    const plan = step([serving(0, 1), serving(1, 1)])
    expect(shape(plan.replicaSet.replicas)).toEqual(["0:g1:serving", "1:g1:serving", "2:g2:starting"])
    expect(plan.start.map((r) => r.slot)).toEqual([2])
    expect(plan.stop).toEqual([])
    expect(plan).toMatchObject({ phase: "RUNNING", url: up.url })
    expect(plan.observedGeneration).toBeUndefined()
    expect(plan.detail).toBe("updating to generation 2: 0/2 new replicas serving, 2 old")
    expect(plan.replicaSet.lastChange).toBe("replica 2 (generation 2) started: surge 1/1")
  })

  test("the new one healthy: it joins, one old one leaves the router (kept running to drain), the next new one starts", () => {
    const plan = step([serving(0, 1), serving(1, 1), starting(2, 2)], { 2: ready(2) })
    expect(shape(plan.replicaSet.replicas)).toEqual([
      "0:g1:draining",
      "1:g1:serving",
      "2:g2:serving",
      "3:g2:starting",
    ])
    expect(plan.replicaSet.replicas[0]!.url).toBe("http://10.0.0.1:9000")
    expect(plan.stop).toEqual([])
    expect(plan.start.map((r) => r.slot)).toEqual([3])
  })

  test("every new one healthy: the last old one leaves, and the generation is served in full", () => {
    const plan = step([draining(0, 1), serving(1, 1), serving(2, 2), starting(3, 2)], { 3: ready(3) })
    expect(shape(plan.replicaSet.replicas)).toEqual([
      "0:g1:draining",
      "1:g1:draining",
      "2:g2:serving",
      "3:g2:serving",
    ])
    expect(plan).toMatchObject({ phase: "RUNNING", observedGeneration: 2 })
    expect(plan.detail).toBeUndefined()
  })

  test("a draining replica is stopped once its drain time is over, not before", () => {
    const replicas = [draining(0, 1, 0), serving(2, 2), serving(3, 2)]
    expect(step(replicas, {}, { now: 29_999 }).stop).toEqual([])
    expect(step(replicas, {}, { now: 30_000 }).stop).toEqual([0])
    const quick = { maxSurge: 1, maxUnavailable: 0, drainTimeoutS: 2 }
    expect(step(replicas, {}, { now: 2_000, rollout: quick }).stop).toEqual([0])
  })

  test("a stopped replica that has ended leaves the set", () => {
    const plan = step([draining(0, 1), serving(2, 2), serving(3, 2)], { 0: { state: "ended" } })
    expect(shape(plan.replicaSet.replicas)).toEqual(["2:g2:serving", "3:g2:serving"])
  })

  test("maxUnavailable 1, maxSurge 0: an old one leaves first, and its place is taken by a new one", () => {
    const rollout = { maxSurge: 0, maxUnavailable: 1, drainTimeoutS: 30 }
    const plan = step([serving(0, 1), serving(1, 1)], {}, { rollout })
    expect(shape(plan.replicaSet.replicas)).toEqual(["0:g1:draining", "1:g1:serving", "2:g2:starting"])
  })

  test("a replica never in the router is stopped at once when it leaves", () => {
    const plan = step([serving(0, 1), starting(1, 1), serving(2, 2), serving(3, 2)])
    expect(plan.stop).toContain(1)
  })

  test("the router never goes without a replica while the new ones are not healthy", () => {
    const rollout = { maxSurge: 1, maxUnavailable: 2, drainTimeoutS: 30 }
    const plan = step([serving(0, 1), serving(1, 1)], {}, { rollout })
    expect(plan.replicaSet.replicas.filter((r) => r.state === "serving")).not.toHaveLength(0)
  })
})

describe("new replicas that fail", () => {
  const fails: ReplicaObservation = {
    state: "failed",
    detail: "keeps failing: 5 attempts in a row ended before it was ready",
  }

  test("with the old generation serving: rolled back, the new ones stopped, the old serve on, and the swarm says why", () => {
    const plan = step([serving(0, 1), serving(1, 1), starting(2, 2)], { 2: fails })
    expect(shape(plan.replicaSet.replicas)).toEqual(["0:g1:serving", "1:g1:serving", "2:g2:draining"])
    expect(plan.stop).toEqual([2])
    expect(plan.replicaSet.rolledBack).toEqual({
      generation: 2,
      reason: "replica 2 keeps failing: 5 attempts in a row ended before it was ready",
    })
    expect(plan.phase).toBe("RUNNING")
    expect(plan.detail).toMatch(
      /^update to generation 2 rolled back \(replica 2 keeps failing.*\); generation 1 serves$/,
    )
    expect(plan.observedGeneration).toBeUndefined()
  })

  test("once rolled back, nothing of the failed generation is started again until the next update", () => {
    const rolledBack = { generation: 2, reason: "replica 2 keeps failing" }
    const plan = step(
      [serving(0, 1), serving(1, 1)],
      {},
      { swarm: { replicaSet: { nextSlot: 3, replicas: [], rolledBack } } },
    )
    expect(plan.start).toEqual([])
    expect(plan.replicaSet.rolledBack).toEqual(rolledBack)
    const next = step(
      [serving(0, 1), serving(1, 1)],
      {},
      {
        swarm: { generation: 3, replicaSet: { nextSlot: 3, replicas: [], rolledBack } },
      },
    )
    expect(next.start.map((r) => r.generation)).toEqual([3])
    expect(next.replicaSet.rolledBack).toBeUndefined()
  })

  test("with nothing else to serve: the swarm fails, saying why, and everything is stopped", () => {
    const plan = step(
      [starting(0, 1), starting(1, 1)],
      { 0: fails },
      {
        swarm: { generation: 1, phase: "INITIALIZING", observedGeneration: 0 },
      },
    )
    expect(plan.phase).toBe("FAILED")
    expect(plan.detail).toBe("replica 0 keeps failing: 5 attempts in a row ended before it was ready")
    expect(plan.router).toBe("stop")
    expect(plan.stop.sort()).toEqual([0, 1])
  })
})

describe("scaling a generation", () => {
  test("up: the missing replicas start at once", () => {
    const plan = step([serving(0, 2), serving(1, 2)], {}, { swarm: { replicas: 4, observedGeneration: 2 } })
    expect(plan.start.map((r) => r.slot)).toEqual([2, 3])
  })

  test("down: the newest leave the router first, and not yet serving ones before serving ones", () => {
    const plan = step(
      [serving(0, 2), serving(1, 2), serving(2, 2), starting(3, 2)],
      {},
      { swarm: { replicas: 2 } },
    )
    expect(shape(plan.replicaSet.replicas)).toEqual([
      "0:g2:serving",
      "1:g2:serving",
      "2:g2:draining",
      "3:g2:draining",
    ])
    expect(plan.stop).toEqual([3])
    expect(plan.observedGeneration).toBe(2)
  })

  test("to 0: everything stops, the router too, and the swarm is STOPPED once nothing runs", () => {
    const plan = step([serving(0, 2), serving(1, 2)], {}, { swarm: { replicas: 0 } })
    expect(plan.router).toBe("stop")
    expect(plan.stop.sort()).toEqual([0, 1])
    expect(plan.gone).toBe(false)
    const done = step(
      [draining(0, 2, 0, false)],
      { 0: { state: "ended" } },
      {
        swarm: { replicas: 0 },
        router: { state: "ended" },
      },
    )
    expect(done).toMatchObject({ gone: true, phase: "STOPPED" })
  })
})

describe("replicas that come and go by themselves", () => {
  test("a serving replica that is no longer healthy leaves the router until it is again", () => {
    const plan = step(
      [serving(0, 2), serving(1, 2)],
      { 1: { state: "starting", detail: "restarting (attempt 2)" } },
      {
        swarm: { observedGeneration: 2 },
      },
    )
    expect(shape(plan.replicaSet.replicas)).toEqual(["0:g2:serving", "1:g2:starting"])
    expect(plan.replicaStatus).toMatchObject({ ready: 1, total: 2 })
    expect(plan.phase).toBe("RUNNING")
  })

  test("a replica gone without being asked is replaced by a new one", () => {
    const plan = step(
      [serving(0, 2), serving(1, 2)],
      { 1: { state: "ended", detail: "killed" } },
      {
        swarm: { observedGeneration: 2 },
      },
    )
    expect(shape(plan.replicaSet.replicas)).toEqual(["0:g2:serving", "2:g2:starting"])
    expect(plan.start.map((r) => r.slot)).toEqual([2])
  })

  test("a replica saved as starting whose job was never made is started again under its slot", () => {
    const plan = step([serving(0, 2), starting(1, 2)], { 1: { state: "missing" } })
    expect(plan.start.map((r) => r.slot)).toEqual([1])
    expect(plan.replicaSet.nextSlot).toBe(2)
  })
})

describe("the swarm's phase", () => {
  const first = { generation: 1, phase: "PENDING" as const, observedGeneration: 0 }
  test("nothing placed: PENDING with the first reason", () => {
    const plan = step(
      [starting(0, 1)],
      { 0: { state: "pending", detail: "needs 8 gpu, largest free is 4" } },
      {
        swarm: { ...first, replicas: 1 },
        router: { state: "pending" },
      },
    )
    expect(plan).toMatchObject({ phase: "PENDING", detail: "needs 8 gpu, largest free is 4" })
  })

  test("a first deployment is RUNNING only once every replica is healthy behind a ready router", () => {
    const half = step([serving(0, 1), starting(1, 1)], {}, { swarm: first })
    expect(half).toMatchObject({ phase: "INITIALIZING", detail: "1/2 replicas ready" })
    const routerDown = step(
      [serving(0, 1), serving(1, 1)],
      {},
      {
        swarm: first,
        router: { state: "starting", detail: "router restarting (restart 1 of 5)" },
      },
    )
    expect(routerDown).toMatchObject({
      phase: "INITIALIZING",
      detail: "2/2 replicas ready; router restarting (restart 1 of 5)",
    })
    expect(step([serving(0, 1), serving(1, 1)], {}, { swarm: first })).toMatchObject({
      phase: "RUNNING",
      url: up.url,
      observedGeneration: 1,
    })
  })

  test("a failed router fails the swarm", () => {
    const plan = step(
      [serving(0, 2), serving(1, 2)],
      {},
      { router: { state: "failed", detail: "keeps failing" } },
    )
    expect(plan).toMatchObject({ phase: "FAILED", detail: "the router: keeps failing" })
  })

  test("deleted: everything stops at once, and the swarm is gone once nothing runs", () => {
    const plan = step([serving(0, 2)], {}, { swarm: { desired: "deleted" } })
    expect(plan).toMatchObject({ router: "stop", stop: [0], gone: false })
    expect(step([], {}, { swarm: { desired: "deleted" }, router: { state: "ended" } }).gone).toBe(true)
    // A router that failed for good runs nothing either.
    const failedRouter = { state: "failed" as const, over: true, detail: "exited with code 127" }
    expect(step([], {}, { swarm: { desired: "deleted" }, router: failedRouter }).gone).toBe(true)
  })
})
