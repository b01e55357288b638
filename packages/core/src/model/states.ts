import { z } from "./zod"

/**
 * The state vocabularies of swarms, jobs, tasks and attempts (DESIGN.md §2), as `as const` tuples with
 * derived union types. The transition rules live in `control/` (state machines); this file only names.
 */

/** Swarm phases (domyn-swarm's ServingPhase). */
export const SwarmPhases = ["PENDING", "INITIALIZING", "RUNNING", "FAILED", "STOPPED", "UNKNOWN"] as const
export const SwarmPhase = z.enum(SwarmPhases)
export type SwarmPhase = z.infer<typeof SwarmPhase>

/** What the user wants of a swarm. `deleted` drives it to STOPPED and tears the deployment down. */
export const SwarmDesiredStates = ["running", "deleted"] as const
export const SwarmDesired = z.enum(SwarmDesiredStates)
export type SwarmDesired = z.infer<typeof SwarmDesired>

/** Task states (Iris). */
export const TaskStates = [
  "PENDING",
  "ASSIGNED",
  "BUILDING",
  "RUNNING",
  "SUCCEEDED",
  "FAILED",
  "KILLED",
  "WORKER_FAILED",
  "PREEMPTED",
  "UNSCHEDULABLE",
  "COSCHED_FAILED",
] as const
export const TaskState = z.enum(TaskStates)
export type TaskState = z.infer<typeof TaskState>

export const TerminalTaskStates = [
  "SUCCEEDED",
  "FAILED",
  "KILLED",
  "WORKER_FAILED",
  "PREEMPTED",
  "UNSCHEDULABLE",
  "COSCHED_FAILED",
] as const satisfies readonly TaskState[]

/** Terminal states that count as a task failure toward `maxTaskFailures`. */
export const FailedTaskStates = [
  "FAILED",
  "WORKER_FAILED",
  "PREEMPTED",
  "UNSCHEDULABLE",
  "COSCHED_FAILED",
] as const satisfies readonly TaskState[]

/** States in which an attempt exists on a backend (something may be running). */
export const LiveTaskStates = ["ASSIGNED", "BUILDING", "RUNNING"] as const satisfies readonly TaskState[]

/** A task whose attempt holds (or may hold) resources on a backend. */
export function isLive(state: TaskState): boolean {
  return (LiveTaskStates as readonly TaskState[]).includes(state)
}

export function isTerminalTask(state: TaskState): boolean {
  return (TerminalTaskStates as readonly TaskState[]).includes(state)
}

/** Attempt states: an attempt is one try of a task; it never returns to PENDING. */
export const AttemptStates = [
  "ASSIGNED",
  "BUILDING",
  "RUNNING",
  "SUCCEEDED",
  "FAILED",
  "KILLED",
  "WORKER_FAILED",
  "PREEMPTED",
] as const
export const AttemptState = z.enum(AttemptStates)
export type AttemptState = z.infer<typeof AttemptState>

export const TerminalAttemptStates = [
  "SUCCEEDED",
  "FAILED",
  "KILLED",
  "WORKER_FAILED",
  "PREEMPTED",
] as const satisfies readonly AttemptState[]

/** Job status, derived from its tasks (domyn-swarm's JobStatus). */
export const JobStatuses = ["PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"] as const
export const JobStatus = z.enum(JobStatuses)
export type JobStatus = z.infer<typeof JobStatus>

export const TerminalJobStatuses = [
  "SUCCEEDED",
  "FAILED",
  "CANCELLED",
] as const satisfies readonly JobStatus[]

/** A job that has come to its end (it leaves the active index; its status no longer moves). */
export function isFinished(status: JobStatus): boolean {
  return (TerminalJobStatuses as readonly JobStatus[]).includes(status)
}

/** Priority bands, highest first. Preemption only takes from strictly lower bands. */
export const Priorities = ["production", "interactive", "batch"] as const
export const Priority = z.enum(Priorities)
export type Priority = z.infer<typeof Priority>

/** Worker health as tracked from heartbeats. */
export const WorkerHealths = ["healthy", "suspect", "dead"] as const
export const WorkerHealth = z.enum(WorkerHealths)
export type WorkerHealth = z.infer<typeof WorkerHealth>

/**
 * API key roles. `read` ⊂ `write` ⊂ `admin` is one ladder; `worker` stands apart: it may only register
 * worker agents and report for them, and no user role includes it except `admin` (so an operator can
 * register a worker by hand).
 */
export const Roles = ["read", "write", "admin", "worker"] as const
export const Role = z.enum(Roles)
export type Role = z.infer<typeof Role>

/** What each role may do, as the roles it includes (itself among them). */
export const RoleGrants: Record<Role, readonly Role[]> = {
  read: ["read"],
  write: ["read", "write"],
  admin: ["read", "write", "admin", "worker"],
  worker: ["worker"],
}

/** Backend kinds (Iris BackendKind): who places the work. */
export const BackendKinds = ["worker-daemon", "delegated"] as const
export const BackendKind = z.enum(BackendKinds)
export type BackendKind = z.infer<typeof BackendKind>

/** Backend config types. */
export const BackendTypes = ["slurm", "lepton", "eks", "workers"] as const
export const BackendType = z.enum(BackendTypes)
export type BackendType = z.infer<typeof BackendType>
