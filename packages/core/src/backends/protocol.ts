/**
 * The backend protocols (DESIGN.md §3): a small required `TaskBackend` (Iris's contract, in stateless
 * form) and optional capabilities, each an interface with a type guard: `ServingBackend`
 * (domyn-swarm's), `WorkerStoreBackend` (worker-daemon backends), `AutoscalingBackend`,
 * `ReportsCapacity`, `ReportsHealth`, `FetchesManyLogs`. A backend has a capability or it does not:
 * callers ask the guard, and nothing answers with a stub. A factory builds a backend with its runtime
 * for one invocation; the caller closes it after. Backends observe and decide; the control loop writes
 * state. The one exception is a `worker-daemon` backend, whose substrate *is* the store (workers pull
 * their work).
 */
import type { Backend, BackendConfig } from "../model/backend"
import type { Attempt, Job, Task } from "../model/job"
import type { Outcome } from "../model/outcome"
import type { BackendKind } from "../model/states"
import type { ReplicaSlot, Swarm } from "../model/swarm"
import type {
  BackendDescriptor,
  BackendStatus,
  LogTail,
  ResourceCapacity,
  ScaleGroupStatus,
} from "../model/wire"
import type { RouterCounters, Worker } from "../model/worker"
import type { Providers } from "../providers/port"
import type { ReplicaObservation, RouterObservation } from "../rules/swarm-rollout"
import type { Secrets } from "../secrets/port"
import type { Repos } from "../store"
import type { StoredItem } from "../store/port"
import type { Transitions } from "../transitions"
import type { Clock } from "../util/clock"
import type { Logger } from "../util/logger"

// Wire types (descriptor, status, capacity, autoscaler, output tails) live in model/wire.ts.
export type { BackendDescriptor, BackendKind, BackendStatus, LogTail, ResourceCapacity, ScaleGroupStatus }

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
  /**
   * The pass holds its lease until this clock time (ms since the epoch): the backend starts no submit
   * after it and cuts its calls off there, deferring the rest. Past it another pass may hold the lease
   * and launch the same attempts; a submit of this one still going on would make them twice.
   */
  deadline?: number
  /**
   * Attempts placed by this very pass: no earlier try can have submitted them, so a backend may skip
   * looking for one to adopt (a Slurm history lookup costs a read of the completion log).
   */
  firstTry?: ReadonlySet<string>
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
  /**
   * Tasks whose last attempt the control plane ended but the substrate may still run (`task.stopping`).
   * The backend answers a `stopped` outcome for each it no longer runs, and lists in `unstopped` those
   * it still does (they are stopped again after the commit). Absent: none.
   */
  stopping?: TaskRef[]
  /** When the previous pass finished; a long gap means the control loop was away (see `WorkerStoreBackend`). */
  lastPassAt?: number
  /**
   * The backend's active swarms. A backend may observe their deployments in the same batched call and
   * answer this pass's `servingStatus` from it (Lepton: one paged list for its jobs and deployments).
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
  /**
   * Of `stopping`, the attempts the substrate still runs, with where when the store does not know it
   * (a submission whose answer was lost): the control plane stops them again.
   */
  unstopped?: { ref: TaskRef; target?: string }[]
}

/** Effects to run after the state commit (e.g. stop these attempts on the substrate). */
export type TeardownEffect = { kind: "stop"; attemptUid: string; target?: string }

/** The required core every backend implements. */
export interface TaskBackend {
  readonly descriptor: BackendDescriptor
  /** The backend as it is now: healthy or not, with what it shows (partitions, workers by health). */
  status(): Promise<BackendStatus>
  /**
   * Decide placements for pending tasks. Worker-daemon: placement over the worker store; delegated:
   * an attempt per task, to submit in `launch`.
   */
  schedule(request: ScheduleRequest): Promise<ScheduleResult>
  /**
   * Submit attempts that were persisted before submission, idempotently (an attempt already on the
   * substrate is adopted, never submitted twice). Worker-daemon: nothing launched, workers pull their
   * attempts.
   */
  launch(request: LaunchRequest): Promise<LaunchResult>
  /** Observe the live work in one batched call per cluster and say what changed; never writes state. */
  reconcile(request: ReconcileRequest): Promise<ReconcileResult>
  /** After the state commit: stop these attempts on the substrate. Idempotent; an attempt already gone is done. */
  stop(effects: TeardownEffect[]): Promise<void>
  /** The tail of a task's current attempt's output. */
  fetchLogs(ref: TaskRef, tail: number): Promise<LogTail>
  /** Release what the invocation held (a Slurm backend's SSH session). Always called, once. */
  close(): Promise<void>
}

/**
 * What a backend is built with, and all it may use: the repositories and transitions it reads and
 * writes (a worker-daemon backend's substrate is the store), time, logs, the project's secrets and the
 * scale-group providers where it runs.
 */
export interface BackendDeps {
  repos: Repos
  transitions: Transitions
  clock: Clock
  logger: Logger
  secrets: Secrets
  providers: Providers
}

/** A factory: the registered backend (id, project, config) and what it works with. */
export type BackendFactory<C extends BackendConfig = BackendConfig> = (
  backend: Backend & { config: C },
  deps: BackendDeps,
) => TaskBackend

/** Whether `backend` has every member in `names` as a function. */
function has(backend: object, ...names: string[]): boolean {
  return names.every((name) => typeof (backend as Record<string, unknown>)[name] === "function")
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

/** Capability: serving swarms (domyn-swarm's contract). */
export interface ServingBackend {
  /** Create or update the deployment for the swarm's current generation; reconciles an existing one without duplicates. */
  createOrUpdate(swarm: Swarm, fence: number): Promise<NonNullable<Swarm["handle"]>>
  /** The deployment's state (named apart from TaskBackend.status, which one object also implements). */
  servingStatus(swarm: Swarm): Promise<ServingStatus | { gone: true }>
  /** Tear the deployment down. Idempotent: a deployment already gone is done. */
  delete(swarm: Swarm, fence: number): Promise<void>
}

export function isServing(backend: object): backend is ServingBackend {
  return has(backend, "createOrUpdate", "servingStatus", "delete")
}

/**
 * Capability of backends whose swarms swarmplane rolls itself (`workers`): a router of the swarm's own,
 * which outlives every generation, in front of replicas started and stopped one by one, so an update
 * or a scale never drops the endpoint. The pass observes with `observeReplicaSet`, plans with
 * `rules/swarm-rollout`, and applies the plan with the rest. The router learns which replicas to send
 * requests to from the swarm's `replicaSet` (its `serving` replicas).
 */
export interface ReplicaSetBackend {
  /** The swarm's router and each replica its `replicaSet` keeps, as the backend sees them. */
  observeReplicaSet(swarm: Swarm): Promise<{
    router: RouterObservation
    replicas: Map<number, ReplicaObservation>
    /** Where the router reads its replicas from a file (Slurm): the replicas it lists now. */
    routed?: string[]
    /** Where the pass reads the router's counters (Slurm): them, when it wrote them. */
    counters?: RouterCounters
  }>
  /** Start one replica of the swarm's current spec. Idempotent: a replica already started is left. */
  startReplica(swarm: Swarm, replica: ReplicaSlot): Promise<void>
  /** Stop these replicas (the processes end; the next observation finds them ended). Idempotent. */
  stopReplicas(swarm: Swarm, slots: readonly number[]): Promise<void>
  /** Make sure the swarm's router runs (a new one when the last ended); the handle finds it again. */
  runRouter(swarm: Swarm): Promise<NonNullable<Swarm["handle"]>>
  /** Stop the router. Idempotent. */
  stopRouter(swarm: Swarm): Promise<void>
  /** Where the router reads its replicas from a file: write the ones it should send requests to. */
  route?(swarm: Swarm, urls: readonly string[]): Promise<void>
}

export function rollsReplicas(backend: object): backend is ReplicaSetBackend {
  return has(backend, "observeReplicaSet", "startReplica", "stopReplicas", "runRouter", "stopRouter")
}

/**
 * Capability of `worker-daemon` backends: swarmplane keeps their worker store (workers register,
 * heartbeat and pull their attempts), so the control loop looks after the workers' liveness.
 */
export interface WorkerStoreBackend {
  /**
   * Whether a gap since the last pass this long means the control loop itself was away, not the
   * workers: far more than the cron period, so ordinary passes never mistake silence for it.
   */
  isAway(lastPassAt: number, now: number): boolean
  /** After the control loop was away: give every worker a fresh grace period before judging liveness. */
  seedLiveness(): Promise<void>
  /** Remove dead workers older than the retention period; returns how many. */
  pruneDeadWorkers(): Promise<number>
}

export function keepsWorkers(backend: object): backend is WorkerStoreBackend {
  return has(backend, "isAway", "seedLiveness", "pruneDeadWorkers")
}

/**
 * Whether a failed `reconcile` lets the pass go on with its tasks unchanged (the failure becomes the
 * backend's health): a substrate of its own may be away for a while. A worker store is the control
 * plane's own state, and failing to read it fails the pass.
 */
export function toleratesObserveFailure(backend: TaskBackend): boolean {
  return !keepsWorkers(backend)
}

export interface AutoscaleRequest {
  pending: TaskRef[]
  live: TaskRef[]
}

export interface AutoscaleResult {
  groups: ScaleGroupStatus[]
}

/** Capability: scale groups the autoscale tick sizes to the demand. */
export interface AutoscalingBackend {
  /** Scale groups up or down for this demand; each group's decision carries its reason. */
  autoscale(request: AutoscaleRequest): Promise<AutoscaleResult>
  /** Each group's last decision and why. */
  autoscalerStatus(): Promise<AutoscaleResult>
  /** Whether a group keeps a minimum of workers, so the autoscaler looks after it even with no work. */
  keepsMinimum(): boolean
}

export function autoscales(backend: object): backend is AutoscalingBackend {
  return has(backend, "autoscale", "autoscalerStatus", "keepsMinimum")
}

/** Capability: what the backend has in total, and what of it is free. */
export interface ReportsCapacity {
  resourceCapacity(): Promise<ResourceCapacity>
}

export function reportsCapacity(backend: object): backend is ReportsCapacity {
  return has(backend, "resourceCapacity")
}

/**
 * Capability: what this invocation's contacts with the substrate came to, so the backend's recorded
 * health is the last contact's result (undefined: no contact was made).
 */
export interface ReportsHealth {
  health(): { healthy: boolean; message?: string } | undefined
}

export function reportsHealth(backend: object): backend is ReportsHealth {
  return has(backend, "health")
}

/** Capability: the output tails of many tasks in one round trip (one SSH command on Slurm). */
export interface FetchesManyLogs {
  fetchLogsMany(refs: TaskRef[], tail: number): Promise<LogTail[]>
}

export function fetchesManyLogs(backend: object): backend is FetchesManyLogs {
  return has(backend, "fetchLogsMany")
}
