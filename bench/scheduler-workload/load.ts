/**
 * The shared workload's JSON (`iris-sched-bench/v1`, written by `gen_workload.py` beside this file)
 * and its conversion to the scheduler's `Snapshot`: REQUIRED constraints become constraints,
 * PREFERRED ones preferences of weight 1, band names become 0/1/2, `coscheduled` + `group_by` a gang,
 * and `device_variant` the job's `deviceVariant` — unless `bindDeviceVariant` is false: Iris's
 * scheduler does not filter on it (its hard constraints do; the variant only gates preemption), and
 * a quarter of the workload's GPU jobs name `h100` while their constraint accepts `h100` or `a100`.
 */
import type {
  Band,
  Constraint,
  Op,
  RunningTask,
  SchedJob,
  SchedTask,
  SchedWorker,
  Snapshot,
} from "@swarmplane/core/scheduling/types"

interface Amounts {
  cpu_millicores?: number
  memory_bytes?: number
  gpu_count?: number
  tpu_count?: number
}

export interface Workload {
  workers: (Amounts & {
    id: string
    attributes: Record<string, string | number>
    committed?: Amounts
    building_count?: number
  })[]
  jobs: (Amounts & {
    id: string
    band: keyof typeof Bands
    device_variant?: string | null
    constraints?: { key: string; op: string; values?: (string | number)[]; mode?: string }[]
    coscheduled?: boolean
    group_by?: string | null
  })[]
  pending_tasks: string[]
}

const Bands = { PRODUCTION: 0, INTERACTIVE: 1, BATCH: 2 } as const satisfies Record<string, Band>

const res = (a: Amounts | undefined) => ({
  cpuMillis: a?.cpu_millicores ?? 0,
  memoryBytes: a?.memory_bytes ?? 0,
  gpu: a?.gpu_count ?? 0,
  tpu: a?.tpu_count ?? 0,
})

export function toSnapshot(doc: Workload, opts: { bindDeviceVariant?: boolean } = {}): Snapshot {
  const bindVariant = opts.bindDeviceVariant ?? true
  const workers: SchedWorker[] = doc.workers.map((w) => {
    // Committed resources become one running task; building tasks hold nothing beyond that.
    const running: RunningTask[] = []
    if (w.committed) running.push({ taskId: `${w.id}/committed`, band: 0, resources: res(w.committed) })
    for (let i = 0; i < (w.building_count ?? 0); i++)
      running.push({ taskId: `${w.id}/building-${i}`, band: 0, resources: res(undefined), building: true })
    return { id: w.id, capacity: res(w), attributes: w.attributes, running }
  })
  const jobs = new Map<string, SchedJob>()
  for (const j of doc.jobs) {
    const constraints: Constraint[] = []
    const preferences: SchedJob["preferences"] = []
    for (const c of j.constraints ?? []) {
      const constraint = { key: c.key, op: c.op.toLowerCase() as Op, values: c.values ?? [] }
      if (c.mode === "PREFERRED") preferences.push({ constraint, weight: 1 })
      else constraints.push(constraint)
    }
    jobs.set(j.id, {
      id: j.id,
      band: Bands[j.band],
      resources: res(j),
      ...(j.device_variant && bindVariant ? { deviceVariant: j.device_variant } : {}),
      constraints,
      preferences,
      ...(j.coscheduled ? { gang: j.group_by ? { groupBy: j.group_by } : {} } : {}),
    })
  }
  const tasks: SchedTask[] = doc.pending_tasks.map((id) => ({ id, jobId: id.slice(0, id.lastIndexOf("/")) }))
  return { workers, jobs, tasks }
}
