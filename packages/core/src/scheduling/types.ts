/**
 * The scheduler's inputs and outputs. The scheduler is a pure function over a snapshot: it never
 * reads the store, the clock or a backend. The workers backend builds snapshots from the store; the
 * autoscaler builds one with hypothetical workers for its dry run; the benchmark builds one from the
 * shared scheduling workload. Imports only model/ (DESIGN.md §1).
 */

/** An amount of each resource. CPU in millicores, memory in bytes (exact for any workload). */
export interface Res {
  cpuMillis: number
  memoryBytes: number
  gpu: number
  tpu: number
}

/** Attribute selector operators. Values compare trimmed and lowercased; gt/ge/lt/le only on numbers. */
export type Op = "eq" | "ne" | "exists" | "not_exists" | "in" | "gt" | "ge" | "lt" | "le"

export interface Constraint {
  key: string
  op: Op
  /** One value for eq/ne/gt/ge/lt/le, several for in, none for exists/not_exists. */
  values: (string | number)[]
}

export interface Preference {
  constraint: Constraint
  /** How much a match counts; placements prefer higher totals. */
  weight: number
}

/** Priority band: 0 production, 1 interactive, 2 batch. Lower goes first; preemption takes only from higher numbers. */
export type Band = 0 | 1 | 2

/** A task already running (or assigned) on a worker: what it holds, and whether it may be preempted. */
export interface RunningTask {
  taskId: string
  band: Band
  resources: Res
  /** True while still starting (counts against `maxBuildingPerWorker`). */
  building?: boolean
}

export interface SchedWorker {
  id: string
  /** Total resources of the worker. */
  capacity: Res
  attributes: Record<string, string | number>
  /** What runs there now; free = capacity − Σ running. */
  running: RunningTask[]
}

export interface SchedJob {
  id: string
  band: Band
  /** Per task. */
  resources: Res
  /** GPU/TPU model the tasks need, matched against the worker attribute `accelerator` (or `device-variant`). */
  deviceVariant?: string
  /** Hard: every placement must match all of them. */
  constraints: Constraint[]
  /** Soft: rank the candidate workers. */
  preferences: Preference[]
  /** Gang: all pending tasks of the job are placed together (on distinct workers sharing `groupBy`'s value) or none. */
  gang?: { groupBy?: string }
}

export interface SchedTask {
  id: string
  jobId: string
}

export interface Snapshot {
  workers: SchedWorker[]
  jobs: ReadonlyMap<string, SchedJob>
  /** Pending tasks in submission order; the scheduler orders them by band itself (stable within a band). */
  tasks: SchedTask[]
}

export interface PlaceOptions {
  /** New assignments per worker in one pass (Iris: 4). Unlimited when absent. */
  maxAssignmentsPerWorker?: number
  /** Building tasks per worker, counting new ones (Iris: 8). Unlimited when absent. */
  maxBuildingPerWorker?: number
  /** Allow evicting strictly lower-band running tasks to place higher-band ones. Default false. */
  preemption?: boolean
}

export interface Placement {
  assignments: { taskId: string; workerId: string }[]
  /** Running tasks to evict (only when `preemption`), each for a higher-band task placed in its room. */
  preemptions: { taskId: string; workerId: string; forTaskId: string }[]
  /** Why each unplaced task was not placed, in words a user understands, e.g. `needs 8 gpu, largest free is 4`. */
  pending: Map<string, string>
  stats: { tasksPlaced: number; gangsPlaced: number; gangsUnplaced: number }
}
