/**
 * The old pass's observe (kept for the baseline): a backend's active work, read from the sparse active index (never a scan): its swarms,
 * jobs, and tasks grouped as live (an attempt holds resources) and pending.
 */
import type { TaskRef } from "@swarmplane/core/backends/protocol"
import type { ControlDeps } from "@swarmplane/core/control/deps"
import type { Backend } from "@swarmplane/core/model/backend"
import type { Job } from "@swarmplane/core/model/job"
import { isLive } from "@swarmplane/core/model/states"
import type { Swarm } from "@swarmplane/core/model/swarm"
import type { StoredItem } from "@swarmplane/core/store/port"

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
