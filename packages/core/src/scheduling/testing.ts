/**
 * Builders for scheduler tests: `worker("w1").cpu(4).attr("zone", "a")`, `job("j").gpu(2).band(1)`,
 * and `snapshot(workers, jobs)`. Defaults are small and explicit so a test states only what matters.
 */
import type {
  Band,
  Constraint,
  Op,
  Placement,
  Res,
  RunningTask,
  SchedJob,
  SchedWorker,
  Snapshot,
} from "./types"

const GiB = 1024 ** 3

/** `res({ cpu: 2, memGiB: 4 })`: cores and GiB in, millicores and bytes out. */
export function res(r: { cpu?: number; memGiB?: number; gpu?: number; tpu?: number } = {}): Res {
  return {
    cpuMillis: Math.round((r.cpu ?? 0) * 1000),
    memoryBytes: Math.round((r.memGiB ?? 0) * GiB),
    gpu: r.gpu ?? 0,
    tpu: r.tpu ?? 0,
  }
}

export class WorkerBuilder {
  private readonly w: SchedWorker
  constructor(id: string) {
    this.w = { id, capacity: res({ cpu: 8, memGiB: 32 }), attributes: {}, running: [] }
  }
  cpu(cores: number) {
    this.w.capacity.cpuMillis = Math.round(cores * 1000)
    return this
  }
  mem(gib: number) {
    this.w.capacity.memoryBytes = Math.round(gib * GiB)
    return this
  }
  gpu(n: number) {
    this.w.capacity.gpu = n
    return this
  }
  tpu(n: number) {
    this.w.capacity.tpu = n
    return this
  }
  attr(key: string, value: string | number) {
    this.w.attributes[key] = value
    return this
  }
  /** A task already running here. */
  running(taskId: string, band: Band, r: Parameters<typeof res>[0], building = false) {
    const t: RunningTask = { taskId, band, resources: res(r) }
    if (building) t.building = true
    this.w.running.push(t)
    return this
  }
  build(): SchedWorker {
    return structuredClone(this.w)
  }
}

export class JobBuilder {
  private readonly j: SchedJob
  private n = 1
  constructor(id: string) {
    this.j = { id, band: 1, resources: res({ cpu: 1, memGiB: 1 }), constraints: [], preferences: [] }
  }
  cpu(cores: number) {
    this.j.resources.cpuMillis = Math.round(cores * 1000)
    return this
  }
  mem(gib: number) {
    this.j.resources.memoryBytes = Math.round(gib * GiB)
    return this
  }
  gpu(n: number) {
    this.j.resources.gpu = n
    return this
  }
  tpu(n: number) {
    this.j.resources.tpu = n
    return this
  }
  band(b: Band) {
    this.j.band = b
    return this
  }
  tasks(n: number) {
    this.n = n
    return this
  }
  variant(v: string) {
    this.j.deviceVariant = v
    return this
  }
  where(key: string, op: Op, ...values: (string | number)[]) {
    this.j.constraints.push({ key, op, values })
    return this
  }
  prefer(key: string, op: Op, values: (string | number)[], weight = 1) {
    const constraint: Constraint = { key, op, values }
    this.j.preferences.push({ constraint, weight })
    return this
  }
  gang(groupBy?: string) {
    this.j.gang = groupBy === undefined ? {} : { groupBy }
    return this
  }
  build(): SchedJob {
    return structuredClone(this.j)
  }
  taskIds(): string[] {
    return Array.from({ length: this.n }, (_, i) => `${this.j.id}/${i}`)
  }
}

export const worker = (id: string) => new WorkerBuilder(id)
export const job = (id: string) => new JobBuilder(id)

/** A snapshot whose pending tasks are each job's tasks, jobs in the order given. */
export function snapshot(workers: WorkerBuilder[], jobs: JobBuilder[]): Snapshot {
  const built = jobs.map((j) => j.build())
  return {
    workers: workers.map((w) => w.build()),
    jobs: new Map(built.map((j) => [j.id, j])),
    tasks: jobs.flatMap((j, i) => j.taskIds().map((id) => ({ id, jobId: built[i]!.id }))),
  }
}

/** `{ taskId: workerId }` of a placement, for compact assertions. */
export function where(p: Placement): Record<string, string> {
  return Object.fromEntries(p.assignments.map((a) => [a.taskId, a.workerId]))
}
