/**
 * The backend protocols (DESIGN.md §3): `TaskBackend` (Iris's contract, in stateless form) and
 * `ServingBackend` (domyn-swarm's). A tick constructs a backend, binds the runtime, uses it for one
 * invocation and closes it. Backends observe and decide; the control loop writes state. The one
 * exception is a `worker-daemon` backend, whose substrate *is* the store (workers pull their work).
 *
 * A capability a backend lacks throws `NotSupportedError` (`backend.not_supported`), never a silent no-op.
 */
import type { Backend, BackendConfig, ScaleGroup } from "../model/backend"
import type { Attempt, Job, Task } from "../model/job"
import type { Outcome } from "../model/outcome"
import type { BackendKind } from "../model/states"
import type { Swarm } from "../model/swarm"
import type { Worker } from "../model/worker"
import type { Runtime } from "../runtime"
import type { StoredItem } from "../store/port"

export type { BackendKind }

/** What a backend is, for the scheduler, the dashboard and the CLI. */
export interface BackendDescriptor {
  backendId: string
  kind: BackendKind
  /** Attribute values the backend's capacity can satisfy, e.g. `{ accelerator: ["h100"] }`. */
  advertisedAttributes: Record<string, string[]>
  scaleGroups: string[]
  displayName: string
}

/** How to address one attempt: a worker's address (worker-daemon) or the attempt itself (delegated). */
export type TaskTarget = { address: string; attemptUid: string } | { attemptUid: string }

/** A task with its job, as the control loop hands it to a backend. */
export interface TaskRef {
  job: Job
  task: StoredItem<Task>
}

export interface ScheduleRequest {
  /** PENDING tasks to place or submit, in submission order. */
  pending: TaskRef[]
  /** Tasks with a live attempt on this backend (they hold resources). */
  live: TaskRef[]
  /** Workers declared dead earlier in this pass (the worker list may not show it yet). */
  unavailableWorkers?: ReadonlySet<string>
  /** Mint an attempt id (persisted by the control loop before anything runs). */
  mintAttemptUid(): string
}

export interface ScheduleResult {
  /** Tasks to move to ASSIGNED with a fresh attempt (its uid, and where it goes). */
  assignments: { ref: TaskRef; attemptUid: string; workerId?: string; target?: string; submission?: string }[]
  /** Live tasks to preempt so higher bands can run. */
  preemptions: { ref: TaskRef; reason: string }[]
  /** Why each unplaced task waits (keyed `<jobId>/<index>`). */
  pendingReasons: Map<string, string>
}

/** Attempts persisted as ASSIGNED but not yet on the substrate (no `target`): submit or adopt them. */
export interface LaunchRequest {
  attempts: TaskRef[]
}

export interface LaunchResult {
  /** Now on the substrate (submitted, or found there from an earlier try and adopted). */
  launched: { ref: TaskRef; target: string }[]
  /** Refused by the substrate for good (e.g. an unknown partition, a value it would run as a command). */
  failed: { ref: TaskRef; message: string }[]
  /**
   * Not submitted this time: the substrate could not be reached or refused the login. The control loop
   * tries again with backoff; a try that did reach the substrate before it was cut off is adopted then.
   */
  deferred?: { ref: TaskRef; message: string }[]
}

export interface ReconcileRequest {
  /** Tasks with a live attempt on this backend. */
  live: TaskRef[]
  /** When the previous pass finished; a long gap means the control loop was away (see `seedLiveness`). */
  lastPassAt?: number
  /**
   * The backend's active swarms. A backend may observe their deployments in the same batched call and
   * answer this pass's `servingStatus` from it (one SSH command for jobs and swarms on Slurm).
   */
  swarms?: Swarm[]
}

export interface ReconcileResult {
  /** Observed outcomes to apply, each about one attempt (stale ones are dropped when applied). */
  transitions: { ref: TaskRef; outcome: Outcome }[]
  /** Worker health changes (worker-daemon). */
  workers: { worker: StoredItem<Worker>; health: Worker["health"] }[]
  /**
   * What live attempts reported of their work (a batch shard's rows), read by the backend; applied
   * before `transitions`, so a finished attempt's last counters are kept.
   */
  progress?: { ref: TaskRef; progress: NonNullable<Attempt["progress"]> }[]
  /**
   * Submitted attempts that still wait in the substrate's own queue, with its reason in words (e.g.
   * `Slurm: waiting for resources`): shown as the task's `pendingReason` until it starts.
   */
  waiting?: { ref: TaskRef; reason: string }[]
}

export interface AutoscaleRequest {
  pending: TaskRef[]
  live: TaskRef[]
}

export interface ScaleGroupStatus {
  group: string
  min: number
  max: number
  /** Workers registered (healthy) and instances still starting. */
  current: number
  starting: number
  /** Workers the pending work needs in this group (dry-run placement). */
  demand: number
  target: number
  action: "none" | "scale_up" | "scale_down" | "blocked"
  /** In words: why this decision, e.g. `3 tasks need 2 more workers; rate limit allows 1 this minute`. */
  reason: string
  backoffUntil?: string
}

export interface AutoscaleResult {
  groups: ScaleGroupStatus[]
}

export interface BackendStatus {
  healthy: boolean
  message?: string
  /** Delegated backends: queues, partitions, node groups; worker-daemon: workers by health. */
  detail: Record<string, unknown>
}

export interface ResourceCapacity {
  total: { cpu: number; memoryMiB: number; gpu: number }
  free: { cpu: number; memoryMiB: number; gpu: number }
}

export interface LogTail {
  attemptUid: string
  lines: string[]
  /** True when older output was dropped. */
  truncated: boolean
  updatedAt?: string
}

/** Effects to run after the state commit (e.g. stop these attempts on the substrate). */
export type TeardownEffect = { kind: "stop"; attemptUid: string; target?: string }

export interface TaskBackend {
  readonly descriptor: BackendDescriptor
  bindRuntime(runtime: Runtime): void
  schedule(request: ScheduleRequest): Promise<ScheduleResult>
  /**
   * Delegated backends: submit attempts that were persisted before submission, idempotently (an
   * attempt already on the substrate is adopted, never submitted twice). Worker-daemon: nothing to do,
   * workers pull their attempts.
   */
  launch(request: LaunchRequest): Promise<LaunchResult>
  reconcile(request: ReconcileRequest): Promise<ReconcileResult>
  autoscale(request: AutoscaleRequest): Promise<AutoscaleResult>
  status(): Promise<BackendStatus>
  autoscalerStatus(): Promise<AutoscaleResult>
  resourceCapacity(): Promise<ResourceCapacity>
  /** Default image for tasks that name none; undefined: commands run directly on the host. */
  runtimeImage(): string | undefined
  getProcessStatus(target: TaskTarget): Promise<Record<string, unknown>>
  profileTask(target: TaskTarget, durationS: number): Promise<string>
  execInContainer(target: TaskTarget, command: string[]): Promise<{ exitCode: number; output: string }>
  fetchLogs(ref: TaskRef, tail: number): Promise<LogTail>
  /** After the control loop was away: give every worker a fresh grace period before judging liveness. */
  seedLiveness(): Promise<void>
  runTeardown(effects: TeardownEffect[]): Promise<void>
  teardown(): Promise<void>
  /** Remove dead workers older than the retention period; returns how many. */
  pruneDeadWorkers(): Promise<number>
  close(): Promise<void>
}

/**
 * Optional capability: what this invocation's contacts with the substrate came to, so the backend's
 * recorded health is the last contact's result (undefined: no contact was made).
 */
export interface ReportsHealth {
  health(): { healthy: boolean; message?: string } | undefined
}

export function reportsHealth(backend: object): backend is ReportsHealth {
  return typeof (backend as Partial<ReportsHealth>).health === "function"
}

/** Optional capability: the output tails of many tasks in one round trip (one SSH command on Slurm). */
export interface FetchesManyLogs {
  fetchLogsMany(refs: TaskRef[], tail: number): Promise<LogTail[]>
}

export function fetchesManyLogs(backend: object): backend is FetchesManyLogs {
  return typeof (backend as Partial<FetchesManyLogs>).fetchLogsMany === "function"
}

export interface ServingStatus {
  phase: Swarm["phase"]
  url?: string
  detail?: string
  replicas: Swarm["replicaStatus"]
  /** The generation the deployment serves. */
  generation?: number
  /** Nothing of the deployment is queued or running any more: a teardown is complete, whatever the phase. */
  idle?: boolean
}

export interface ServingBackend {
  /** Create or update the deployment for the swarm's current generation; reconciles an existing one without duplicates. */
  createOrUpdate(swarm: Swarm, fence: number): Promise<NonNullable<Swarm["handle"]>>
  /** The deployment's state (named apart from TaskBackend.status, which one object also implements). */
  servingStatus(swarm: Swarm): Promise<ServingStatus | { gone: true }>
  delete(swarm: Swarm, fence: number): Promise<void>
}

/** What a factory gets: the registered backend (id, project, config). */
export type BackendFactory<C extends BackendConfig = BackendConfig> = (
  backend: Backend & { config: C },
) => TaskBackend & ServingBackend

export type { ScaleGroup }
