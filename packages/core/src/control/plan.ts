/**
 * The pure steps of a reconcile pass: from the pass's snapshot and what the backend answered, what to
 * write and what to do on the substrate. Nothing here reads or writes; `reconcile.ts` observes, calls
 * these, and applies what they return.
 */
import type {
  LaunchResult,
  ReconcileResult,
  ScheduleResult,
  TaskRef,
  TeardownEffect,
} from "../backends/protocol"
import type { Backend } from "../model/backend"
import type { Job, Task, TaskCounts } from "../model/job"
import type { Outcome, TaskReport } from "../model/outcome"
import { FailedTaskStates, isFinished, isLive, isTerminalTask, type TaskState } from "../model/states"
import type { Swarm } from "../model/swarm"
import type { StoredItem } from "../store/port"

/** A backend's recorded health is rewritten at least this often while passes run over it. */
export const CheckedEveryMs = 30_000

/** A report about one task, with the task it is about. */
export interface Entry {
  ref: TaskRef
  report: TaskReport
}

export const taskKey = (jobId: string, index: number) => `${jobId}/${index}`
const keyOf = (ref: TaskRef) => taskKey(ref.job.id, ref.task.data.index)
const currentUid = (ref: TaskRef) => ref.task.data.attempts.at(-1)!.attemptUid

/**
 * What one pass knows of its backend's work: read once from the active index at the start, then
 * kept up to date with the pass's own writes (a task that ends leaves it), so later steps never read
 * the work again.
 */
export class Snapshot {
  readonly jobs: Map<string, Job>
  /** Open tasks by job, then by index, as last seen stored. */
  private readonly byJob = new Map<string, Map<number, TaskRef>>()
  /** Tasks whose last attempt is being stopped (`task.stopping`), any state, by job and index. */
  private readonly unstopped = new Map<string, TaskRef>()
  /** Where each attempt seen in this pass runs, for the stops after the commit. */
  readonly targets = new Map<string, string | undefined>()

  constructor(
    readonly swarms: StoredItem<Swarm>[],
    jobs: Map<string, Job>,
    tasks: readonly { jobId: string; task: StoredItem<Task> }[],
    /** Items read from the index. */
    readonly count: number,
    /** The indexed job items with their versions (a write tries them before reading). */
    readonly heads: ReadonlyMap<string, StoredItem<Job>> = new Map(),
  ) {
    this.jobs = jobs
    for (const { jobId, task } of tasks) this.take(jobId, [task])
  }

  /** Every open task. */
  all(): TaskRef[] {
    return [...this.byJob.values()].flatMap((tasks) => [...tasks.values()])
  }

  /** Tasks whose last attempt the control plane ended and the substrate has not confirmed stopped. */
  stopping(): TaskRef[] {
    return [...this.unstopped.values()]
  }

  /** Tasks whose attempt holds resources on the backend. */
  live(): TaskRef[] {
    return this.all().filter((ref) => isLive(ref.task.data.state))
  }

  /**
   * Tasks waiting to be placed: PENDING, of a job that is not winding down (cancelled, or ended or
   * failed past its tolerance, with tasks still to kill over the next passes): those are never placed,
   * timed out or scaled for.
   */
  pending(): TaskRef[] {
    return this.all().filter(
      (ref) => ref.task.data.state === "PENDING" && !windingDown(this.jobs.get(ref.job.id) ?? ref.job),
    )
  }

  /** A job's open tasks by state. */
  openCounts(jobId: string): TaskCounts {
    const counts: TaskCounts = {}
    for (const ref of this.byJob.get(jobId)?.values() ?? [])
      counts[ref.task.data.state] = (counts[ref.task.data.state] ?? 0) + 1
    return counts
  }

  /** A job's open tasks, and its ended ones still being stopped, as last seen stored, by index. */
  known(jobId: string): Map<number, StoredItem<Task>> {
    const refs = [...(this.byJob.get(jobId)?.values() ?? [])]
    for (const ref of this.unstopped.values()) if (ref.job.id === jobId) refs.push(ref)
    return new Map(refs.map((ref) => [ref.task.data.index, ref.task]))
  }

  /** Take in tasks as stored (with their versions). */
  take(jobId: string, items: readonly StoredItem<Task>[]): void {
    const job = this.jobs.get(jobId)
    if (!job) return
    const tasks = this.byJob.get(jobId) ?? new Map<number, TaskRef>()
    for (const task of items) {
      const attempt = task.data.attempts.at(-1)
      if (attempt)
        this.targets.set(attempt.attemptUid, attempt.target ?? this.targets.get(attempt.attemptUid))
      const key = taskKey(jobId, task.data.index)
      if (task.data.stopping) this.unstopped.set(key, { job, task })
      else this.unstopped.delete(key)
      if (isTerminalTask(task.data.state)) tasks.delete(task.data.index)
      else tasks.set(task.data.index, { job, task })
    }
    if (tasks.size) this.byJob.set(jobId, tasks)
    else this.byJob.delete(jobId)
  }
}

/** Reports grouped per job, in the order their first report came. */
export function byJob(entries: readonly Entry[]): { job: Job; reports: TaskReport[] }[] {
  const grouped = new Map<string, { job: Job; reports: TaskReport[] }>()
  for (const { ref, report } of entries) {
    const entry = grouped.get(ref.job.id) ?? { job: ref.job, reports: [] }
    entry.reports.push(report)
    grouped.set(ref.job.id, entry)
  }
  return [...grouped.values()]
}

const outcome = (ref: TaskRef, o: Outcome): Entry => ({
  ref,
  report: { index: ref.task.data.index, outcome: o },
})
const note = (
  ref: TaskRef,
  serving: Omit<Extract<TaskReport, { serving: unknown }>["serving"], "attemptUid">,
) => ({
  ref,
  report: { index: ref.task.data.index, serving: { attemptUid: currentUid(ref), ...serving } },
})

/**
 * What the backend observed, as reports: first the notes (a batch shard's counters, why a submitted
 * attempt still waits), so a finished attempt's last counters are kept, then the outcomes. A worker
 * whose death was not committed (a heartbeat raced the mark and won) keeps its attempts.
 */
export function planObserved(
  observed: Pick<ReconcileResult, "transitions" | "progress" | "waiting">,
  spared: ReadonlySet<string>,
): { notes: Entry[]; outcomes: Entry[] } {
  const notes = [
    ...(observed.progress ?? []).map(({ ref, progress }) => note(ref, { progress })),
    ...(observed.waiting ?? []).map(({ ref, reason }) => note(ref, { pendingReason: reason })),
  ]
  const outcomes = observed.transitions
    .filter((t) => {
      const workerId = t.ref.task.data.attempts.at(-1)?.workerId
      return !(t.outcome.kind === "worker_failed" && workerId && spared.has(workerId))
    })
    .map((t) => outcome(t.ref, t.outcome))
  return { notes, outcomes }
}

/** Whether a job has failed more tasks than it tolerates, by its stored counts. */
export function failedOut(job: Job): boolean {
  return FailedTaskStates.reduce((n, st) => n + (job.counts[st] ?? 0), 0) > job.spec.maxTaskFailures
}

/** A job whose open tasks are to be killed, not run: cancelled, ended, or failed past its tolerance. */
export function windingDown(job: Job): boolean {
  return job.cancelRequested || isFinished(job.status) || failedOut(job)
}

/**
 * The jobs a pass must look at, read from the snapshot alone (a job at rest costs nothing):
 *   settle    before placement: a cancel to carry out, failures past tolerance with tasks still open,
 *             a gang whose counts moved (kills and gang repair, so nothing of it is placed in vain);
 *   recount   after the pass's writes: stored counts that disagree with the job's open tasks (a
 *             heartbeat moved them, or a pass crashed between a task's write and its job's).
 */
export function jobsToSettle(snapshot: Snapshot): { settle: Set<string>; recount: Set<string> } {
  const open = new Map<string, Map<TaskState, number>>()
  for (const ref of snapshot.all()) {
    const counts = open.get(ref.job.id) ?? new Map<TaskState, number>()
    counts.set(ref.task.data.state, (counts.get(ref.task.data.state) ?? 0) + 1)
    open.set(ref.job.id, counts)
  }
  const settle = new Set<string>()
  const recount = new Set<string>()
  for (const job of snapshot.jobs.values()) {
    // A job may have ended (failed past tolerance) with tasks still open: those are killed here too.
    const seen = open.get(job.id) ?? new Map<TaskState, number>()
    const stored = Object.entries(job.counts).filter(([state, n]) => n && !isTerminalTask(state as TaskState))
    const disagree =
      stored.length !== seen.size || stored.some(([state, n]) => seen.get(state as TaskState) !== n)
    if (job.cancelRequested || (failedOut(job) && seen.size > 0) || (disagree && job.spec.coscheduling))
      settle.add(job.id)
    else if (disagree) recount.add(job.id)
  }
  return { settle, recount }
}

/** Whether applied outcomes ended a task as failed, so its job may now be past its tolerance. */
export function endedFailed(tasks: readonly Task[]): boolean {
  return tasks.some((t) => (FailedTaskStates as readonly TaskState[]).includes(t.state))
}

/**
 * Pending tasks past their job's scheduling timeout, as `unschedulable` outcomes. Called after this
 * pass's placement, so a task is only given up on once it was tried; `reasons` are why this pass's
 * scheduler could not place each (keyed by task), which say more than the job's reason from an earlier pass.
 */
export function planTimeouts(
  pending: readonly TaskRef[],
  now: number,
  reasons: ReadonlyMap<string, string> = new Map(),
): Entry[] {
  return pending
    .filter((ref) => {
      const limit = ref.job.spec.schedulingTimeoutS
      const since = Date.parse(ref.task.data.attempts.at(-1)?.finishedAt ?? ref.job.createdAt)
      return limit !== undefined && now - since > limit * 1000
    })
    .map((ref) =>
      outcome(ref, {
        kind: "unschedulable",
        reason: "scheduling_timeout",
        message: `not placed within ${ref.job.spec.schedulingTimeoutS}s: ${reasons.get(keyOf(ref)) ?? ref.job.pendingReason ?? "no fitting capacity"}`,
      }),
    )
}

/**
 * Pending tasks that may be placed now: a task retried after a failure waits out its backoff, one
 * whose last attempt is still being stopped waits for that, and a gang waits for all its members.
 */
export function readyToPlace(pending: readonly TaskRef[], now: number): TaskRef[] {
  const ready = (ref: TaskRef) =>
    // Its last attempt may still run (a gang retry, a preemption): not until its substrate says it stopped.
    !ref.task.data.stopping && (!ref.task.data.retryAt || Date.parse(ref.task.data.retryAt) <= now)
  // A gang is placed whole: while one member waits (its backoff, its old attempt's stop), all of it does.
  const held = new Set(pending.filter((ref) => ref.job.spec.coscheduling && !ready(ref)).map((r) => r.job.id))
  return pending.filter((ref) => ready(ref) && !held.has(ref.job.id))
}

/**
 * The backend's placement as writes: each placed task ASSIGNED with its fresh attempt, each preempted
 * one PREEMPTED, and one reason per job of what still waits (its tasks are alike), only where the
 * reason changed.
 */
export function planPlacement(
  result: ScheduleResult,
  ready: readonly TaskRef[],
): { assignments: Entry[]; preemptions: Entry[]; reasons: { jobId: string; reason: string }[] } {
  const assignments = result.assignments.map((a) =>
    outcome(a.ref, {
      kind: "assigned",
      attemptUid: a.attemptUid,
      ...(a.workerId ? { workerId: a.workerId } : {}),
      ...(a.target ? { target: a.target } : {}),
      ...(a.submission ? { submission: a.submission } : {}),
    }),
  )
  const preemptions = result.preemptions.map((p) =>
    // It still runs until its substrate stops it: the task is placed again once that is confirmed.
    outcome(p.ref, { kind: "preempted", attemptUid: currentUid(p.ref), reason: p.reason, stop: true }),
  )
  const placed = new Set(result.assignments.map((a) => keyOf(a.ref)))
  const firstWaiting = new Map<string, TaskRef>()
  for (const ref of ready)
    if (!placed.has(keyOf(ref)) && !firstWaiting.has(ref.job.id)) firstWaiting.set(ref.job.id, ref)
  const reasons: { jobId: string; reason: string }[] = []
  for (const ref of firstWaiting.values()) {
    const reason = result.pendingReasons.get(keyOf(ref))
    if (reason && reason !== ref.job.pendingReason) reasons.push({ jobId: ref.job.id, reason })
  }
  return { assignments, preemptions, reasons }
}

/** Backoff between tries to submit an attempt whose substrate could not be reached: 5 s doubling, at most 5 min. */
export function submitBackoffMs(failures: number): number {
  return Math.min(5 * 60_000, 5_000 * 2 ** Math.max(0, failures - 1))
}

/** Attempts persisted as ASSIGNED but not on the substrate yet, whose next try is due. */
export function unsubmitted(live: readonly TaskRef[], now: number): TaskRef[] {
  return live.filter((ref) => {
    const attempt = ref.task.data.attempts.at(-1)
    return (
      ref.task.data.state === "ASSIGNED" &&
      !attempt?.target &&
      (attempt?.retryAt === undefined || Date.parse(attempt.retryAt) <= now)
    )
  })
}

/**
 * What a launch came to, as writes: where each submitted (or adopted) attempt runs, each refused one
 * failed, and each that could not reach the substrate deferred with the reason and its next try.
 */
export function planLaunch(result: LaunchResult, now: number): Entry[] {
  return [
    ...result.launched.map(({ ref, target }) => note(ref, { target })),
    ...result.failed.map(({ ref, message }) =>
      outcome(ref, { kind: "failed", attemptUid: currentUid(ref), reason: "submit_failed", message }),
    ),
    ...(result.deferred ?? []).map(({ ref, message }) => {
      const failures = (ref.task.data.attempts.at(-1)?.submitFailures ?? 0) + 1
      return note(ref, {
        submitFailure: { message, retryAt: new Date(now + submitBackoffMs(failures)).toISOString() },
      })
    }),
  ]
}

/**
 * Attempts ended in an earlier pass that the substrate still runs (their stop was lost, or has not
 * taken yet): stopped again after this pass's commit, with where they run when the backend found it.
 */
export function restops(
  observed: Pick<ReconcileResult, "unstopped">,
): { attemptUid: string; target?: string }[] {
  return (observed.unstopped ?? []).flatMap(({ ref, target }) => {
    const uid = ref.task.data.stopping?.attemptUid
    return uid ? [{ attemptUid: uid, ...(target ? { target } : {}) }] : []
  })
}

/** Stops to run on the substrate after the commit, each with where its attempt runs. */
export function teardownEffects(stops: readonly string[], targets: ReadonlyMap<string, string | undefined>) {
  return stops.map(
    (attemptUid): TeardownEffect => ({
      kind: "stop",
      attemptUid,
      ...(targets.get(attemptUid) ? { target: targets.get(attemptUid) } : {}),
    }),
  )
}

/**
 * The backend's health to record, if any: written when it changed, and at least every
 * `CheckedEveryMs` while passes run, so "checked" stays true without a write every pass.
 */
export function healthToRecord(
  record: Pick<Backend, "status">,
  health: { healthy: boolean; message?: string } | undefined,
  now: number,
): { healthy: boolean; message?: string; checkedAt: string } | undefined {
  if (!health) return undefined
  const changed = health.healthy !== record.status.healthy || health.message !== record.status.message
  const stale = !record.status.checkedAt || now - Date.parse(record.status.checkedAt) >= CheckedEveryMs
  return changed || stale ? { ...health, checkedAt: new Date(now).toISOString() } : undefined
}
