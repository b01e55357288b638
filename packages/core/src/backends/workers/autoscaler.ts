/**
 * The autoscaler of a `workers` backend. `planScaling` is pure: demand is what a dry-run placement
 * cannot place on the workers there are, packed onto hypothetical workers of each group in turn;
 * target = max(min, min(busy + new + buffer, max)); starts and stops are rate-limited per minute;
 * only workers idle for `idleTimeoutS` are stopped; provider errors back off exponentially. Every
 * decision carries its reason, which `autoscalerStatus()` shows.
 */
import type { ScaleGroup } from "../../model/backend"
import type { Worker } from "../../model/worker"
import type { ProviderInstance } from "../../providers/port"
import { place } from "../../scheduling/place"
import type { SchedWorker } from "../../scheduling/types"
import type { ScaleGroupStatus, TaskRef } from "../protocol"
import { buildSnapshot, res, workerAttributes } from "./snapshot"

export interface GroupState {
  /** Epoch ms of recent starts and stops (the last minute counts against the rate limits). */
  starts: number[]
  stops: number[]
  failures: number
  backoffUntil?: number
  lastError?: string
}

export interface ScalingInput {
  groups: ScaleGroup[]
  /** Registered, not dead. */
  workers: Worker[]
  instances: Map<string, ProviderInstance[]>
  pending: TaskRef[]
  live: TaskRef[]
  state: Record<string, GroupState>
  now: number
}

export interface ScalingPlan {
  status: ScaleGroupStatus[]
  start: { group: ScaleGroup; count: number }[]
  stop: { group: ScaleGroup; instanceIds: string[] }[]
}

const minute = 60_000
/** An instance that has not registered this long after its start counts as failed. */
export const StartTimeoutMs = 3 * minute

export function backoffMs(failures: number): number {
  return Math.min(300_000, 10_000 * 2 ** Math.max(0, failures - 1))
}

/**
 * New workers of each group the unplaceable pending tasks would need, groups in config order; and the
 * existing workers the placeable ones go to (about to be busy: never idle surplus).
 */
function newWorkersNeeded(input: ScalingInput): { needed: Map<string, number>; used: Set<string> } {
  const first = place(buildSnapshot(input.workers, input.live, input.pending))
  const used = new Set(first.assignments.map((a) => a.workerId))
  let unplaced = input.pending.filter((r) => first.pending.has(`${r.job.id}/${r.task.data.index}`))
  const needed = new Map<string, number>()
  for (const group of input.groups) {
    const current = input.workers.filter((w) => w.scaleGroup === group.name).length
    const room = Math.max(0, group.max - current)
    if (!unplaced.length || room === 0) {
      needed.set(group.name, 0)
      continue
    }
    const hypothetical: SchedWorker[] = Array.from({ length: room }, (_, i) => ({
      id: `new-${group.name}-${i}`,
      capacity: res(group.resources),
      attributes: workerAttributes({ attributes: group.attributes, resources: group.resources } as Worker),
      running: [],
    }))
    const snapshot = buildSnapshot([], [], unplaced)
    const dry = place({ ...snapshot, workers: hypothetical })
    needed.set(group.name, new Set(dry.assignments.map((a) => a.workerId)).size)
    unplaced = unplaced.filter((r) => dry.pending.has(`${r.job.id}/${r.task.data.index}`))
  }
  return { needed, used }
}

export function planScaling(input: ScalingInput): ScalingPlan {
  const { now } = input
  const { needed, used } = newWorkersNeeded(input)
  const busyWorkers = new Set([
    ...used,
    ...input.live.map((r) => r.task.data.attempts.at(-1)?.workerId).filter(Boolean),
  ])
  const plan: ScalingPlan = { status: [], start: [], stop: [] }
  for (const group of input.groups) {
    const state = input.state[group.name] ?? { starts: [], stops: [], failures: 0 }
    const workers = input.workers.filter((w) => w.scaleGroup === group.name)
    const registered = new Set(workers.map((w) => w.instanceId).filter(Boolean))
    const instances = input.instances.get(group.name) ?? []
    const starting = instances.filter((i) => !registered.has(i.id)).length
    const current = workers.length + starting
    const busy = workers.filter((w) => busyWorkers.has(w.id)).length
    const fresh = needed.get(group.name) ?? 0
    const demand = busy + fresh
    const target = Math.max(group.min, Math.min(demand + group.buffer, group.max))
    const base = { group: group.name, min: group.min, max: group.max, current, starting, demand, target }
    const backoff =
      state.backoffUntil && state.backoffUntil > now ? new Date(state.backoffUntil).toISOString() : undefined
    if (target > current) {
      const allowed = group.scaleUpPerMinute - state.starts.filter((t) => now - t < minute).length
      const count = Math.min(target - current, Math.max(0, allowed))
      if (backoff)
        plan.status.push({
          ...base,
          action: "blocked",
          reason: `backing off after a provider error (${state.lastError ?? "unknown"})`,
          backoffUntil: backoff,
        })
      else if (count === 0)
        plan.status.push({
          ...base,
          action: "blocked",
          reason: `needs ${target - current} more; rate limit of ${group.scaleUpPerMinute}/min reached`,
        })
      else {
        // Name what the target is made of: min when it dominates, else busy + new + buffer (capped by max).
        const parts = [
          busy ? `${busy} busy` : "",
          fresh ? `${fresh} new worker(s) for pending work` : "",
          group.buffer ? `buffer ${group.buffer}` : "",
        ].filter(Boolean)
        const wanted =
          group.min > demand + group.buffer || !parts.length
            ? `min ${group.min}`
            : `${parts.join(" + ")}${demand + group.buffer > group.max ? ` (max ${group.max})` : ""}`
        plan.start.push({ group, count })
        plan.status.push({
          ...base,
          action: "scale_up",
          reason: `${wanted}: starting ${count}${count < target - current ? ` (rate limit ${group.scaleUpPerMinute}/min)` : ""}`,
        })
      }
      continue
    }
    if (target < current) {
      const idleFor = (w: Worker) => (w.idleSince ? now - Date.parse(w.idleSince) : 0)
      const idle = workers.filter(
        (w) => !busyWorkers.has(w.id) && w.instanceId && idleFor(w) >= group.idleTimeoutS * 1000,
      )
      const allowed = group.scaleDownPerMinute - state.stops.filter((t) => now - t < minute).length
      const count = Math.min(current - target, Math.max(0, allowed), idle.length)
      if (count > 0) {
        const chosen = idle.sort((a, b) => idleFor(b) - idleFor(a)).slice(0, count)
        plan.stop.push({ group, instanceIds: chosen.map((w) => w.instanceId!) })
        plan.status.push({
          ...base,
          action: "scale_down",
          reason: `${current - target} more than needed; stopping ${count} idle for ≥ ${group.idleTimeoutS}s`,
        })
      } else
        plan.status.push({
          ...base,
          action: "none",
          reason: `${current - target} more than needed, but ${idle.length ? `rate limit ${group.scaleDownPerMinute}/min reached` : `none idle for ${group.idleTimeoutS}s yet`}`,
        })
      continue
    }
    plan.status.push({
      ...base,
      action: "none",
      reason: demand ? `${demand} worker(s) busy or needed; at target` : `no demand; at target`,
    })
  }
  return plan
}
