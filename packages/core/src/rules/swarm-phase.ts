/**
 * Swarm phase machine (domyn-swarm's ServingPhase plus a desired state). Pure. The reconcile tick
 * feeds backend observations through `observe`; the API feeds user intent through `updateSpec` and
 * `requestDelete`.
 */

import type { SwarmPhase } from "../model/states"
import type { Swarm, SwarmSpec } from "../model/swarm"
import { SwarmSpecFields } from "../model/swarm-fields"

/** Legal phase transitions. A phase may always stay where it is. */
export const SwarmTransitions: Record<SwarmPhase, readonly SwarmPhase[]> = {
  PENDING: ["INITIALIZING", "RUNNING", "FAILED", "STOPPED", "UNKNOWN"],
  INITIALIZING: ["PENDING", "RUNNING", "FAILED", "STOPPED", "UNKNOWN"],
  RUNNING: ["PENDING", "INITIALIZING", "FAILED", "STOPPED", "UNKNOWN"],
  FAILED: ["PENDING", "STOPPED"],
  UNKNOWN: ["PENDING", "INITIALIZING", "RUNNING", "FAILED", "STOPPED"],
  STOPPED: ["PENDING"],
}

export function canSwarmTransition(from: SwarmPhase, to: SwarmPhase): boolean {
  return from === to || SwarmTransitions[from].includes(to)
}

/** What a backend reports of a deployment, or that it could not tell. */
export type ServingObservation =
  | {
      kind: "status"
      phase: SwarmPhase
      url?: string
      detail?: string
      /** The replicas as the backend reports them (kept as they were when absent). */
      replicas?: Swarm["replicaStatus"]
    }
  | { kind: "gone" }
  | { kind: "unreachable"; detail: string }

export interface PhaseChange {
  swarm: Swarm
  changed: boolean
  from: SwarmPhase
}

/**
 * Apply an observation. While desired is `deleted`, only STOPPED (or a gone deployment, which is
 * STOPPED) ends the wait; a running deployment stays in its phase until teardown completes. An
 * unreachable backend moves a live swarm to UNKNOWN and leaves STOPPED/FAILED alone.
 */
export function observe(swarm: Swarm, observation: ServingObservation, nowIso: string): PhaseChange {
  const from = swarm.phase
  let to: SwarmPhase = from
  let url = swarm.url
  let message = swarm.message
  let replicaStatus = swarm.replicaStatus
  switch (observation.kind) {
    case "gone":
      to = swarm.desired === "deleted" ? "STOPPED" : from === "STOPPED" ? "STOPPED" : "PENDING"
      url = undefined
      // Nothing is deployed: no replica is ready.
      replicaStatus = { ready: 0, total: replicaStatus.total, items: [] }
      break
    case "unreachable":
      if (from !== "STOPPED" && from !== "FAILED") to = "UNKNOWN"
      message = observation.detail
      break
    case "status":
      to = observation.phase
      if (swarm.desired === "deleted" && to !== "STOPPED") to = from
      url =
        observation.phase === "RUNNING"
          ? (observation.url ?? url)
          : observation.phase === "STOPPED"
            ? undefined
            : url
      message = observation.detail ?? (to === from ? message : undefined)
      if (observation.replicas) replicaStatus = observation.replicas
      break
  }
  if (!canSwarmTransition(from, to)) to = from
  // A deleted swarm that has stopped serves nothing and asks for nothing, whatever the last read showed.
  if (to === "STOPPED" && swarm.desired === "deleted") {
    url = undefined
    replicaStatus = { ready: 0, total: 0, items: [] }
  }
  const changed =
    to !== from ||
    url !== swarm.url ||
    message !== swarm.message ||
    JSON.stringify(replicaStatus) !== JSON.stringify(swarm.replicaStatus)
  if (!changed) return { swarm, changed, from }
  return { swarm: { ...swarm, phase: to, url, message, replicaStatus, updatedAt: nowIso }, changed, from }
}

/** The fields of a swarm that are not its spec: what the control plane knows about it. */
type SwarmStatus = Omit<Swarm, keyof SwarmSpec>

const specFields = new Set<string>(SwarmSpecFields)

function statusOf(swarm: Swarm): SwarmStatus {
  return Object.fromEntries(Object.entries(swarm).filter(([key]) => !specFields.has(key))) as SwarmStatus
}

/** Spec fields that change how many replicas run or how they are rolled, not what each one runs. */
const SizingFields = new Set<string>(["replicas", "autoscaling", "rollout", "labels"])

/** What each replica runs: the spec without its sizing fields, comparable as text. */
function replicaTemplate(spec: Partial<SwarmSpec>): string {
  return JSON.stringify(SwarmSpecFields.filter((f) => !SizingFields.has(f)).map((f) => [f, spec[f] ?? null]))
}

/** The generation whose replica spec the swarm's replicas run (see `Swarm.replicaGeneration`). */
export function replicaGenerationOf(swarm: Pick<Swarm, "generation" | "replicaGeneration">): number {
  return swarm.replicaGeneration ?? swarm.generation
}

/**
 * A create-or-update of the spec: the new spec replaces the old one whole (a field left out is
 * removed), the generation goes up, and a FAILED or STOPPED swarm starts over. A change of only the
 * replica count, the autoscaling or rollout policy, or the labels keeps the replica generation, so
 * the replicas that run are kept and only added or removed.
 */
export function updateSpec(swarm: Swarm, spec: SwarmSpec, nowIso: string): PhaseChange {
  const from = swarm.phase
  const restart = from === "FAILED" || from === "STOPPED" || swarm.desired === "deleted"
  const status = statusOf(swarm)
  const next: Swarm = {
    ...status,
    ...spec,
    desired: "running",
    generation: swarm.generation + 1,
    replicaGeneration:
      !restart && replicaTemplate(swarm) === replicaTemplate(spec)
        ? replicaGenerationOf(swarm)
        : swarm.generation + 1,
    phase: restart ? "PENDING" : from,
    message: restart ? undefined : swarm.message,
    replicaStatus: { ...swarm.replicaStatus, total: spec.replicas },
    updatedAt: nowIso,
  }
  return { swarm: next, changed: true, from }
}

/**
 * DELETE: desired becomes `deleted`. A swarm that never got a deployment (no handle) is STOPPED at
 * once; otherwise the reconcile tick tears it down and observes STOPPED.
 */
export function requestDelete(swarm: Swarm, nowIso: string): PhaseChange {
  const from = swarm.phase
  if (swarm.desired === "deleted" && (from === "STOPPED" || swarm.handle))
    return { swarm, changed: false, from }
  const phase: SwarmPhase = swarm.handle ? from : "STOPPED"
  return {
    swarm: {
      ...swarm,
      desired: "deleted",
      phase,
      url: swarm.handle ? swarm.url : undefined,
      updatedAt: nowIso,
    },
    changed: true,
    from,
  }
}

/**
 * Whether a caller waiting for `wanted` should stop waiting: `reached` when the swarm is in that phase
 * (for RUNNING: serving the current generation), `settled` when it came to rest elsewhere (FAILED while
 * it should run; STOPPED), `waiting` otherwise.
 */
export function waitState(swarm: Swarm, wanted: SwarmPhase): "reached" | "settled" | "waiting" {
  const current = wanted !== "RUNNING" || swarm.observedGeneration === swarm.generation
  if (swarm.phase === wanted && current) return "reached"
  // An update whose new replicas failed and were rolled back: the older generation serves on.
  if (wanted === "RUNNING" && swarm.replicaSet?.rolledBack?.generation === replicaGenerationOf(swarm))
    return "settled"
  if (swarm.desired === "deleted") return swarm.phase === "STOPPED" ? "settled" : "waiting"
  if (swarm.phase === "FAILED" || swarm.phase === "STOPPED") return "settled"
  return "waiting"
}
