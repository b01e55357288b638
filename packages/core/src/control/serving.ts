/**
 * Swarms through their backend's ServingBackend: create the deployment for the current generation,
 * observe it, tear it down after a delete or a failure. Each pass moves each active swarm one step,
 * from a consistent read of it; phase changes are written with the pass's fencing token.
 */
import type { ReplicaSetBackend, ServingBackend } from "../backends/protocol"
import type { Swarm } from "../model/swarm"
import type { RouterSample } from "../model/worker"
import { autoscale } from "../rules/swarm-autoscale"
import { observe } from "../rules/swarm-phase"
import { planRollout } from "../rules/swarm-rollout"
import type { StoredItem } from "../store/port"
import { iso } from "../util/clock"
import { isRetryable } from "../util/errors"
import type { ControlDeps } from "./deps"

/** Move one swarm a step; returns what the step was (`deployment_created`, `teardown`, `observed`, ...). */
export async function reconcileSwarm(
  rt: ControlDeps,
  backend: ServingBackend,
  indexed: StoredItem<Swarm>,
  fence: number,
): Promise<string | undefined> {
  // The active index may lag a user's update or delete: act on the swarm as it is now.
  const item = await rt.repos.swarms.head(indexed.data.project, indexed.data.name)
  if (!item) return undefined
  const now = iso(rt.clock.now())
  let swarm = item.data
  const from = swarm.phase
  let reason = "observed"
  let next: Swarm

  if (swarm.desired === "running" && swarm.phase === "FAILED") {
    // A failed deployment is torn down and the swarm waits, FAILED, for the user to update or delete it.
    if (!swarm.handle) return undefined
    await backend.delete(swarm, fence)
    const observed = await backend.servingStatus(swarm)
    if (!("gone" in observed) && observed.phase !== "STOPPED" && !observed.idle) return undefined
    next = { ...swarm, handle: undefined, url: undefined }
    reason = "teardown"
  } else {
    if (swarm.desired === "running") {
      if (!swarm.handle || swarm.handle.meta.generation !== swarm.generation) {
        try {
          swarm = { ...swarm, handle: await backend.createOrUpdate(swarm, fence), updatedAt: now }
        } catch (error) {
          // A deployment the backend refuses for good (a value Slurm would not take) fails the swarm
          // with the backend's words, instead of being tried again every pass.
          if (isRetryable(error)) throw error
          const message = error instanceof Error ? error.message : String(error)
          next = observe(swarm, { kind: "status", phase: "FAILED", detail: message }, now).swarm
          await rt.transitions.swarms.save(
            { ...item, data: next, fence },
            { from, reason: "deploy_refused", message },
          )
          return "deploy_refused"
        }
        reason = "deployment_created"
      }
    } else if (swarm.handle) {
      await backend.delete(swarm, fence)
      reason = "teardown"
    }
    const observed = await backend.servingStatus(swarm)
    // After a delete, a deployment with nothing queued or running is gone, whatever phase its jobs ended in.
    if ("gone" in observed || (swarm.desired === "deleted" && observed.idle))
      next = observe(swarm, { kind: "gone" }, now).swarm
    else {
      next = observe(
        swarm,
        {
          kind: "status",
          phase: observed.phase,
          ...(observed.url ? { url: observed.url } : {}),
          ...(observed.detail ? { detail: observed.detail } : {}),
          replicas: observed.replicas,
        },
        now,
      ).swarm
      if (observed.phase === "RUNNING" && observed.generation !== undefined)
        next = { ...next, observedGeneration: observed.generation }
    }
  }
  if (JSON.stringify(next) !== JSON.stringify(item.data))
    await rt.transitions.swarms.save(
      { ...item, data: { ...next, updatedAt: now }, fence },
      { from, reason, ...(next.message ? { message: next.message } : {}) },
    )
  return reason
}

/**
 * Move one swarm a step on a backend where swarmplane rolls the replicas itself: observe its router
 * and replicas, plan the step (`rules/swarm-rollout`), start and stop what the plan says, and save
 * the swarm (its replica set, which the router follows, and its phase) with the pass's fence.
 */
export async function reconcileReplicaSet(
  rt: ControlDeps,
  backend: ReplicaSetBackend,
  indexed: StoredItem<Swarm>,
  fence: number,
): Promise<string | undefined> {
  const item = await rt.repos.swarms.head(indexed.data.project, indexed.data.name)
  if (!item) return undefined
  const swarm = item.data
  // A failed swarm whose replicas and router are stopped waits for the user to update or delete it.
  if (swarm.desired === "running" && swarm.phase === "FAILED" && !swarm.handle) return undefined
  const nowMs = rt.clock.now()
  const now = iso(nowMs)
  const seen = await backend.observeReplicaSet(swarm)
  // A router whose counters the pass reads (Slurm): a sample of the swarm's metrics, as a heartbeat gives.
  const sampled = seen.counters
    ? await rt.transitions.swarms.recordRouterSample(swarm.project, swarm.name, seen.counters)
    : undefined
  // With `autoscaling`, the count follows the router's load (`rules/swarm-autoscale`).
  const scaled =
    swarm.autoscaling && swarm.desired === "running"
      ? await autoscaleStep(rt, swarm, nowMs, sampled)
      : undefined
  const plan = planRollout({
    swarm,
    replicas: seen.replicas,
    router: seen.router,
    now: nowMs,
    ...(scaled ? { target: scaled.state.replicas } : {}),
  })

  let handle = swarm.handle
  if (plan.router === "run") handle = await backend.runRouter(swarm)
  for (const replica of plan.start) await backend.startReplica(swarm, replica)
  if (plan.stop.length) await backend.stopReplicas(swarm, plan.stop)
  // A router that reads its replicas from a file is told the serving ones when they change.
  const urls = plan.replicaSet.replicas.flatMap((r) => (r.state === "serving" && r.url ? [r.url] : []))
  if (backend.route && seen.routed && plan.router === "run" && urls.join("\n") !== seen.routed.join("\n"))
    await backend.route(swarm, urls)
  if (
    plan.router === "stop" &&
    seen.router.state !== "missing" &&
    seen.router.state !== "ended" &&
    !seen.router.over
  )
    await backend.stopRouter(swarm)

  const from = swarm.phase
  let next: Swarm
  if (plan.gone) {
    // Nothing runs: deleted (STOPPED), failed (waits), or scaled to 0 (STOPPED until an update).
    const gone = swarm.desired === "deleted" ? observe(swarm, { kind: "gone" }, now).swarm : swarm
    next = {
      ...gone,
      ...(swarm.desired === "running" && swarm.phase !== "FAILED"
        ? observe(
            swarm,
            { kind: "status", phase: "STOPPED", ...(plan.detail ? { detail: plan.detail } : {}) },
            now,
          ).swarm
        : {}),
      handle: undefined,
      url: undefined,
    }
  } else {
    next = observe(
      { ...swarm, handle },
      {
        kind: "status",
        phase: plan.phase,
        ...(plan.url ? { url: plan.url } : {}),
        ...(plan.detail ? { detail: plan.detail } : {}),
      },
      now,
    ).swarm
    // The plan says everything there is to say: no detail now means none.
    next = { ...next, message: next.phase === plan.phase ? plan.detail : next.message }
    if (!next.message) delete next.message
    if (plan.observedGeneration !== undefined) next = { ...next, observedGeneration: plan.observedGeneration }
  }
  next = {
    ...next,
    replicaSet: plan.replicaSet,
    replicaStatus: plan.replicaStatus,
    ...(scaled ? { autoscaler: scaled.state } : {}),
  }
  // A swarm no longer autoscaled forgets the autoscaler's state.
  if (!swarm.autoscaling) delete next.autoscaler
  const changed = plan.replicaSet.lastChange !== swarm.replicaSet?.lastChange
  const reason = scaled?.decision
    ? "autoscaled"
    : plan.start.length
      ? "replicas_started"
      : changed
        ? "rollout"
        : "observed"
  if (JSON.stringify(next) !== JSON.stringify(item.data)) {
    const message = scaled?.decision
      ? `${scaled.decision.from} → ${scaled.decision.to} replicas: ${scaled.decision.reason}`
      : changed
        ? plan.replicaSet.lastChange
        : next.message
    await rt.transitions.swarms.save(
      { ...item, data: { ...next, updatedAt: now }, fence },
      // An autoscaling decision and a rollout step are events of their own, whatever the phase does.
      { from, reason, ...(message ? { message } : {}), always: !!scaled?.decision || changed },
    )
  }
  return plan.start.length ? "deployment_created" : reason
}

/** The autoscaler's step for a swarm with `autoscaling`: the router's samples read, a count decided. */
async function autoscaleStep(rt: ControlDeps, swarm: Swarm, now: number, sampled?: RouterSample[]) {
  // The samples this pass just recorded (Slurm), else as the heartbeats left them.
  const samples = sampled ?? (await rt.repos.swarms.metrics(swarm.project, swarm.name))?.data.samples ?? []
  const last = samples.at(-1)
  const serving = (swarm.replicaSet?.replicas ?? []).filter((r) => r.state === "serving").length
  return autoscale({
    policy: swarm.autoscaling!,
    specReplicas: swarm.replicas,
    state: swarm.autoscaler,
    samples,
    ...(last && (last.waiting ?? 0) > 0 ? { wakeRequestedAt: last.at } : {}),
    serving,
    now,
  })
}

/**
 * The swarm's backend could not be reached this pass: a live swarm is UNKNOWN, with the error as its
 * message, until the backend answers again (FAILED and STOPPED swarms keep their phase).
 */
export async function noteUnreachable(
  rt: ControlDeps,
  indexed: StoredItem<Swarm>,
  message: string,
  fence: number,
): Promise<void> {
  const item = await rt.repos.swarms.head(indexed.data.project, indexed.data.name)
  if (!item) return
  const change = observe(item.data, { kind: "unreachable", detail: message }, iso(rt.clock.now()))
  if (!change.changed) return
  await rt.transitions.swarms.save(
    { ...item, data: change.swarm, fence },
    { from: change.from, reason: "backend_unreachable", message },
  )
}
