/**
 * Jobs and their tasks. A job and its tasks share a partition: creating a job is one conditional put
 * of the job plus ceil(tasks / 25) batch writes of tasks; reading one is a single (paged) query.
 */
import { countTasks, deriveJobStatus, isFinished, planKills } from "../control/job-status"
import {
  applyGangOutcome,
  applyOutcome,
  isLive,
  newTask,
  noteServing,
  repairGang,
} from "../control/task-state"
import type { Job, JobSpec, Task } from "../model/job"
import type { Outcome } from "../model/outcome"
import { FailedTaskStates, isTerminalTask, type TaskState } from "../model/states"
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

/** Task writes in flight at once (cancels, placements). */
const WriteConcurrency = 16
const LogRetentionDays = 7

/** An outcome for one task, or a note of where a live replica listens. */
export type TaskReport =
  | { index: number; outcome: Outcome }
  | {
      index: number
      serving: {
        attemptUid: string
        endpoint?: string
        ready?: boolean
        target?: string
        progress?: Task["attempts"][number]["progress"]
        /** Why the submitted attempt still waits in the substrate's queue. */
        pendingReason?: string
        /** A try to submit it that did not reach the substrate, and when the next is due. */
        submitFailure?: { message: string; retryAt: string }
      }
    }

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

/** A task as users see it: a PENDING task without its own reason shows its job's. */
export function withPendingReason(job: Pick<Job, "pendingReason">, task: Task): Task {
  return task.state === "PENDING" && !task.pendingReason && job.pendingReason
    ? { ...task, pendingReason: job.pendingReason }
    : task
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

export function taskItem(job: Pick<Job, "project" | "id" | "backendId">, task: Task): NewItem<Task> {
  const workerId = isLive(task.state) ? task.attempts.at(-1)?.workerId : undefined
  return {
    ...Keys.task(job.project, job.id, task.index),
    type: "task",
    data: task,
    ...(isTerminalTask(task.state)
      ? {}
      : { active: ActiveIndex.task(job.project, job.backendId, job.id, task.index) }),
    ...(workerId ? { list: ListIndex.workerTask(job.project, workerId, job.id, task.index) } : {}),
  }
}

/** Jobs of at most this many tasks are recounted whenever one of their tasks ends. */
const RecountTasks = 100

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
    async create(
      project: string,
      id: string,
      spec: JobSpec,
      backendId: string,
      extra: Pick<Job, "serving"> = {},
    ): Promise<Job> {
      const now = iso(clock.now())
      const job: Job = {
        id,
        project,
        spec,
        backendId,
        status: "PENDING",
        counts: { PENDING: spec.tasks },
        cancelRequested: false,
        ...extra,
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
    async refresh(project: string, id: string, reason: string, fence?: number): Promise<Job | undefined> {
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
        return { ...jobItem(next), version: item.version, fence: fence ?? item.fence }
      })
      if (updated && from && from !== updated.data.status)
        await record(updated.data, { from, to: updated.data.status, reason })
      return updated?.data
    },

    /**
     * Bring a job to rest with its tasks (the control loop, each pass, under its lease): kill every
     * unfinished task when cancel was asked for or more tasks failed than the job tolerates, then
     * recompute the job's counts and status. Returns the attempts to stop on the substrate.
     */
    async settle(project: string, id: string, fence?: number): Promise<{ job?: Job; stop: string[] }> {
      const head = await store.get<Job>(Keys.job(project, id), { consistent: true })
      if (!head) return { stop: [] }
      const job = head.data
      const counts = job.counts
      const unfinished = Object.entries(counts).some(([state, n]) => n && !isTerminalTask(state as TaskState))
      const failedOut =
        FailedTaskStates.reduce((n, st) => n + (counts[st] ?? 0), 0) > job.spec.maxTaskFailures
      // Reading every task is only needed to kill (cancel, failures past tolerance) or to check a gang.
      let stop: string[] = []
      if (unfinished && (job.cancelRequested || failedOut || job.spec.coscheduling)) {
        const loaded = await load(project, id)
        const tasks = loaded?.tasks ?? []
        const now = iso(clock.now())
        const kills = planKills(
          job.spec,
          tasks.map((t) => t.data),
          job.cancelRequested,
          now,
        )
        const reason = job.cancelRequested ? "cancelled" : "job_failed"
        const killed = await this.applyReports(
          job,
          kills.changed.map((t) => ({ index: t.index, outcome: { kind: "killed" as const, reason } })),
          fence === undefined ? {} : { fence },
        )
        stop = killed.stop
        if (job.spec.coscheduling && !kills.changed.length) {
          const repair = repairGang(
            tasks.map((t) => t.data),
            job.spec,
            now,
          )
          const before = new Map(tasks.map((t) => [t.data.index, t]))
          await mapLimit(repair.changed, WriteConcurrency, async (task) => {
            const prior = before.get(task.index)!
            await store.update({
              ...taskItem(job, task),
              version: prior.version,
              fence: fence ?? prior.fence,
            })
          })
          await events.recordMany(
            project,
            pkOf(project, id),
            repair.changed.map((t) => ({
              entity: { kind: "task", id: `${id}/${t.index}` },
              from: before.get(t.index)!.data.state,
              to: t.state,
              reason: "gang_repair",
            })),
          )
          stop.push(...repair.stop)
        }
      }
      const refreshed = await this.refresh(
        project,
        id,
        job.cancelRequested ? "cancelled" : "tasks_changed",
        fence,
      )
      return { job: refreshed ?? job, stop }
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
      const killed = await mapLimit(idle, WriteConcurrency, async (stored) => {
        const result = applyOutcome(
          stored.data,
          { kind: "killed", reason: "cancelled" },
          marked.data.spec,
          now,
        )
        try {
          await store.update({
            ...taskItem(marked.data, result.task),
            version: stored.version,
            fence: stored.fence,
          })
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

    /**
     * Apply reports about a job's tasks: outcomes (state changes, with the gang rules when the job is
     * coscheduled) and serving notes (where a replica listens, whether it is ready). Each task write is
     * conditional on its version and, under a lease, carries the fencing token; a lost race re-reads and
     * re-applies (outcomes about attempts that moved on are stale and change nothing). Records an event
     * per task state change. Returns the attempts to stop on the substrate.
     */
    async applyReports(
      job: Job,
      reports: TaskReport[],
      options: { fence?: number } = {},
    ): Promise<{ stop: string[]; changed: number; tasks: Task[] }> {
      if (!reports.length) return { stop: [], changed: 0, tasks: [] }
      const pk = pkOf(job.project, job.id)
      for (let attempt = 0; ; attempt++) {
        const now = iso(clock.now())
        const stored = job.spec.coscheduling
          ? await queryAll((cursor) =>
              store.query<Task>(pk, { skPrefix: JobPartition.taskPrefix, cursor, consistent: true }),
            )
          : (
              await Promise.all(
                [...new Set(reports.map((r) => r.index))].map((index) =>
                  store.get<Task>(Keys.task(job.project, job.id, index), { consistent: true }),
                ),
              )
            ).filter((t): t is StoredItem<Task> => t !== undefined)
        const before = new Map(stored.map((t) => [t.data.index, t]))
        let tasks = stored.map((t) => t.data)
        const stop: string[] = []
        for (const report of reports) {
          if ("serving" in report) {
            tasks = tasks.map((t) =>
              t.index === report.index ? noteServing(t, report.serving, now).task : t,
            )
            continue
          }
          if (job.spec.coscheduling) {
            const result = applyGangOutcome(tasks, report.index, report.outcome, job.spec, now)
            tasks = result.tasks
            stop.push(...result.stop)
          } else {
            tasks = tasks.map((t) => {
              if (t.index !== report.index) return t
              const result = applyOutcome(t, report.outcome, job.spec, now)
              stop.push(...result.stop)
              return result.task
            })
          }
        }
        const changed = tasks.filter((t) => t !== before.get(t.index)?.data)
        try {
          await mapLimit(changed, WriteConcurrency, async (task) => {
            const prior = before.get(task.index)!
            await store.update({
              ...taskItem(job, task),
              version: prior.version,
              fence: options.fence ?? prior.fence,
            })
          })
        } catch (error) {
          if (error instanceof VersionConflictError && attempt < 10) continue
          throw error
        }
        const moved = changed.filter((t) => t.state !== before.get(t.index)?.data.state)
        await events.recordMany(
          job.project,
          pk,
          moved.map((t) => {
            const last = t.attempts.at(-1)
            const report = reports.find((r) => r.index === t.index && "outcome" in r)
            const reason =
              report && "outcome" in report
                ? "reason" in report.outcome
                  ? report.outcome.reason
                  : report.outcome.kind
                : "gang"
            return {
              entity: { kind: "task", id: `${job.id}/${t.index}` },
              from: before.get(t.index)!.data.state,
              to: t.state,
              reason,
              ...(report && "outcome" in report && "message" in report.outcome && report.outcome.message
                ? { message: report.outcome.message }
                : last?.exitCode !== undefined && t.state !== "RUNNING"
                  ? { message: `exit code ${last.exitCode}` }
                  : {}),
            }
          }),
        )
        // The report that ends a job's last open task brings the job to its end at once (not a pass
        // later): job lists and details read SUCCEEDED as soon as the tasks have. The job's counts are
        // only a hint of whether this is that report; the full count is taken when it may be.
        const ended = moved.filter(
          (t) => isTerminalTask(t.state) && !isTerminalTask(before.get(t.index)!.data.state),
        ).length
        const open = Object.entries(job.counts).reduce(
          (n, [state, count]) => n + (isTerminalTask(state as TaskState) ? 0 : (count ?? 0)),
          0,
        )
        if (ended > 0 && (job.spec.tasks <= RecountTasks || open - ended <= 0) && !isFinished(job.status))
          await this.refresh(job.project, job.id, "tasks_ended", options.fence)
        return { stop, changed: changed.length, tasks }
      }
    },

    /**
     * The tasks a worker holds: live, with their current attempt on that worker, each read
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
            t !== undefined &&
            !isTerminalTask(t.data.state) &&
            t.data.state !== "PENDING" &&
            t.data.attempts.at(-1)?.workerId === workerId,
        )
        .map((task) => ({ jobId: task.pk.slice(task.pk.lastIndexOf("#JOB#") + 5), task }))
    },

    /** Store why the job's pending tasks wait (one reason per job: its tasks are alike). */
    async setPendingReason(project: string, id: string, reason: string, fence?: number): Promise<void> {
      await mutate<Job>(store, Keys.job(project, id), (item) =>
        item.data.pendingReason === reason
          ? undefined
          : {
              ...jobItem({ ...item.data, pendingReason: reason }),
              version: item.version,
              fence: fence ?? item.fence,
            },
      )
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
