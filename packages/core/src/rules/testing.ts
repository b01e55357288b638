/** A swarm as the store holds it, for the rules' tests: an echo swarm of 2 replicas, RUNNING. */
import type { Swarm } from "../model/swarm"

export function swarmFixture(patch: Partial<Swarm> = {}): Swarm {
  const t0 = "2026-01-01T00:00:00.000Z"
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
    phase: "RUNNING",
    desired: "running",
    generation: 1,
    observedGeneration: 1,
    replicaStatus: { ready: 0, total: 2, items: [] },
    createdAt: t0,
    updatedAt: t0,
    ...patch,
  }
}
