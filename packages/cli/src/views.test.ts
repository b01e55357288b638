/** What `swarmplane swarm describe` says of a swarm's autoscaling: its targets, its reading, its last decision. */
import { expect, test } from "vitest"
import type { Swarm } from "./client"
import { paint } from "./output"
import { swarmPairs } from "./views"

/** A stored swarm as the API answers it (defaults filled in). */
const swarm = (autoscaling: object, autoscaler?: Swarm["autoscaler"]): Swarm =>
  ({
    name: "s",
    model: "echo",
    replicas: 1,
    autoscaling: {
      targetInflightPerReplica: 32,
      scaleUpDelayS: 0,
      scaleDownDelayS: 300,
      wakeTimeoutS: 300,
      ...autoscaling,
    },
    project: "p",
    phase: "RUNNING",
    desired: "running",
    generation: 1,
    observedGeneration: 1,
    replicaStatus: { ready: 2, total: 2, items: [] },
    createdAt: "2026-12-01T00:00:00.000Z",
    updatedAt: "2026-12-01T00:00:00.000Z",
    ...(autoscaler ? { autoscaler } : {}),
  }) as unknown as Swarm

const line = (s: Swarm) => swarmPairs(paint(false), s).find(([k]) => k === "Autoscaler")?.[1]

test("the autoscaler line names both targets and the first-token reading when the policy has one", () => {
  const s = swarm(
    { minReplicas: 1, maxReplicas: 4, targetInflightPerReplica: 8, targetFirstTokenP99S: 1 },
    {
      replicas: 3,
      decisions: [
        { at: "2026-12-01T00:01:00.000Z", from: 2, to: 3, reason: "time to first token p99 ≤ 2.5 s" },
      ],
      reading: {
        at: "2026-12-01T00:01:00.000Z",
        seconds: 10,
        inFlight: 4,
        requests: 40,
        ttftP99S: 2.5,
        wanted: 3,
      },
    },
  )
  expect(line(s)).toBe(
    "3 replicas (1–4, target 8 in flight each, first token p99 under 1 s); load 4 in flight, first token p99 ≤ 2.5 s (wants 3); last: time to first token p99 ≤ 2.5 s (2026-12-01T00:01:00.000Z)",
  )
})

test("without a first-token target, only the in-flight one; before a reading, it says so", () => {
  expect(line(swarm({ minReplicas: 1, maxReplicas: 2 }))).toBe(
    "? replicas (1–2, target 32 in flight each); no load reading yet",
  )
})
