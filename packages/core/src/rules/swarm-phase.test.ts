import { describe, expect, test } from "vitest"
import { type SwarmPhase, SwarmPhases } from "../model/states"
import { isSwarmActive, type Swarm, SwarmSpec } from "../model/swarm"
import { canSwarmTransition, observe, requestDelete, updateSpec, waitState } from "./swarm-phase"
import { swarmFixture } from "./testing"

const now = "2026-01-01T00:00:05.000Z"

const swarm = (phase: SwarmPhase, patch: Partial<Swarm> = {}): Swarm => swarmFixture({ phase, ...patch })

describe("swarm transitions", () => {
  const legal: [SwarmPhase, SwarmPhase][] = [
    ["PENDING", "INITIALIZING"],
    ["INITIALIZING", "RUNNING"],
    ["RUNNING", "INITIALIZING"],
    ["RUNNING", "FAILED"],
    ["UNKNOWN", "RUNNING"],
    ["FAILED", "PENDING"],
    ["STOPPED", "PENDING"],
  ]
  const illegal: [SwarmPhase, SwarmPhase][] = [
    ["STOPPED", "RUNNING"],
    ["STOPPED", "INITIALIZING"],
    ["FAILED", "RUNNING"],
    ["FAILED", "UNKNOWN"],
    ["STOPPED", "UNKNOWN"],
  ]
  for (const [from, to] of legal)
    test(`${from} → ${to} is legal`, () => expect(canSwarmTransition(from, to)).toBe(true))
  for (const [from, to] of illegal)
    test(`${from} → ${to} is illegal`, () => expect(canSwarmTransition(from, to)).toBe(false))
  test("every phase may stay", () => {
    for (const p of SwarmPhases) expect(canSwarmTransition(p, p)).toBe(true)
  })
})

describe("observe", () => {
  test("a ready deployment makes the swarm RUNNING with its URL", () => {
    const r = observe(swarm("INITIALIZING"), { kind: "status", phase: "RUNNING", url: "http://r:9000" }, now)
    expect(r.swarm).toMatchObject({ phase: "RUNNING", url: "http://r:9000", updatedAt: now })
    expect(r.changed).toBe(true)
  })

  test("a router that stops serving: not RUNNING meanwhile, saying why, at the same URL; then RUNNING again", () => {
    const serving = swarm("RUNNING", { url: "http://r:21000" })
    const why =
      "1/2 replicas ready; router restarting (restart 1 of 5): the router process was killed by SIGKILL"
    const down = observe(serving, { kind: "status", phase: "INITIALIZING", detail: why }, now).swarm
    expect(down).toMatchObject({ phase: "INITIALIZING", url: "http://r:21000", message: why })
    const back = observe(down, { kind: "status", phase: "RUNNING", url: "http://r:21000" }, now).swarm
    expect(back).toMatchObject({ phase: "RUNNING", url: "http://r:21000" })
    expect(back.message).toBeUndefined()
  })

  test("a deployment placed again from scratch (a control plane restarted): PENDING, the URL kept", () => {
    const r = observe(swarm("RUNNING", { url: "http://r:21000" }), { kind: "status", phase: "PENDING" }, now)
    expect(r.swarm).toMatchObject({ phase: "PENDING", url: "http://r:21000" })
  })

  test("an update keeps the URL: the next generation's router listens there again", () => {
    const r = updateSpec(
      swarm("RUNNING", { url: "http://r:21000" }),
      SwarmSpec.parse({ name: "llm", model: "echo" }),
      now,
    )
    expect(r.swarm).toMatchObject({ generation: 2, url: "http://r:21000" })
  })

  test("an unreachable backend makes a live swarm UNKNOWN and says why", () => {
    const r = observe(swarm("RUNNING"), { kind: "unreachable", detail: "ssh: connect timeout" }, now)
    expect(r.swarm).toMatchObject({ phase: "UNKNOWN", message: "ssh: connect timeout" })
  })

  test("an unreachable backend leaves a FAILED swarm FAILED", () => {
    expect(observe(swarm("FAILED"), { kind: "unreachable", detail: "x" }, now).swarm.phase).toBe("FAILED")
  })

  test("while deleting, a running deployment does not pull the swarm back", () => {
    const r = observe(
      swarm("RUNNING", { desired: "deleted", handle: { id: "j", url: "", meta: {} } }),
      { kind: "status", phase: "RUNNING" },
      now,
    )
    expect(r.swarm.phase).toBe("RUNNING")
  })

  test("while deleting, a gone deployment is STOPPED, with no replica ready or asked for", () => {
    const ready = {
      ready: 2,
      total: 2,
      items: [
        { index: 0, state: "Ready" },
        { index: 1, state: "Ready" },
      ],
    }
    const r = observe(swarm("RUNNING", { desired: "deleted", replicaStatus: ready }), { kind: "gone" }, now)
    expect(r.swarm.phase).toBe("STOPPED")
    expect(r.swarm.replicaStatus).toEqual({ ready: 0, total: 0, items: [] })
    expect(isSwarmActive(r.swarm)).toBe(false)
    // A deployment gone while the swarm should run: none ready, the count asked for kept.
    const lost = observe(swarm("RUNNING", { replicaStatus: ready }), { kind: "gone" }, now).swarm
    expect(lost).toMatchObject({ phase: "PENDING", replicaStatus: { ready: 0, total: 2, items: [] } })
    expect(observe(lost, { kind: "gone" }, now).changed).toBe(false)
  })

  test("an illegal observed jump is refused", () => {
    expect(observe(swarm("STOPPED"), { kind: "status", phase: "RUNNING" }, now).changed).toBe(false)
  })

  test("the same observation twice changes nothing the second time", () => {
    const first = observe(swarm("PENDING"), { kind: "status", phase: "INITIALIZING" }, now).swarm
    expect(observe(first, { kind: "status", phase: "INITIALIZING" }, now).changed).toBe(false)
  })
})

describe("user intent", () => {
  test("deleting a swarm that was never deployed stops it at once", () => {
    const r = requestDelete(swarm("PENDING"), now)
    expect(r.swarm).toMatchObject({ desired: "deleted", phase: "STOPPED" })
  })

  test("deleting a deployed swarm leaves teardown to the reconciler", () => {
    const r = requestDelete(swarm("RUNNING", { handle: { id: "j1", url: "http://r", meta: {} } }), now)
    expect(r.swarm).toMatchObject({ desired: "deleted", phase: "RUNNING" })
    expect(isSwarmActive(r.swarm)).toBe(true)
  })

  test("deleting twice is a no-op", () => {
    const once = requestDelete(swarm("PENDING"), now).swarm
    expect(requestDelete(once, now).changed).toBe(false)
  })

  const spec = (extra: object = {}) => SwarmSpec.parse({ name: "llm", model: "echo", replicas: 2, ...extra })

  test("an update bumps the generation and restarts a FAILED or STOPPED swarm", () => {
    const r = updateSpec(swarm("STOPPED", { desired: "deleted" }), spec({ replicas: 3 }), now)
    expect(r.swarm).toMatchObject({ phase: "PENDING", desired: "running", generation: 2, replicas: 3 })
    expect(r.swarm.replicaStatus.total).toBe(3)
  })

  test("an update of a RUNNING swarm keeps its phase and status", () => {
    const running = swarm("RUNNING", { url: "http://r", handle: { id: "j", url: "http://r", meta: {} } })
    expect(updateSpec(running, spec(), now).swarm).toMatchObject({
      phase: "RUNNING",
      url: "http://r",
      handle: { id: "j" },
    })
  })

  test("a field left out of the new spec is removed", () => {
    const withImage = updateSpec(
      swarm("RUNNING"),
      spec({ image: "vllm:1", autoscaling: { minReplicas: 1, maxReplicas: 4 } }),
      now,
    )
    const without = updateSpec(withImage.swarm, spec(), now).swarm
    expect(without.image).toBeUndefined()
    expect(without.autoscaling).toBeUndefined()
  })
})

describe("the replica generation", () => {
  const spec = (extra: object = {}) => SwarmSpec.parse({ name: "llm", model: "echo", replicas: 2, ...extra })
  const running = swarm("RUNNING", { generation: 3, replicaGeneration: 2 })

  test("a scale, a new rollout or autoscaling policy, or new labels keep what each replica runs", () => {
    for (const change of [
      { replicas: 5 },
      { autoscaling: { minReplicas: 1, maxReplicas: 4 } },
      { rollout: { maxSurge: 2, maxUnavailable: 0, drainTimeoutS: 5 } },
      { labels: { team: "a" } },
    ])
      expect(updateSpec(running, spec(change), now).swarm, JSON.stringify(change)).toMatchObject({
        generation: 4,
        replicaGeneration: 2,
      })
  })

  test("a change to what a replica runs starts a new one", () => {
    for (const change of [{ args: ["--x"] }, { image: "vllm:2" }, { env: { A: "1" } }, { model: "other" }])
      expect(updateSpec(running, spec(change), now).swarm.replicaGeneration, JSON.stringify(change)).toBe(4)
  })

  test("a swarm that starts over starts a new one", () => {
    const stopped = swarm("STOPPED", { desired: "deleted", generation: 3, replicaGeneration: 2 })
    expect(updateSpec(stopped, spec(), now).swarm.replicaGeneration).toBe(4)
  })
})

describe("active index and waiting", () => {
  test("a FAILED swarm with nothing deployed leaves the active index; with a deployment it stays", () => {
    expect(isSwarmActive(swarm("FAILED"))).toBe(false)
    expect(isSwarmActive(swarm("FAILED", { handle: { id: "j", url: "", meta: {} } }))).toBe(true)
    expect(isSwarmActive(swarm("PENDING"))).toBe(true)
  })

  test("a swarm scaled to 0 by its spec, with nothing left running, leaves the index until an update", () => {
    const zero = swarm("STOPPED", { replicas: 0 })
    expect(isSwarmActive(zero)).toBe(false)
    // Still stopping something, or autoscaled (its router stays), it stays.
    expect(
      isSwarmActive({
        ...zero,
        replicaSet: { nextSlot: 1, replicas: [{ slot: 0, generation: 1, state: "draining", since: now }] },
      } as Swarm),
    ).toBe(true)
    const autoscaling = SwarmSpec.parse({
      name: "s",
      model: "echo",
      autoscaling: { minReplicas: 0, maxReplicas: 2 },
    }).autoscaling
    expect(isSwarmActive({ ...zero, autoscaling })).toBe(true)
    // An update to serve again makes it PENDING: active.
    expect(
      isSwarmActive(updateSpec(zero, SwarmSpec.parse({ name: "s", model: "echo", replicas: 2 }), now).swarm),
    ).toBe(true)
  })

  const cases: [string, Swarm, SwarmPhase, ReturnType<typeof waitState>][] = [
    ["running on the current generation", swarm("RUNNING"), "RUNNING", "reached"],
    [
      "running an older generation",
      swarm("RUNNING", { generation: 2, observedGeneration: 1 }),
      "RUNNING",
      "waiting",
    ],
    ["failed while it should run", swarm("FAILED"), "RUNNING", "settled"],
    ["failed while being deleted", swarm("FAILED", { desired: "deleted" }), "STOPPED", "waiting"],
    ["stopped after a delete", swarm("STOPPED", { desired: "deleted" }), "RUNNING", "settled"],
    [
      "stopped after a delete, waiting for STOPPED",
      swarm("STOPPED", { desired: "deleted" }),
      "STOPPED",
      "reached",
    ],
    ["initializing", swarm("INITIALIZING"), "RUNNING", "waiting"],
    [
      "its update rolled back, the older generation serving",
      swarm("RUNNING", {
        generation: 2,
        observedGeneration: 1,
        replicaSet: { nextSlot: 3, replicas: [], rolledBack: { generation: 2, reason: "x" } },
      }),
      "RUNNING",
      "settled",
    ],
  ]
  for (const [name, s, wanted, want] of cases)
    test(`wait for ${wanted}: ${name} → ${want}`, () => expect(waitState(s, wanted)).toBe(want))
})
