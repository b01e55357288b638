/**
 * Swarms through their backend's ServingBackend: create the deployment for the current generation,
 * observe it, tear it down after a delete. Each pass moves each active swarm one step; phase changes
 * are written with the pass's fencing token.
 */
import type { AnyBackend } from "../backends/registry"
import type { Swarm } from "../model/swarm"
import type { Runtime } from "../runtime"
import type { StoredItem } from "../store/port"
import { iso } from "../util/clock"
import { observe } from "./swarm-phase"

export async function reconcileSwarm(
  rt: Runtime,
  backend: AnyBackend,
  item: StoredItem<Swarm>,
  fence: number,
): Promise<void> {
  const now = iso(rt.clock.now())
  let swarm = item.data
  const from = swarm.phase
  let reason = "observed"
  if (swarm.desired === "running") {
    const current = swarm.handle && swarm.handle.meta.generation === swarm.generation
    if (!current) {
      const handle = await backend.createOrUpdate(swarm, fence)
      swarm = { ...swarm, handle, updatedAt: now }
      reason = "deployment_created"
    }
  } else if (swarm.handle) {
    await backend.delete(swarm, fence)
    reason = "teardown"
  }
  const observed = await backend.servingStatus(swarm)
  let next: Swarm
  if ("gone" in observed) next = observe(swarm, { kind: "gone" }, now).swarm
  else {
    next = observe(
      swarm,
      {
        kind: "status",
        phase: observed.phase,
        ...(observed.url ? { url: observed.url } : {}),
        ...(observed.detail ? { detail: observed.detail } : {}),
      },
      now,
    ).swarm
    next = {
      ...next,
      replicaStatus: observed.replicas,
      ...(observed.phase === "RUNNING" && observed.generation !== undefined
        ? { observedGeneration: observed.generation }
        : {}),
    }
  }
  if (next.desired === "deleted" && next.phase === "STOPPED") next = { ...next, url: undefined }
  if (JSON.stringify(next) === JSON.stringify(item.data)) return
  await rt.repos.swarms.save(
    { ...item, data: { ...next, updatedAt: now }, fence },
    { from, reason, ...(next.message ? { message: next.message } : {}) },
  )
}
