/**
 * What the store and the swarm rules need of a swarm without its schemas (`swarm.ts`): the names of
 * its spec fields and whether it is still active. Plain code, so a cold start that never parses a
 * swarm does not build them.
 */
import type { SwarmDesired, SwarmPhase } from "./states"

/** The rollout of a swarm that names none (`Rollout`'s defaults; `swarm.ts` checks it against the schema). */
export const DefaultRollout = { maxSurge: 1, maxUnavailable: 0, drainTimeoutS: 30 } as const

/** `SwarmSpec`'s fields (`swarm.ts` checks the two agree). */
export const SwarmSpecFields = [
  "name",
  "model",
  "replicas",
  "gpusPerReplica",
  "cpusPerReplica",
  "memoryMiBPerReplica",
  "image",
  "command",
  "args",
  "env",
  "port",
  "healthPath",
  "backendId",
  "backendType",
  "serving",
  "autoscaling",
  "rollout",
  "labels",
] as const

/**
 * A swarm is active (kept in the reconcile index) until it is STOPPED after a delete, FAILED with
 * nothing deployed, or STOPPED at 0 `replicas` with nothing deployed (it waits for the user then; an
 * update makes it PENDING and active again). A FAILED swarm that still has a deployment stays, so the
 * reconciler can observe and clean it up; an autoscaled swarm at zero keeps its router, so it stays.
 */
export function isSwarmActive(swarm: {
  phase: SwarmPhase
  desired: SwarmDesired
  handle?: unknown
  replicas?: number
  autoscaling?: unknown
  replicaSet?: { replicas: readonly unknown[] }
}): boolean {
  if (swarm.phase === "STOPPED" && swarm.desired === "deleted") return false
  if (swarm.phase === "FAILED" && swarm.desired === "running" && !swarm.handle) return false
  if (
    swarm.phase === "STOPPED" &&
    swarm.desired === "running" &&
    !swarm.handle &&
    swarm.replicas === 0 &&
    !swarm.autoscaling &&
    !swarm.replicaSet?.replicas.length
  )
    return false
  return true
}
