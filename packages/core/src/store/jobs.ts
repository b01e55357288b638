/**
 * Jobs and their tasks. A job and its tasks share a partition: creating a job is one conditional put
 * of the job plus ceil(tasks / 25) batch writes of tasks; reading one is a single (paged) query.
 */
import { countTasks, deriveJobStatus, isFinished } from "../control/job-status"
import { applyOutcome, newTask } from "../control/task-state"
import type { Job, JobSpec, Task } from "../model/job"
import { isTerminalTask } from "../model/states"
import type { Clock } from "../util/clock"
import { iso } from "../util/clock"
import { mapLimit } from "../util/concurrency"
import { NotFoundError } from "../util/errors"
import type { EventLog } from "./events"
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

/** Task writes in flight at once during a cancel. */
const KillConcurrency = 16

export interface JobWithTasks {
  job: StoredItem<Job>
  tasks: StoredItem<Task>[]
}

export function jobItem(job: Job): NewItem<Job> {
  return {
    ...Keys.job(job.project, job.id),
    type: "job",
    data: job,
    list: ListIndex.job(job.project, job.id),
    ...(isFinished(job.status) ? {} : { active: ActiveIndex.job(job.project, job.backendId, job.id) }),
  }
}

export function taskItem(job: Pick<Job, "project" | "id" | "backendId">, task: Task): NewItem<Task> {
  return {
    ...Keys.task(job.project, job.id, task.index),
    type: "task",
    data: task,
    ...(isTerminalTask(task.state)
      ? {}
      : { active: ActiveIndex.task(job.project, job.backendId, job.id, task.index) }),
  }
}

export function Jobs(store: StateStore, clock: Clock, events: EventLog) {
  const pkOf = (project: string, id: string) => Keys.job(project, id).pk
  const record = (job: Job, change: { from?: string; to: string; reason: string; message?: string }) =>
    events.record(job.project, pkOf(job.project, job.id), { entity: { kind: "job", id: job.id }, ...change })

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

  return {
    /**
     * Create a job and its tasks. Idempotent for a given id: when the job item exists already (a retry
     * of a request that crashed half-way), only the missing tasks are written.
     */
    async create(project: string, id: string, spec: JobSpec, backendId: string): Promise<Job> {
      const now = iso(clock.now())
      const job: Job = {
        id,
        project,
        spec,
        backendId,
        status: "PENDING",
        counts: { PENDING: spec.tasks },
        cancelRequested: false,
        createdAt: now,
        updatedAt: now,
      }
      let resumed = false
      try {
        await store.create(jobItem(job))
      } catch (error) {
        if (!(error instanceof ItemExistsError)) throw error
        resumed = true
      }
      const existing = resumed ? await load(project, id) : undefined
      const have = new Set(existing?.tasks.map((t) => t.data.index))
      const missing = Array.from({ length: spec.tasks }, (_, i) => i).filter((i) => !have.has(i))
      await store.createMany(missing.map((i) => taskItem(job, newTask(i, now))))
      if (resumed) return existing?.job.data ?? job
      await record(job, {
        to: "PENDING",
        reason: "created",
        message: `${spec.tasks} task(s) on ${backendId}`,
      })
      return job
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

    async get(project: string, id: string): Promise<Job | undefined> {
      return (await store.get<Job>(Keys.job(project, id)))?.data
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

    /**
     * Recompute a job's counts and status from its tasks and store them (with an event when the status
     * changes). The tasks are read after the job item on every attempt, so the write that wins always
     * carries the newest counts. A finished job keeps its status (only its counts may still move) and
     * leaves the active index.
     */
    async refresh(project: string, id: string, reason: string): Promise<Job | undefined> {
      let from: Job["status"] | undefined
      const updated = await mutate<Job>(store, Keys.job(project, id), async (item) => {
        const job = item.data
        const tasks = await queryAll((cursor) =>
          store.query<Task>(pkOf(project, id), {
            skPrefix: JobPartition.taskPrefix,
            cursor,
            consistent: true,
          }),
        )
        const counts = countTasks(tasks.map((t) => t.data))
        const derived = deriveJobStatus(job.spec, counts, job.spec.tasks, job.cancelRequested)
        const status = isFinished(job.status) ? job.status : derived
        if (status === job.status && JSON.stringify(counts) === JSON.stringify(job.counts)) return undefined
        from = job.status
        const now = iso(clock.now())
        const next: Job = {
          ...job,
          status,
          counts,
          updatedAt: now,
          ...(isFinished(status) && !job.finishedAt ? { finishedAt: now } : {}),
        }
        return { ...jobItem(next), version: item.version }
      })
      if (updated && from && from !== updated.data.status)
        await record(updated.data, { from, to: updated.data.status, reason })
      return updated?.data
    },

    /**
     * Cancel: mark the job, kill the tasks that hold nothing on a backend (PENDING ones) at once, and
     * leave live attempts to the reconcile tick, which stops them on the backend and marks them KILLED.
     * Calling it again finishes a cancel that failed half-way.
     */
    async cancel(project: string, id: string): Promise<Job> {
      let requested = false
      const marked = await mutate<Job>(store, Keys.job(project, id), (item) => {
        if (item.data.cancelRequested || isFinished(item.data.status)) return undefined
        requested = true
        return { ...item, data: { ...item.data, cancelRequested: true, updatedAt: iso(clock.now()) } }
      })
      if (!marked) throw new NotFoundError("job", id)
      if (isFinished(marked.data.status)) return marked.data
      if (requested)
        await record(marked.data, {
          from: marked.data.status,
          to: marked.data.status,
          reason: "cancel_requested",
        })
      const loaded = await load(project, id)
      const now = iso(clock.now())
      const idle = (loaded?.tasks ?? []).filter((t) => t.data.state === "PENDING")
      const killed = await mapLimit(idle, KillConcurrency, async (stored) => {
        const result = applyOutcome(
          stored.data,
          { kind: "killed", reason: "cancelled" },
          marked.data.spec,
          now,
        )
        try {
          await store.update({ ...taskItem(marked.data, result.task), version: stored.version })
          return stored.data.index
        } catch (error) {
          // The task moved meanwhile (e.g. it was just placed): the reconcile tick kills it instead.
          if (error instanceof VersionConflictError) return undefined
          throw error
        }
      })
      await events.recordMany(
        project,
        pkOf(project, id),
        killed
          .filter((index) => index !== undefined)
          .map((index) => ({
            entity: { kind: "task", id: `${id}/${index}` },
            from: "PENDING",
            to: "KILLED",
            reason: "cancelled",
          })),
      )
      return (await this.refresh(project, id, "cancelled")) ?? marked.data
    },

    /** Apply an outcome to one task (used by the control loop); conditional on the task's version. */
    async applyTaskOutcome(
      job: Job,
      task: StoredItem<Task>,
      outcome: Parameters<typeof applyOutcome>[1],
    ): Promise<{ task: StoredItem<Task>; stop: string[]; changed: boolean }> {
      const result = applyOutcome(task.data, outcome, job.spec, iso(clock.now()))
      if (!result.changed) return { task, stop: [], changed: false }
      const saved = await store.update({ ...taskItem(job, result.task), version: task.version })
      await events.record(job.project, pkOf(job.project, job.id), {
        entity: { kind: "task", id: `${job.id}/${task.data.index}` },
        from: task.data.state,
        to: result.task.state,
        reason: "reason" in outcome ? outcome.reason : outcome.kind,
      })
      return { task: saved, stop: result.stop, changed: true }
    },
  }
}
export type Jobs = ReturnType<typeof Jobs>
