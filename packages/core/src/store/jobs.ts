/**
 * Jobs and their tasks, stored: a job and its tasks share a partition, so creating a job is one
 * conditional put of the job plus ceil(tasks / 25) batch writes of tasks, and reading one is a single
 * (paged) query. This module reads and writes; what a write should contain is decided in `rules/` and
 * applied by `transitions/`.
 */
import type { Job, Task } from "../model/job"
import { isFinished, isLive, isTerminalTask } from "../model/states"
import type { Clock } from "../util/clock"
import { iso } from "../util/clock"
import { mapLimit } from "../util/concurrency"
import { NotFoundError } from "../util/errors"
import { ActiveIndex, JobPartition, Keys, ListIndex } from "./keys"
import {
  ItemExistsError,
  mutate,
  type NewItem,
  queryAll,
  type StateStore,
  type StoredItem,
  VersionConflictError,
} from "./port"

/** Task writes in flight at once (cancels, placements). */
const WriteConcurrency = 16
/** Task reads by key in flight at once: a page of a thousand is read 16 at a time, not all at once. */
const ReadConcurrency = 16
const LogRetentionDays = 7

export interface LogRecord {
  attemptUid: string
  /** The last lines of output, as the worker sent them. */
  text: string
  updatedAt: string
}

export interface JobWithTasks {
  job: StoredItem<Job>
  tasks: StoredItem<Task>[]
}

export function jobItem(job: Job): NewItem<Job> {
  return {
    ...Keys.job(job.project, job.id),
    type: "job",
    data: job,
    // A swarm's serving job is internal: it is read through its swarm, not listed with the user's jobs.
    ...(job.serving ? {} : { list: ListIndex.job(job.project, job.id) }),
    ...(isFinished(job.status) ? {} : { active: ActiveIndex.job(job.project, job.backendId, job.id) }),
  }
}

/** Whether the task's last attempt holds its worker: live, or still being stopped. */
const holdsWorker = (task: Task) => isLive(task.state) || task.stopping !== undefined

export function taskItem(job: Pick<Job, "project" | "id" | "backendId">, task: Task): NewItem<Task> {
  // A task stays listed (active, and under its worker) while its last attempt is being stopped.
  const workerId = holdsWorker(task) ? task.attempts.at(-1)?.workerId : undefined
  return {
    ...Keys.task(job.project, job.id, task.index),
    type: "task",
    data: task,
    ...(isTerminalTask(task.state) && !task.stopping
      ? {}
      : { active: ActiveIndex.task(job.project, job.backendId, job.id, task.index) }),
    ...(workerId ? { list: ListIndex.workerTask(job.project, workerId, job.id, task.index) } : {}),
  }
}

export function Jobs(store: StateStore, clock: Clock) {
  const pkOf = (project: string, id: string) => Keys.job(project, id).pk

  async function load(project: string, id: string): Promise<JobWithTasks | undefined> {
    const items = await queryAll((cursor) =>
      store.query<Job | Task>(pkOf(project, id), {
        skBetween: ["A#", JobPartition.headAndTasksBefore],
        cursor,
        consistent: true,
      }),
    )
    const head = items.find((i) => i.type === "job") as StoredItem<Job> | undefined
    if (!head) return undefined
    return { job: head, tasks: items.filter((i) => i.type === "task") as StoredItem<Task>[] }
  }

  /**
   * Write changed tasks, each conditional on the version it was read at and, under a lease, with its
   * fencing token. Every write is settled before this answers: returns the tasks as stored (with
   * their new versions), the indexes of the tasks whose write lost its race (the caller re-reads
   * and re-applies those), and the first other failure, if any (those tasks are not written; the
   * caller records what landed, then gives up).
   */
  async function tryWriteTasks(
    job: Pick<Job, "project" | "id" | "backendId">,
    writes: readonly { task: Task; prior: StoredItem<Task> }[],
    fence?: number,
    /** Writes in flight at once (default 16). */
    concurrency = WriteConcurrency,
  ): Promise<{ items: StoredItem<Task>[]; lost: number[]; failed?: { indexes: number[]; error: unknown } }> {
    const settled = await mapLimit(writes, concurrency, ({ task, prior }) =>
      store.update({ ...taskItem(job, task), version: prior.version, fence: fence ?? prior.fence }).then(
        (item) => ({ item }),
        (error: unknown) => ({ error, index: task.index }),
      ),
    )
    const failures = settled.flatMap((s) =>
      "error" in s && !(s.error instanceof VersionConflictError) ? [s] : [],
    )
    return {
      items: settled.flatMap((s) => ("item" in s ? [s.item] : [])),
      lost: settled.flatMap((s) =>
        "error" in s && s.error instanceof VersionConflictError ? [s.index] : [],
      ),
      ...(failures.length
        ? { failed: { indexes: failures.map((f) => f.index), error: failures[0]!.error } }
        : {}),
    }
  }

  return {
    /**
     * Create a job and its tasks. Idempotent for a given id: when the job item exists already (a retry
     * of a request that crashed half-way), only the missing tasks are written and the stored job is
     * returned with `created: false`.
     */
    async create(job: Job, tasks: Task[]): Promise<{ job: Job; created: boolean }> {
      let created = true
      try {
        await store.create(jobItem(job))
      } catch (error) {
        if (!(error instanceof ItemExistsError)) throw error
        created = false
      }
      const existing = created ? undefined : await load(job.project, job.id)
      const have = new Set(existing?.tasks.map((t) => t.data.index))
      await store.createMany(tasks.filter((t) => !have.has(t.index)).map((t) => taskItem(job, t)))
      return { job: existing?.job.data ?? job, created }
    },

    load,

    async mustLoad(project: string, id: string): Promise<JobWithTasks> {
      const found = await load(project, id)
      if (!found) throw new NotFoundError("job", id)
      return found
    },

    /** A page of a job's tasks, by index. */
    async tasks(
      project: string,
      id: string,
      options: { limit: number; cursor?: string },
    ): Promise<{ items: Task[]; cursor?: string }> {
      const page = await store.query<Task>(pkOf(project, id), {
        skPrefix: JobPartition.taskPrefix,
        ...options,
      })
      return { items: page.items.map((i) => i.data), cursor: page.cursor }
    },

    /** One task as stored (eventually consistent). */
    async task(project: string, id: string, index: number): Promise<StoredItem<Task> | undefined> {
      return store.get<Task>(Keys.task(project, id, index))
    },

    async get(project: string, id: string): Promise<Job | undefined> {
      return (await store.get<Job>(Keys.job(project, id)))?.data
    },

    /** The job item with its version, read consistently (for a conditional write after). */
    async head(project: string, id: string): Promise<StoredItem<Job> | undefined> {
      return store.get<Job>(Keys.job(project, id), { consistent: true })
    },

    /** Jobs by id (missing ones are left out), in batches. */
    async getMany(project: string, ids: readonly string[]): Promise<Job[]> {
      if (!ids.length) return []
      return (await store.getMany<Job>(ids.map((id) => Keys.job(project, id)))).map((i) => i.data)
    },

    /**
     * Tasks with their versions, read consistently: the ones at `indexes` (one get each), or all of
     * the job's (one paged query).
     */
    async readTasks(project: string, id: string, indexes?: readonly number[]): Promise<StoredItem<Task>[]> {
      if (!indexes)
        return queryAll((cursor) =>
          store.query<Task>(pkOf(project, id), {
            skPrefix: JobPartition.taskPrefix,
            cursor,
            consistent: true,
          }),
        )
      const read = await mapLimit([...new Set(indexes)], ReadConcurrency, (index) =>
        store.get<Task>(Keys.task(project, id, index), { consistent: true }),
      )
      return read.filter((t): t is StoredItem<Task> => t !== undefined)
    },

    tryWriteTasks,

    /**
     * Write changed tasks as `tryWriteTasks` does, all of them or a failure: a lost race throws
     * `VersionConflictError` once every write has settled (the caller re-reads and re-applies).
     * Returns the tasks as stored (with their new versions).
     */
    async writeTasks(
      job: Pick<Job, "project" | "id" | "backendId">,
      writes: readonly { task: Task; prior: StoredItem<Task> }[],
      fence?: number,
      /** Writes in flight at once (default 16). */
      concurrency = WriteConcurrency,
    ): Promise<StoredItem<Task>[]> {
      const { items, lost, failed } = await tryWriteTasks(job, writes, fence, concurrency)
      if (failed) throw failed.error
      if (lost.length) throw new VersionConflictError(Keys.task(job.project, job.id, lost[0]!))
      return items
    },

    /**
     * Rewrite the job item with what `change` returns for the stored one (undefined: leave it), retried
     * on a lost race with a fresh read; under a lease, with its fencing token. `known`: the item as the
     * caller last saw it, tried first without a read. Returns the item written (or the stored one when
     * nothing changed; undefined when the job does not exist).
     */
    async update(
      project: string,
      id: string,
      change: (item: StoredItem<Job>) => Job | undefined | Promise<Job | undefined>,
      fence?: number,
      known?: StoredItem<Job>,
    ): Promise<StoredItem<Job> | undefined> {
      const write = async (item: StoredItem<Job>) => {
        const next = await change(item)
        return next ? { ...jobItem(next), version: item.version, fence: fence ?? item.fence } : undefined
      }
      if (known) {
        const next = await write(known)
        if (!next) return known
        try {
          return await store.update(next)
        } catch (error) {
          if (!(error instanceof VersionConflictError)) throw error
        }
      }
      return mutate<Job>(store, Keys.job(project, id), write)
    },

    /**
     * The tasks a worker holds: live, or with their last attempt still being stopped (`stopping`), on that worker, each read
     * consistently (the index that finds them is eventually consistent), with their job ids.
     */
    async heldBy(project: string, workerId: string): Promise<{ jobId: string; task: StoredItem<Task> }[]> {
      const listed = await queryAll((cursor) =>
        store.queryIndex<Task>("list", ListIndex.workerTasksOf(project, workerId), { cursor }),
      )
      const read = await mapLimit(listed, 16, (item) =>
        store.get<Task>({ pk: item.pk, sk: item.sk }, { consistent: true }),
      )
      return read
        .filter(
          (t): t is StoredItem<Task> =>
            t !== undefined && holdsWorker(t.data) && t.data.attempts.at(-1)?.workerId === workerId,
        )
        .map((task) => ({ jobId: task.pk.slice(task.pk.lastIndexOf("#JOB#") + 5), task }))
    },

    /** A page of jobs, newest first, optionally only one status and/or one swarm. */
    async list(
      project: string,
      options: { limit: number; cursor?: string; status?: string; swarm?: string },
    ): Promise<{ items: Job[]; cursor?: string }> {
      const filter: Record<string, string> = {}
      if (options.status) filter.status = options.status
      if (options.swarm) filter["spec.swarm"] = options.swarm
      const items: Job[] = []
      let cursor = options.cursor
      // Limit applies before the filter (as in DynamoDB): ask for at most what is still missing, so a
      // page never overshoots and the cursor stays exact. Bounded, so a rare filter cannot loop long.
      for (let calls = 0; calls < 20; calls++) {
        const page = await store.queryIndex<Job>("list", ListIndex.jobsOf(project), {
          limit: options.limit - items.length,
          cursor,
          reverse: true,
          ...(Object.keys(filter).length ? { filter } : {}),
        })
        items.push(...page.items.map((i) => i.data))
        cursor = page.cursor
        if (!cursor || items.length >= options.limit) break
      }
      return { items, cursor }
    },

    /** The output tail of an attempt, as its worker last sent it. */
    async logTail(
      project: string,
      jobId: string,
      index: number,
      attemptUid: string,
    ): Promise<LogRecord | undefined> {
      return (await store.get<LogRecord>(Keys.log(project, jobId, index, attemptUid)))?.data
    },

    /**
     * Keep an attempt's output tail (written by heartbeats, kept for `LogRetentionDays`). Only its
     * worker writes it, so a blind overwrite is right: one write, no read.
     */
    async saveLogTail(
      project: string,
      jobId: string,
      index: number,
      attemptUid: string,
      text: string,
    ): Promise<void> {
      const now = clock.now()
      const data: LogRecord = { attemptUid, text, updatedAt: iso(now) }
      await store.createMany([
        {
          ...Keys.log(project, jobId, index, attemptUid),
          type: "log",
          data,
          ttl: Math.floor(now / 1000) + LogRetentionDays * 86_400,
        },
      ])
    },
  }
}
export type Jobs = ReturnType<typeof Jobs>
