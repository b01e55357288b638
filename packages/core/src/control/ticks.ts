/**
 * The reconcile and autoscale ticks. Each walks the registered backends; a backend with nothing
 * active (no items in its sparse active index, no live workers) costs a few one-item queries and
 * nothing else, so an idle control plane costs almost nothing. A failing backend is reported in its
 * status and skipped; the others go on.
 */

import { randomUUID } from "node:crypto"
import { createBackend } from "../backends/registry"
import type { Backend } from "../model/backend"
import type { Runtime } from "../runtime"
import { ActiveIndex } from "../store/keys"
import { warnOnChange } from "../util/log-on-change"
import { activeWork } from "./active"
import { type PassReport, reconcilePass } from "./reconcile"

export interface TickReport {
  backends: PassReport[]
  /** Backends with active work (the tick should come again soon). */
  busy: number
}

/** Whether a backend has anything to look after: active items, or workers that are not dead. */
async function hasWork(rt: Runtime, backend: Backend, scaling = false): Promise<boolean> {
  // A scale group with a minimum is looked after even with nothing to do: its workers must exist.
  if (scaling && backend.config.type === "workers" && backend.config.scaleGroups.some((g) => g.min > 0))
    return true
  for (const pk of ActiveIndex.partitions(backend.project, backend.id))
    if ((await rt.repos.store.queryIndex("active", pk, { limit: 1 })).items.length) return true
  if (backend.kind !== "worker-daemon") return false
  return (await rt.repos.workers.list(backend.project, backend.id)).some((w) => w.health !== "dead")
}

async function eachBackend(
  rt: Runtime,
  visit: (backend: Backend) => Promise<PassReport>,
  scaling = false,
): Promise<TickReport> {
  const backends = await rt.repos.backends.listAll()
  const reports = await Promise.all(
    backends.map(async (backend): Promise<PassReport> => {
      const idle: PassReport = {
        project: backend.project,
        backendId: backend.id,
        ran: false,
        active: 0,
        placed: 0,
        transitions: 0,
      }
      try {
        return (await hasWork(rt, backend, scaling)) ? await visit(backend) : idle
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error)
        warnOnChange(rt.logger, `backend ${backend.project}/${backend.id}`, `skipped: ${message}`)
        return { ...idle, error: message }
      }
    }),
  )
  return { backends: reports, busy: reports.filter((r) => r.active > 0 || r.placed > 0).length }
}

/** One reconcile pass over every backend. `owner` names this process in the leases. */
export function reconcileTick(
  rt: Runtime,
  owner = `tick-${process.pid}-${randomUUID().slice(0, 8)}`,
): Promise<TickReport> {
  return eachBackend(rt, (backend) => reconcilePass(rt, backend, owner))
}

/** One autoscale pass over every worker-daemon backend with scale groups. */
export function autoscaleTick(
  rt: Runtime,
  owner = `autoscale-${process.pid}-${randomUUID().slice(0, 8)}`,
): Promise<TickReport> {
  return eachBackend(
    rt,
    async (record) => {
      const report: PassReport = {
        project: record.project,
        backendId: record.id,
        ran: false,
        active: 0,
        placed: 0,
        transitions: 0,
      }
      if (record.config.type !== "workers" || !record.config.scaleGroups.length) return report
      const lease = await rt.repos.leases.acquire(record.project, record.id, "autoscale", owner, 60_000)
      if (!lease) return report
      try {
        const work = await activeWork(rt, record)
        const backend = createBackend(record, rt)
        await backend.autoscale({ pending: work.pending, live: work.live })
        return { ...report, ran: true, active: work.count }
      } finally {
        await rt.repos.leases.release(lease)
      }
    },
    true,
  )
}

/**
 * Repeat `tick` every `intervalMs` while it reports busy backends, until `deadlineMs` (clock time) is
 * near; return after one pass when idle. This is how a once-a-minute cron gets a cadence of seconds.
 */
export async function tickWhileBusy(
  rt: Runtime,
  tick: (rt: Runtime) => Promise<TickReport>,
  options: { deadlineMs: number; intervalMs: number; marginMs: number },
): Promise<{ passes: number; last: TickReport }> {
  let passes = 0
  for (;;) {
    const last = await tick(rt)
    passes++
    if (last.busy === 0) return { passes, last }
    if (rt.clock.now() + options.intervalMs + options.marginMs >= options.deadlineMs) return { passes, last }
    await rt.clock.sleep(options.intervalMs)
  }
}
