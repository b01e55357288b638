/**
 * The sparse active index, read per backend: what a reconcile pass observes (never a scan). Items are
 * returned as stored; how they group into live and pending work is the control loop's business.
 */
import type { Job, Task } from "../model/job"
import type { Swarm } from "../model/swarm"
import { ActiveIndex, Keys } from "./keys"
import { queryAll, type StateStore, type StoredItem } from "./port"

export interface ActiveItems {
  swarms: StoredItem<Swarm>[]
  /** The backend's unfinished jobs by id (and the jobs of any indexed task, read by key). */
  jobs: Map<string, Job>
  /** The indexed job items, with their versions (as the index last saw them). */
  heads: Map<string, StoredItem<Job>>
  tasks: { jobId: string; task: StoredItem<Task> }[]
  /** Items read from the index. */
  count: number
}

const jobIdOf = (item: { pk: string }) => item.pk.slice(item.pk.lastIndexOf("#JOB#") + 5)

export function Active(store: StateStore) {
  return {
    /** Everything in a backend's active index: its active swarms, unfinished jobs and unfinished tasks. */
    async of(project: string, backendId: string): Promise<ActiveItems> {
      const pages = await Promise.all(
        ActiveIndex.partitions(project, backendId).map((pk) =>
          queryAll((cursor) => store.queryIndex<unknown>("active", pk, { cursor })),
        ),
      )
      const items = pages.flat()
      const swarms = items.filter((i) => i.type === "swarm") as StoredItem<Swarm>[]
      const tasks = (items.filter((i) => i.type === "task") as StoredItem<Task>[]).map((task) => ({
        jobId: jobIdOf(task),
        task,
      }))
      const jobs = new Map<string, Job>()
      const heads = new Map<string, StoredItem<Job>>()
      for (const i of items)
        if (i.type === "job") {
          jobs.set((i.data as Job).id, i.data as Job)
          heads.set((i.data as Job).id, i as StoredItem<Job>)
        }
      // Tasks whose job item is not in the index (rare: a finished job with a straggler) are read by key.
      const missing = [...new Set(tasks.map((t) => t.jobId))].filter((id) => !jobs.has(id))
      if (missing.length)
        for (const j of await store.getMany<Job>(missing.map((id) => Keys.job(project, id))))
          jobs.set(j.data.id, j.data)
      return { swarms, jobs, heads, tasks, count: items.length }
    },

    /** Whether a backend's active index holds anything (a few one-item queries). */
    async any(project: string, backendId: string): Promise<boolean> {
      for (const pk of ActiveIndex.partitions(project, backendId))
        if ((await store.queryIndex("active", pk, { limit: 1 })).items.length) return true
      return false
    },
  }
}
export type Active = ReturnType<typeof Active>
