import { describe, expect, test } from "vitest"
import { type SwarmPhase, SwarmPhases } from "../model/states"
import type { Swarm } from "../model/swarm"
import { canSwarmTransition, isSwarmActive, observe, requestDelete, updateSpec } from "./swarm-phase"

const t0 = "2026-01-01T00:00:00.000Z"
const now = "2026-01-01T00:00:05.000Z"

function swarm(phase: SwarmPhase, patch: Partial<Swarm> = {}): Swarm {
  return {
    name: "llm",
    project: "p",
    model: "echo",
    replicas: 2,
    gpusPerReplica: 0,
    cpusPerReplica: 1,
    memoryMiBPerReplica: 4096,
    args: [],
    env: {},
    port: 8000,
    healthPath: "/health",
    serving: {},
    labels: {},
    phase,
    desired: "running",
    generation: 1,
    replicaStatus: { ready: 0, total: 2, items: [] },
    createdAt: t0,
    updatedAt: t0,
    ...patch,
  }
}

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

  test("while deleting, a gone deployment is STOPPED", () => {
    const r = observe(swarm("RUNNING", { desired: "deleted" }), { kind: "gone" }, now)
    expect(r.swarm.phase).toBe("STOPPED")
    expect(isSwarmActive(r.swarm)).toBe(false)
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

  test("an update bumps the generation and restarts a FAILED or STOPPED swarm", () => {
    const r = updateSpec(swarm("STOPPED", { desired: "deleted" }), { ...swarm("PENDING"), replicas: 3 }, now)
    expect(r.swarm).toMatchObject({ phase: "PENDING", desired: "running", generation: 2, replicas: 3 })
  })

  test("an update of a RUNNING swarm keeps its phase", () => {
    expect(updateSpec(swarm("RUNNING"), swarm("PENDING"), now).swarm.phase).toBe("RUNNING")
  })
})
