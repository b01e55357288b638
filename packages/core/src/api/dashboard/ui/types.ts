/**
 * What the dashboard reads from the API. Records come from the model's schemas (types only: nothing of
 * the server reaches the bundle); the few answers that have no model type are spelled out here.
 */
import type { Backend } from "../../../model/backend"
import type { Event } from "../../../model/event"
import type { Attempt, Job, Task } from "../../../model/job"
import type { Caller } from "../../../model/project"
import type { Swarm, SwarmMetrics } from "../../../model/swarm"
import type { ResourceCapacity, ScaleGroupStatus } from "../../../model/wire"
import type { Worker } from "../../../model/worker"

export type { Attempt, Backend, Caller, Event, Job, Swarm, SwarmMetrics, Task, Worker }

/** A list answer: `GET /v1/swarms`, `/v1/jobs`, `/v1/backends`, `/v1/workers`, a job's events. */
export interface Page<T> {
  items: T[]
  nextCursor?: string
}

/** `GET /v1/jobs/{id}`: the job with its first tasks. */
export type JobDetail = Job & { tasks: Task[]; tasksNextCursor?: string }

/** `GET /v1/jobs/{id}/tasks/{index}/logs`. */
export interface LogTail {
  attemptUid: string
  lines: string[]
  truncated: boolean
  updatedAt?: string
}

/** One part of a backend's status answer: what the backend reported, or why that call failed. */
export type Reported<T> = T | { error: string }

/** Whether a part of the status answer is the error of a failed call rather than a report. */
export function unavailable<T>(x: Reported<T>): x is { error: string } {
  return Boolean((x as { error?: unknown }).error)
}

export interface ClusterStatus {
  healthy: boolean
  message?: string
  /** Delegated backends: queues, partitions, node groups. */
  detail?: Record<string, unknown>
}

/** What a backend has in all and free, and each scale group's last decision: the wire types. */
export type Capacity = ResourceCapacity
export type { ScaleGroupStatus }

export interface AutoscalerStatus {
  groups?: ScaleGroupStatus[]
}

/** `GET /v1/backends/{id}/status`: the live parts the dashboard shows. */
export interface BackendStatus {
  status?: Reported<ClusterStatus>
  capacity?: Reported<Capacity>
  autoscaler?: Reported<AutoscalerStatus>
}
