/**
 * Observe: a backend's active work, read from the sparse active index (never a scan): its swarms,
 * jobs, and tasks grouped as live (an attempt holds resources) and pending.
 */
import type { TaskRef } from "../backends/protocol"
import type { Backend } from "../model/backend"
import type { Job } from "../model/job"
import { isLive } from "../model/states"
import type { Swarm } from "../model/swarm"
import type { StoredItem } from "../store/port"
import type { ControlDeps } from "./deps"

export interface ActiveWork {
  swarms: StoredItem<Swarm>[]
  jobs: Map<string, Job>
  live: TaskRef[]
  pending: TaskRef[]
  /** Items read, for the tick's report. */
  count: number
}

export async function activeWork(rt: ControlDeps, backend: Backend): Promise<ActiveWork> {
  const { swarms, jobs, tasks, count } = await rt.repos.active.of(backend.project, backend.id)
  const live: TaskRef[] = []
  const pending: TaskRef[] = []
  for (const { jobId, task } of tasks) {
    const job = jobs.get(jobId)
    if (!job) continue
    if (isLive(task.data.state)) live.push({ job, task })
    else if (task.data.state === "PENDING") pending.push({ job, task })
  }
  return { swarms, jobs, live, pending, count }
}
