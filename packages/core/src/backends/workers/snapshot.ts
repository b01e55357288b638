/**
 * Turns store objects into the scheduler's snapshot: workers with what runs on them, jobs with their
 * requirements, pending tasks. A swarm's serving job is two scheduler jobs: its replicas (the swarm's
 * resources) and its router (a small process anywhere).
 */

import type { Constraint as ModelConstraint, Resources } from "../../model/common"
import type { Job, Task } from "../../model/job"
import type { Priority } from "../../model/states"
import type { Worker } from "../../model/worker"
import type {
  Band,
  Constraint,
  Res,
  SchedJob,
  SchedTask,
  SchedWorker,
  Snapshot,
} from "../../scheduling/types"
import type { TaskRef } from "../protocol"
import { routerHost } from "./serving"

const MiB = 1024 * 1024
const bands: Record<Priority, Band> = { production: 0, interactive: 1, batch: 2 }

/**
 * The attribute a worker's address is matched under, for a router to be placed again on the host it
 * listened on (so its URL, host and port, stays the same).
 */
export const AddressAttribute = "swarmplane.address"

/** The host of a worker's address (`host`, `host:port`, `[v6]:port`, a bare IPv6 address). */
export function hostOf(address: string): string {
  const url = `http://${address}`
  const host = URL.canParse(url) ? new URL(url).hostname : address
  return host.replace(/^\[|\]$/g, "")
}

/** What one router needs. */
export const RouterResources: Resources = { cpu: 0.1, memoryMiB: 128, gpu: 0 }

export function res(r: Resources): Res {
  return { cpuMillis: Math.round(r.cpu * 1000), memoryBytes: r.memoryMiB * MiB, gpu: r.gpu, tpu: 0 }
}

/** The scheduler job a task belongs to (`<jobId>` or, for a serving job's router, `<jobId>#router`). */
export function schedJobId(job: Job, index: number): string {
  return job.serving && index === job.serving.replicas ? `${job.id}#router` : job.id
}

export function taskKey(jobId: string, index: number): string {
  return `${jobId}/${index}`
}

function constraint(c: ModelConstraint): Constraint {
  return { key: c.key, op: c.op, values: c.values ?? (c.value !== undefined ? [c.value] : []) }
}

function schedJob(job: Job, router: Task | undefined): SchedJob {
  const spec = job.spec
  if (router) {
    const host = routerHost(job, router)
    return {
      id: `${job.id}#router`,
      band: bands[spec.priority],
      resources: res(RouterResources),
      constraints: [],
      preferences: host
        ? [{ constraint: { key: AddressAttribute, op: "eq", values: [host] }, weight: 1 }]
        : [],
    }
  }
  return {
    id: job.id,
    band: bands[spec.priority],
    resources: res(spec.resources),
    ...(spec.resources.gpuType ? { deviceVariant: spec.resources.gpuType } : {}),
    constraints: spec.constraints.map(constraint),
    preferences: spec.preferences.map((p) => ({ constraint: constraint(p.constraint), weight: p.weight })),
    ...(spec.coscheduling
      ? { gang: spec.coscheduling.groupBy ? { groupBy: spec.coscheduling.groupBy } : {} }
      : {}),
  }
}

/** The resources a task of `job` holds (replicas and ordinary tasks: the spec's; routers: a router's). */
export function taskResources(job: Job, index: number): Resources {
  return job.serving && index === job.serving.replicas ? RouterResources : job.spec.resources
}

export function workerAttributes(worker: Worker): Record<string, string> {
  return {
    ...worker.attributes,
    ...(worker.resources.gpuType ? { accelerator: worker.resources.gpuType } : {}),
  }
}

export function buildSnapshot(workers: Worker[], live: TaskRef[], pending: TaskRef[]): Snapshot {
  const running = new Map<string, SchedWorker["running"]>()
  for (const { job, task } of live) {
    const attempt = task.data.attempts.at(-1)
    if (!attempt?.workerId) continue
    const list = running.get(attempt.workerId) ?? []
    list.push({
      taskId: taskKey(job.id, task.data.index),
      band: bands[job.spec.priority],
      resources: res(taskResources(job, task.data.index)),
      building: task.data.state !== "RUNNING",
    })
    running.set(attempt.workerId, list)
  }
  const jobs = new Map<string, SchedJob>()
  const tasks: SchedTask[] = []
  for (const { job, task } of pending) {
    const id = schedJobId(job, task.data.index)
    if (!jobs.has(id)) jobs.set(id, schedJob(job, id !== job.id ? task.data : undefined))
    tasks.push({ id: taskKey(job.id, task.data.index), jobId: id })
  }
  return {
    workers: workers.map((w) => ({
      id: w.id,
      capacity: res(w.resources),
      attributes: {
        ...workerAttributes(w),
        ...(w.address ? { [AddressAttribute]: hostOf(w.address) } : {}),
      },
      running: running.get(w.id) ?? [],
    })),
    jobs,
    tasks,
  }
}

/** Tasks in submission order: older jobs first, then by index. */
export function bySubmission(a: TaskRef, b: TaskRef): number {
  return (
    a.job.createdAt.localeCompare(b.job.createdAt) ||
    a.job.id.localeCompare(b.job.id) ||
    a.task.data.index - b.task.data.index
  )
}

export type { Task }
