/**
 * Observe: a backend's active work, read from the sparse active index (never a scan): its swarms,
 * jobs, and tasks grouped as live (an attempt holds resources) and pending.
 */
import type { TaskRef } from "../backends/protocol"
import type { Backend } from "../model/backend"
import type { Job, Task } from "../model/job"
import type { Swarm } from "../model/swarm"
import type { Runtime } from "../runtime"
import { ActiveIndex, Keys } from "../store/keys"
import { queryAll, type StoredItem } from "../store/port"
import { isLive } from "./task-state"

export interface ActiveWork {
  swarms: StoredItem<Swarm>[]
  jobs: Map<string, Job>
  live: TaskRef[]
  pending: TaskRef[]
  /** Items read, for the tick's report. */
  count: number
}

const jobIdOf = (item: { pk: string }) => item.pk.slice(item.pk.lastIndexOf("#JOB#") + 5)

export async function activeWork(rt: Runtime, backend: Backend): Promise<ActiveWork> {
  const store = rt.repos.store
  const pages = await Promise.all(
    ActiveIndex.partitions(backend.project, backend.id).map((pk) =>
      queryAll((cursor) => store.queryIndex<unknown>("active", pk, { cursor })),
    ),
  )
  const items = pages.flat()
  const swarms = items.filter((i) => i.type === "swarm") as StoredItem<Swarm>[]
  const tasks = items.filter((i) => i.type === "task") as StoredItem<Task>[]
  const jobs = new Map<string, Job>()
  for (const i of items) if (i.type === "job") jobs.set((i.data as Job).id, i.data as Job)
  // Tasks whose job item is not in the index (rare: a finished job with a straggler) are read by key.
  const missing = [...new Set(tasks.map(jobIdOf))].filter((id) => !jobs.has(id))
  if (missing.length)
    for (const j of await store.getMany<Job>(missing.map((id) => Keys.job(backend.project, id))))
      jobs.set(j.data.id, j.data)
  const live: TaskRef[] = []
  const pending: TaskRef[] = []
  for (const task of tasks) {
    const job = jobs.get(jobIdOf(task))
    if (!job) continue
    if (isLive(task.data.state)) live.push({ job, task })
    else if (task.data.state === "PENDING") pending.push({ job, task })
  }
  return { swarms, jobs, live, pending, count: items.length }
}
