/**
 * Job and task transitions applied to stored items: read what a decision needs, let `rules/` decide,
 * write the result with conditional (and, under a lease, fenced) writes, and record an event per
 * change. The API, the control loop and the workers backend (whose substrate is the store) all change
 * jobs through here, so a change is decided and recorded the same way wherever it starts.
 */
import type { Job, JobSpec, Task, TaskCounts } from "../model/job"
import type { TaskReport } from "../model/outcome"
import { FailedTaskStates, isFinished, isLive, isTerminalTask, type TaskState } from "../model/states"
import { countsWithOpen, countTasks, deriveJobStatus, planKills, sameCounts } from "../rules/job-status"
import { applyGangOutcome, applyOutcome, newTask, noteServing, repairGang } from "../rules/task-state"
import type { EventLog, NewEvent } from "../store/events"
import type { Jobs } from "../store/jobs"
import { Keys } from "../store/keys"
import { type StoredItem, VersionConflictError } from "../store/port"
import { type Clock, iso } from "../util/clock"
import { mapLimit } from "../util/concurrency"
import { NotFoundError } from "../util/errors"

/** Jobs of at most this many tasks are recounted whenever one of their tasks ends. */
const RecountTasks = 100
/**
 * Jobs of at most this many tasks are brought to rest by the cancel request itself (their pending
 * tasks killed at once); a larger one is only marked, and the reconcile pass kills its tasks a page at
 * a time, so a cancel request costs a few store calls whatever the job's size.
 */
export const InlineCancelTasks = 100
/** Task writes in flight at once (a cancel's kills). */
const WriteConcurrency = 16
/**
 * Task writes in flight at once when a reconcile pass kills a page of a job's tasks: few, so the
 * requests of the API and of heartbeats, which share the store, do not queue behind a thousand kills.
 */
const KillConcurrency = 4

export interface JobTransitionDeps {
  jobs: Jobs
  events: EventLog
  clock: Clock
}

/** Stored tasks whose state moved, as events, each with the outcome's reason and message. */
function taskEvents(
  jobId: string,
  moved: readonly Task[],
  before: ReadonlyMap<number, StoredItem<Task>>,
  reports: readonly TaskReport[] = [],
  fallback = "gang",
) {
  return moved.map((t) => {
    const last = t.attempts.at(-1)
    const report = reports.find((r) => r.index === t.index && "outcome" in r)
    const outcome = report && "outcome" in report ? report.outcome : undefined
    const reason = outcome ? ("reason" in outcome ? outcome.reason : outcome.kind) : fallback
    return {
      entity: { kind: "task" as const, id: `${jobId}/${t.index}` },
      from: before.get(t.index)!.data.state,
      to: t.state,
      reason,
      ...(outcome && "message" in outcome && outcome.message
        ? { message: outcome.message }
        : last?.exitCode !== undefined && t.state !== "RUNNING"
          ? { message: `exit code ${last.exitCode}` }
          : {}),
    }
  })
}

/** Stored counts with tasks ended just now added. */
function addCounts(counts: TaskCounts, ended: TaskCounts | undefined): TaskCounts {
  if (!ended) return counts
  const sum: TaskCounts = { ...counts }
  for (const [state, n] of Object.entries(ended) as [TaskState, number][]) sum[state] = (sum[state] ?? 0) + n
  return sum
}

export function JobTransitions({ jobs, events, clock }: JobTransitionDeps) {
  const api = {
    /**
     * Create a job and its tasks, PENDING. Idempotent for a given id: a retry of a request that crashed
     * half-way writes only the missing tasks and returns the job as stored.
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
      const tasks = Array.from({ length: spec.tasks }, (_, i) => newTask(i, now))
      const stored = await jobs.create(job, tasks)
      // Also on a retry that found the job: the try that created it may have failed before its event.
      await events.job(
        project,
        id,
        { to: "PENDING", reason: "created", message: `${spec.tasks} task(s) on ${stored.job.backendId}` },
        { key: "created", at: stored.job.createdAt },
      )
      return stored.job
    },

    /**
     * Recompute a job's counts and status from its tasks and store them (with an event when the status
     * changes). The tasks are read after the job item on every try, so the write that wins always
     * carries the newest counts. A finished job keeps its status (only its counts may still move) and
     * leaves the active index.
     */
    async refresh(
      project: string,
      id: string,
      reason: string,
      fence?: number,
      /** The job item as the caller last saw it: tried first, without a read (a stale one costs a retry). */
      known?: StoredItem<Job>,
      /**
       * The job's open tasks by state, as the caller knows them all (a reconcile pass's snapshot): with
       * the stored counts of ended tasks they give the counts without reading the tasks, when they add
       * up to every task.
       */
      open?: TaskCounts,
      /**
       * Tasks the caller ended just now, by state, that the stored counts may not hold yet (a page of
       * kills): added to the stored counts of ended tasks. Counted twice, they add up to more than every
       * task, and the tasks are read instead.
       */
      ended?: TaskCounts,
    ): Promise<Job | undefined> {
      let from: Job["status"] | undefined
      const updated = await jobs.update(
        project,
        id,
        async ({ data: job }) => {
          // A try that lost its race and then finds nothing to change records nothing: forget its `from`.
          from = undefined
          const counts =
            (open && countsWithOpen(addCounts(job.counts, ended), open, job.spec.tasks)) ??
            countTasks((await jobs.readTasks(project, id)).map((t) => t.data))
          const derived = deriveJobStatus(job.spec, counts, job.spec.tasks, job.cancelRequested)
          const status = isFinished(job.status) ? job.status : derived
          if (status === job.status && sameCounts(counts, job.counts)) return undefined
          from = job.status
          const now = iso(clock.now())
          return {
            ...job,
            status,
            counts,
            updatedAt: now,
            ...(isFinished(status) && !job.finishedAt ? { finishedAt: now } : {}),
          }
        },
        fence,
        known,
      )
      if (updated && from && from !== updated.data.status)
        await events.job(project, id, { from, to: updated.data.status, reason })
      return updated?.data
    },

    /**
     * Bring a job toward rest with its tasks: kill unfinished tasks when cancel was asked for or more
     * tasks failed than the job tolerates, repair a broken gang, then store the job's counts and status.
     * At most `limit` tasks are killed in one call, those holding an attempt first, so a reconcile pass
     * over a 10,000-task job stays short and the passes after it kill the rest. `known`: the job's open
     * tasks as the pass's snapshot holds them; when the job item alone decides the kills (cancel, or
     * failures past tolerance by its stored counts) they are written on those versions and counted from
     * them, without reading the tasks. Returns the attempts to stop on the substrate, the tasks as
     * written, how many were killed, and whether tasks are left to kill.
     */
    async settle(
      project: string,
      id: string,
      fence?: number,
      options: { known?: ReadonlyMap<number, StoredItem<Task>>; limit?: number } = {},
    ): Promise<{
      job?: Job
      stop: string[]
      tasks: Task[]
      items: StoredItem<Task>[]
      killed: number
      more: boolean
    }> {
      const head = await jobs.head(project, id)
      if (!head) return { stop: [], tasks: [], items: [], killed: 0, more: false }
      const job = head.data
      const counts = job.counts
      const unfinished = Object.entries(counts).some(([state, n]) => n && !isTerminalTask(state as TaskState))
      const failedOut =
        FailedTaskStates.reduce((n, st) => n + (counts[st] ?? 0), 0) > job.spec.maxTaskFailures
      const stop: string[] = []
      const changed: Task[] = []
      const written = new Map<number, StoredItem<Task>>()
      let open: TaskCounts | undefined
      const ended: TaskCounts = {}
      let killed = 0
      let more = false
      // Reading every task is only needed to kill (cancel, failures past tolerance) or to check a gang.
      if (unfinished && (job.cancelRequested || failedOut || job.spec.coscheduling)) {
        // A gang's rules need all of its tasks; a job whose failures are not in its stored counts yet
        // is judged from all of them.
        const useKnown = options.known && !job.spec.coscheduling && (job.cancelRequested || failedOut)
        const stored = useKnown ? [...options.known!.values()] : await jobs.readTasks(project, id)
        const before = new Map(stored.map((t) => [t.data.index, t]))
        const now = iso(clock.now())
        const kills = planKills(
          job.spec,
          stored.map((t) => t.data),
          job.cancelRequested || (useKnown ? failedOut : false),
          now,
        )
        // Tasks whose attempt holds resources on the backend go first: a page of kills frees those first.
        const held = (t: Task) => Number(isLive(before.get(t.index)!.data.state))
        const page = kills.changed
          .sort((a, b) => held(b) - held(a) || a.index - b.index)
          .slice(0, options.limit ?? kills.changed.length)
        more = page.length < kills.changed.length
        const reason = job.cancelRequested ? "cancelled" : "job_failed"
        const result = await api.applyReports(
          job,
          page.map((t) => ({ index: t.index, outcome: { kind: "killed" as const, reason } })),
          {
            ...(fence === undefined ? {} : { fence }),
            known: before,
            recount: false,
            concurrency: KillConcurrency,
          },
        )
        stop.push(...result.stop)
        changed.push(...result.tasks)
        for (const item of result.items) written.set(item.data.index, item)
        if (job.spec.coscheduling && !kills.changed.length) {
          const repair = repairGang(
            stored.map((t) => t.data),
            job.spec,
            now,
          )
          const repaired = await jobs.tryWriteTasks(
            job,
            repair.changed.map((task) => ({ task, prior: before.get(task.index)! })),
            fence,
          )
          for (const item of repaired.items) written.set(item.data.index, item)
          // What landed is recorded even when a sibling's write did not (the next pass repairs the rest).
          const landed = new Set(repaired.items.map((item) => item.data.index))
          const kept = repair.changed.filter((t) => landed.has(t.index))
          await events.tasks(project, id, taskEvents(id, kept, before, [], "gang_repair"))
          if (repaired.failed) throw repaired.failed.error
          if (repaired.lost.length) throw new VersionConflictError(Keys.task(project, id, repaired.lost[0]!))
          stop.push(...repair.stop)
          changed.push(...repair.changed)
        }
        // The job's counts from what is in hand: the open tasks after these writes, the stored counts of
        // ended tasks and the tasks ended just now (`refresh` reads the tasks when they do not add up).
        const after = new Map(before)
        for (const [index, item] of written) after.set(index, item)
        open = countTasks([...after.values()].map((t) => t.data).filter((t) => !isTerminalTask(t.state)))
        for (const [index, item] of written)
          if (isTerminalTask(item.data.state) && !isTerminalTask(before.get(index)!.data.state)) {
            ended[item.data.state] = (ended[item.data.state] ?? 0) + 1
            if (item.data.state === "KILLED") killed++
          }
      }
      const refreshed = await api.refresh(
        project,
        id,
        job.cancelRequested ? "cancelled" : "tasks_changed",
        fence,
        head,
        open,
        ended,
      )
      return { job: refreshed ?? job, stop, tasks: changed, items: [...written.values()], killed, more }
    },

    /**
     * Cancel: mark the job (one write and its event) and answer. A job of at most `InlineCancelTasks`
     * tasks also has the tasks that hold nothing on a backend (PENDING ones) killed here, so it reads
     * CANCELLED at once; a larger one is left to the reconcile pass, which kills its tasks a page at a
     * time, as it stops live attempts of any job on the backend and marks them KILLED. Calling it again
     * finishes a cancel that failed half-way.
     */
    async cancel(project: string, id: string): Promise<Job> {
      let requested = false
      const marked = await jobs.update(project, id, ({ data }) => {
        requested = false
        if (data.cancelRequested || isFinished(data.status)) return undefined
        requested = true
        return { ...data, cancelRequested: true, updatedAt: iso(clock.now()) }
      })
      if (!marked) throw new NotFoundError("job", id)
      if (isFinished(marked.data.status)) return marked.data
      const inline = marked.data.spec.tasks <= InlineCancelTasks
      if (requested)
        await events.job(project, id, {
          from: marked.data.status,
          to: marked.data.status,
          reason: "cancel_requested",
          ...(inline
            ? {}
            : { message: `${marked.data.spec.tasks} tasks: the control loop kills them a page at a time` }),
        })
      if (!inline) return marked.data
      const loaded = await jobs.load(project, id)
      const now = iso(clock.now())
      const idle = (loaded?.tasks ?? []).filter((t) => t.data.state === "PENDING")
      let failure: { error: unknown } | undefined
      const killed = await mapLimit(idle, WriteConcurrency, async (stored) => {
        const result = applyOutcome(
          stored.data,
          { kind: "killed", reason: "cancelled" },
          marked.data.spec,
          now,
        )
        try {
          await jobs.writeTasks(marked.data, [{ task: result.task, prior: stored }])
          return stored.data.index
        } catch (error) {
          // The task moved meanwhile (e.g. it was just placed): the reconcile pass kills it instead.
          // Any other failure fails the request, once the kills that landed are recorded.
          if (!(error instanceof VersionConflictError)) failure ??= { error }
          return undefined
        }
      })
      await events.tasks(
        project,
        id,
        killed
          .filter((index) => index !== undefined)
          .map((index) => ({
            entity: { kind: "task", id: `${id}/${index}` },
            from: "PENDING",
            to: "KILLED",
            reason: "cancelled",
          })),
      )
      if (failure) throw failure.error
      return (await api.refresh(project, id, "cancelled")) ?? marked.data
    },

    /**
     * Apply reports about a job's tasks: outcomes (state changes, with the gang rules when the job is
     * coscheduled) and serving notes (where a replica listens, whether it is ready). Each task write is
     * conditional on its version and, under a lease, carries the fencing token; the tasks whose write lost
     * its race are re-read and the reports re-applied to them (a gang's: all its tasks), while the
     * changes that landed keep their events and stops (outcomes about attempts that moved on are stale
     * and change nothing). Records an event
     * per task state change. Returns the attempts to stop on the substrate, how many tasks changed,
     * how many of them changed state, and the tasks as written.
     */
    async applyReports(
      job: Job,
      reports: TaskReport[],
      options: {
        fence?: number
        /**
         * The tasks as the caller last saw them stored (a reconcile pass's snapshot): the first try
         * writes on their versions instead of reading them again; a stale one loses its race and the
         * next try reads. Not used for a gang, whose rules need all its tasks.
         */
        known?: ReadonlyMap<number, StoredItem<Task>>
        /** Take the task events instead of recording them (a caller writing many jobs records them together). */
        collect?: (events: NewEvent[]) => void
        /** False: the caller stores the job's counts and status right after (`settle`), so this does not. */
        recount?: boolean
        /** Task writes in flight at once (default: the store's). */
        concurrency?: number
      } = {},
    ): Promise<{ stop: string[]; changed: number; moved: number; tasks: Task[]; items: StoredItem<Task>[] }> {
      if (!reports.length) return { stop: [], changed: 0, moved: 0, tasks: [], items: [] }
      const indexes = [...new Set(reports.map((r) => r.index))]
      const { known } = options
      // What the tries whose writes landed in part changed: their events and stops are kept, and the
      // next try redoes only the tasks that lost their race (a gang re-reads all of its tasks, on which
      // the landed changes are already made, so they are not made or recorded twice).
      const landed = { stop: new Set<string>(), changed: 0, moved: 0, ended: 0, events: [] as NewEvent[] }
      const tasksOf = new Map<number, Task>()
      const items = new Map<number, StoredItem<Task>>()
      let pending = indexes
      // Whatever ends this call, the changes that landed are recorded (their stops are carried out by
      // later passes, from the tasks' `stopping`).
      let recorded = false
      const record = async (recount: boolean) => {
        recorded = true
        if (options.collect && !recount) options.collect(landed.events)
        else if (landed.events.length) await events.tasks(job.project, job.id, landed.events)
      }
      try {
        for (let attempt = 0; ; attempt++) {
          const now = iso(clock.now())
          const stored =
            attempt === 0 && known && !job.spec.coscheduling && indexes.every((i) => known.has(i))
              ? indexes.map((i) => known.get(i)!)
              : await jobs.readTasks(job.project, job.id, job.spec.coscheduling ? undefined : pending)
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
          for (const item of stored) items.set(item.data.index, item)
          for (const task of tasks) tasksOf.set(task.index, task)
          const {
            items: written,
            lost,
            failed,
          } = await jobs.tryWriteTasks(
            job,
            changed.map((task) => ({ task, prior: before.get(task.index)! })),
            options.fence,
            options.concurrency,
          )
          for (const item of written) items.set(item.data.index, item)
          // Not written: lost races (retried below) and failed writes (the call fails, after it records
          // what did land).
          const lostSet = new Set([...lost, ...(failed?.indexes ?? [])])
          const kept = changed.filter((t) => !lostSet.has(t.index))
          const moved = kept.filter((t) => t.state !== before.get(t.index)?.data.state)
          // The report that ends a job's last open task brings the job to its end at once (not a pass
          // later): job lists and details read SUCCEEDED as soon as the tasks have. The job's counts are
          // only a hint of whether this is that report; the full count is taken when it may be.
          landed.ended += moved.filter(
            (t) => isTerminalTask(t.state) && !isTerminalTask(before.get(t.index)!.data.state),
          ).length
          landed.changed += kept.length
          landed.moved += moved.length
          landed.events.push(...taskEvents(job.id, moved, before, reports))
          // A stop goes with the task whose attempt it ends: kept when that task's write landed.
          const ownerOf = new Map<string, number>()
          if (lostSet.size)
            for (const t of [...stored.map((item) => item.data), ...tasks])
              for (const a of t.attempts) ownerOf.set(a.attemptUid, t.index)
          for (const uid of stop) {
            const owner = ownerOf.get(uid)
            if (owner === undefined || !lostSet.has(owner)) landed.stop.add(uid)
          }
          if (failed) throw failed.error
          if (lost.length) {
            if (attempt < 10) {
              pending = lost
              continue
            }
            throw new VersionConflictError(Keys.task(job.project, job.id, lost[0]!))
          }
          const { ended } = landed
          const open = Object.entries(job.counts).reduce(
            (n, [state, count]) => n + (isTerminalTask(state as TaskState) ? 0 : (count ?? 0)),
            0,
          )
          const recount =
            options.recount !== false &&
            ended > 0 &&
            (job.spec.tasks <= RecountTasks || open - ended <= 0) &&
            !isFinished(job.status)
          // A job that may end here has its task events written first: whoever reads it ended reads why.
          await record(recount)
          if (recount) await api.refresh(job.project, job.id, "tasks_ended", options.fence)
          return {
            stop: [...landed.stop],
            changed: landed.changed,
            moved: landed.moved,
            tasks: [...tasksOf.values()],
            items: [...items.values()],
          }
        }
      } catch (error) {
        if (!recorded) await record(false).catch(() => undefined)
        throw error
      }
    },

    /** Store why the job's pending tasks wait (one reason per job: its tasks are alike). */
    async setPendingReason(project: string, id: string, reason: string, fence?: number): Promise<void> {
      await jobs.update(
        project,
        id,
        ({ data }) => (data.pendingReason === reason ? undefined : { ...data, pendingReason: reason }),
        fence,
      )
    },
  }
  return api
}
export type JobTransitions = ReturnType<typeof JobTransitions>
