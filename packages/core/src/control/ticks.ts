/**
 * The reconcile and autoscale ticks. Each walks the registered backends; a backend with nothing
 * active (no items in its sparse active index, no live workers) costs a few one-item queries and
 * nothing else, so an idle control plane costs almost nothing. A failing backend is reported in its
 * status and skipped; the others go on. So is one of a type this release does not implement
 * (registered by another release): its status says so, and nothing else is done with it.
 */

import { randomUUID } from "node:crypto"
import { autoscales, keepsWorkers, type TaskBackend } from "../backends/protocol"
import { createBackend } from "../backends/registry"
import type { Backend } from "../model/backend"
import type { ScheduleQueue, ScheduleRequest } from "../queue/port"
import { warnOnChange } from "../util/log-on-change"
import type { ControlDeps } from "./deps"
import { type PassReport, readSnapshot, reconcilePass } from "./reconcile"

export interface TickReport {
  backends: PassReport[]
  /** Backends with active work (the tick should come again soon). */
  busy: number
}

/** Whether a backend has anything to look after: active items, or workers that are not dead. */
async function hasWork(
  rt: ControlDeps,
  record: Backend,
  backend: TaskBackend,
  scaling: boolean,
): Promise<boolean> {
  // A scale group with a minimum is looked after even with nothing to do: its workers must exist.
  if (scaling && autoscales(backend) && backend.keepsMinimum()) return true
  if (await rt.repos.active.any(record.project, record.id)) return true
  if (!keepsWorkers(backend)) return false
  return (await rt.repos.workers.list(record.project, record.id)).some((w) => w.health !== "dead")
}

/** A backend no factory can make: its status says why (written only when that changes). */
async function noteUnavailable(rt: ControlDeps, record: Backend, message: string): Promise<void> {
  if (record.status.healthy === false && record.status.message === message) return
  await rt.repos.backends.setStatus(record.project, record.id, {
    healthy: false,
    message,
    checkedAt: new Date(rt.clock.now()).toISOString(),
  })
}

async function eachBackend(
  rt: ControlDeps,
  visit: (record: Backend, backend: TaskBackend) => Promise<PassReport>,
  scaling = false,
): Promise<TickReport> {
  const backends = await rt.repos.backends.listAll()
  const reports = await Promise.all(
    backends.map(async (record): Promise<PassReport> => {
      const idle: PassReport = {
        project: record.project,
        backendId: record.id,
        ran: false,
        active: 0,
        placed: 0,
        transitions: 0,
      }
      let backend: TaskBackend | undefined
      try {
        backend = await createBackend(record, rt)
        return (await hasWork(rt, record, backend, scaling)) ? await visit(record, backend) : idle
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error)
        if (!backend) await noteUnavailable(rt, record, message).catch(() => undefined)
        warnOnChange(rt.logger, `backend ${record.project}/${record.id}`, `skipped: ${message}`)
        return { ...idle, error: message }
      } finally {
        await backend?.close().catch(() => undefined)
      }
    }),
  )
  return { backends: reports, busy: reports.filter((r) => r.active > 0 || r.placed > 0).length }
}

/** One reconcile pass over every backend. `owner` names this process in the leases. */
export function reconcileTick(
  rt: ControlDeps,
  owner = `tick-${process.pid}-${randomUUID().slice(0, 8)}`,
): Promise<TickReport> {
  return eachBackend(rt, (record, backend) => reconcilePass(rt, record, owner, backend))
}

/** How long an autoscale pass holds its backend's `autoscale` lease. */
export const AutoscaleLeaseTtlMs = 60_000

/** One autoscale pass over every backend that autoscales and has scale groups. */
export function autoscaleTick(
  rt: ControlDeps,
  owner = `autoscale-${process.pid}-${randomUUID().slice(0, 8)}`,
): Promise<TickReport> {
  return eachBackend(
    rt,
    async (record, backend) => {
      const report: PassReport = {
        project: record.project,
        backendId: record.id,
        ran: false,
        active: 0,
        placed: 0,
        transitions: 0,
      }
      if (!autoscales(backend) || !backend.descriptor.scaleGroups.length) return report
      const lease = await rt.repos.leases.acquire(
        record.project,
        record.id,
        "autoscale",
        owner,
        AutoscaleLeaseTtlMs,
      )
      if (!lease) return report
      try {
        const work = await readSnapshot(rt, record)
        await backend.autoscale({ pending: work.pending(), live: work.live() })
        return { ...report, ran: true, active: work.count }
      } finally {
        await rt.repos.leases.release(lease)
      }
    },
    true,
  )
}

/** The `reason` of a schedule request that is a backend's tick (sent by `fanOutTicks`). */
export const TickReason = "tick"

/**
 * The reconcile tick as a fan-out, for the deployed plane: rather than pass over every backend in the
 * cron's own invocation, give each backend with work its passes for the next `windowMs` as schedule
 * requests (`kind: "backend"`, reason `tick`), one every `intervalMs`, held back by the queue until
 * due. Each backend's passes then run in the schedule consumer's invocations, at their own pace and
 * side by side with other backends' (a batch holds at most 10 requests; the queue scales consumers
 * with its depth): a slow backend (an SSH round trip, a Lepton that stalls) holds up no other, no
 * invocation sleeps between passes, and one invocation's time does not grow with the backends. A
 * backend with nothing to look after gets no request, as it got no pass (`eachBackend`); one that
 * cannot be built is reported in its status here, as before.
 */
export async function fanOutTicks(
  rt: ControlDeps,
  queue: ScheduleQueue,
  options: { windowMs: number; intervalMs: number },
): Promise<TickReport & { sent: number }> {
  const delaysS = Array.from(
    { length: Math.max(1, Math.ceil(options.windowMs / options.intervalMs)) },
    (_, i) => Math.round((i * options.intervalMs) / 1000),
  )
  const requests: ScheduleRequest[] = []
  const delays: number[] = []
  const report = await eachBackend(rt, async (record) => {
    for (const delay of delaysS) {
      requests.push({
        kind: "backend",
        project: record.project,
        id: record.id,
        backendId: record.id,
        reason: TickReason,
      })
      delays.push(delay)
    }
    // No pass here (`ran: false`); `active: 1` counts the backend as busy in the report: it has work.
    return { project: record.project, backendId: record.id, ran: false, active: 1, placed: 0, transitions: 0 }
  })
  await queue.send(requests, delays)
  return { ...report, sent: requests.length }
}
