/**
 * The reconcile and autoscale ticks. Each walks the registered backends and reads only the sparse
 * active index, so an idle control plane costs one query per backend partition and nothing else.
 * Per-backend reconcile and autoscale (leases, substrate observation, transitions) plug in here through
 * the backends' `reconcile`/`autoscale`.
 */
import type { Backend } from "../model/backend"
import type { Runtime } from "../runtime"
import { ActiveIndex } from "../store/keys"

export interface BackendTickReport {
  project: string
  backendId: string
  active: number
  error?: string
}

export interface TickReport {
  backends: BackendTickReport[]
  /** Backends with active work. */
  busy: number
}

/** How many active items a backend has, up to `cap` (enough to tell idle from busy cheaply). */
async function activeCount(rt: Runtime, backend: Backend, cap = 100): Promise<number> {
  let n = 0
  for (const pk of ActiveIndex.partitions(backend.project, backend.id)) {
    const page = await rt.repos.store.queryIndex("active", pk, { limit: cap })
    n += page.items.length
  }
  return n
}

async function eachBackend(rt: Runtime, visit: (backend: Backend) => Promise<number>): Promise<TickReport> {
  const backends = await rt.repos.backends.listAll()
  const reports = await Promise.all(
    backends.map(async (backend): Promise<BackendTickReport> => {
      try {
        return { project: backend.project, backendId: backend.id, active: await visit(backend) }
      } catch (error) {
        // A failing backend is reported and skipped; the others go on.
        const message = error instanceof Error ? error.message : String(error)
        rt.logger.warn(`backend ${backend.project}/${backend.id} skipped this tick: ${message}`)
        return { project: backend.project, backendId: backend.id, active: 0, error: message }
      }
    }),
  )
  return { backends: reports, busy: reports.filter((r) => r.active > 0).length }
}

/** One reconcile pass over every backend. */
export function reconcileTick(rt: Runtime): Promise<TickReport> {
  return eachBackend(rt, (backend) => activeCount(rt, backend))
}

/** One autoscale pass over every worker-daemon backend. */
export function autoscaleTick(rt: Runtime): Promise<TickReport> {
  return eachBackend(rt, async (backend) => (backend.kind === "worker-daemon" ? activeCount(rt, backend) : 0))
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
