/**
 * What one reconcile command saw of the live attempts, as task outcomes. Pure: the rows of `squeue`,
 * the records of `scontrol` and `sacct`, and the progress documents go in; transitions, progress
 * counters and queue reasons come out. This is where a Slurm event is told truthfully:
 *
 * - a job cancelled on the cluster (an admin's `scancel`) while swarmplane still wanted it is a
 *   failure (`cancelled_on_cluster`, against the failure budget), never a silent final KILLED: when
 *   swarmplane cancels, the task is KILLED in its own state before `scancel` runs, so it is no longer live;
 * - a node failure is a worker failure (the preemption budget), a preemption a preemption;
 * - a run Slurm put back in its queue after it started (a requeue: PENDING with `BeginTime` after a node
 *   failure, or `scontrol requeue`) is a preemption: the attempt ends, its Slurm job is cancelled after
 *   the commit, and the task is retried as a new attempt with its own name and log. Tasks are submitted
 *   with `--no-requeue`, so this happens only when someone requeues by hand;
 * - a task is never left RUNNING while Slurm says it waits.
 */
import type { Attempt } from "../../model/job"
import type { Outcome } from "../../model/outcome"
import type { ReconcileResult, TaskRef } from "../protocol"
import {
  mapSlurmState,
  type SacctRecord,
  type ScontrolJob,
  type SlurmOutcome,
  type SqueueRow,
  toOutcome,
} from "./parse"
import { progressOf } from "./remote"

/** An attempt unseen on the cluster this long after it was submitted counts as lost. */
export const LostAfterMs = 120_000

/** `<name>#<index>` of an attempt's submission. */
export function parseSubmission(text: string | undefined): { name: string; index: number } | undefined {
  const m = /^(.+)#(\d+)$/.exec(text ?? "")
  return m ? { name: m[1]!, index: Number(m[2]) } : undefined
}

/** `<array job id>_<index>`, what Slurm shows for an array task. */
export function parseTarget(text: string | undefined): { jobId: string; index: number } | undefined {
  const m = /^(\d+)_(\d+)$/.exec(text ?? "")
  return m ? { jobId: m[1]!, index: Number(m[2]) } : undefined
}

export interface Observed {
  rows: SqueueRow[]
  /** Finished array tasks of ours, from `scontrol show job` (exit codes, restarts). */
  records: ScontrolJob[]
  /** Completion records of submissions that left the queue, by Slurm job id. */
  sacct: Map<string, SacctRecord>
  /** Progress documents by attempt uid. */
  progress: Map<string, Record<string, unknown>>
  /** Exit codes the tasks of submissions gone from the queue wrote, by `<name>_<index>`. */
  exits?: Map<string, number>
}

const key = (jobId: string, index: number) => `${jobId}_${index}`

/** squeue rows by `<array id>_<index>`: a pending remainder row stands for each of its indexes. */
function rowIndex(rows: SqueueRow[]): Map<string, SqueueRow> {
  const out = new Map<string, SqueueRow>()
  for (const row of rows) {
    const array = row.arrayJobId ?? row.jobId
    if (row.arrayTaskId !== undefined) out.set(key(array, row.arrayTaskId), row)
    else
      for (const index of row.arrayTaskIds ?? [])
        if (!out.has(key(array, index))) out.set(key(array, index), row)
  }
  return out
}

/** What Slurm says of one attempt: squeue's state, made exact by scontrol's record when it has ended. */
function slurmStateOf(row: SqueueRow, record: ScontrolJob | undefined): SlurmOutcome {
  const exit = record ? { exitCode: record.exitCode ?? 0, signal: record.signal ?? 0 } : undefined
  const slurm = mapSlurmState(row.state, row.reason, exit)
  if (record && slurm.kind !== "pending" && slurm.kind !== "running")
    return mapSlurmState(record.state, record.reason, exit)
  return slurm
}

/** The outcome for a live attempt, given what Slurm says of it. */
export function outcomeFor(
  ref: TaskRef,
  attempt: Attempt,
  slurm: SlurmOutcome,
  restarts = 0,
): { outcome?: Outcome; waiting?: string } {
  const uid = attempt.attemptUid
  const started = ref.task.data.state === "RUNNING" || ref.task.data.state === "BUILDING"
  if (slurm.kind === "pending") {
    if (started || restarts > 0)
      return {
        outcome: {
          kind: "preempted",
          attemptUid: uid,
          reason: "requeued",
          message: `Slurm put job ${attempt.target} back in its queue after it started (${slurm.message}); swarmplane retries the task as a new attempt`,
          stop: true,
        },
      }
    return { waiting: `Slurm: ${slurm.message}` }
  }
  if (slurm.kind === "killed")
    return {
      outcome: {
        kind: "failed",
        attemptUid: uid,
        reason: "cancelled_on_cluster",
        message: `${slurm.message} on the cluster, not through swarmplane (job ${attempt.target})`,
      },
    }
  const outcome = toOutcome(slurm, uid)
  if (!outcome || (outcome.kind === "running" && ref.task.data.state === "RUNNING")) return {}
  return { outcome }
}

/** Outcomes, progress and queue reasons for the live attempts that were submitted. */
export function observeTasks(
  launched: TaskRef[],
  seen: Observed,
  now: number,
): Pick<ReconcileResult, "transitions" | "progress" | "waiting"> {
  const rows = rowIndex(seen.rows)
  const records = new Map<string, ScontrolJob>()
  for (const r of seen.records)
    if (r.arrayJobId !== undefined && r.arrayTaskId !== undefined)
      records.set(key(r.arrayJobId, r.arrayTaskId), r)
  const sacctByName = new Map<string, SacctRecord[]>()
  for (const r of seen.sacct.values()) sacctByName.set(r.name, [...(sacctByName.get(r.name) ?? []), r])
  const liveBySubmission = new Map<string, number>()
  for (const ref of launched) {
    const name = parseSubmission(ref.task.data.attempts.at(-1)?.submission)?.name
    if (name) liveBySubmission.set(name, (liveBySubmission.get(name) ?? 0) + 1)
  }

  const transitions: ReconcileResult["transitions"] = []
  const progress: NonNullable<ReconcileResult["progress"]> = []
  const waiting: NonNullable<ReconcileResult["waiting"]> = []
  for (const ref of launched) {
    const attempt = ref.task.data.attempts.at(-1)!
    const counters = progressOf(seen.progress.get(attempt.attemptUid), attempt.attemptUid)
    if (counters) progress.push({ ref, progress: counters })
    const target = parseTarget(attempt.target)!
    const row = rows.get(key(target.jobId, target.index))
    const record = records.get(key(target.jobId, target.index))
    let slurm: SlurmOutcome | undefined = row ? slurmStateOf(row, record) : undefined
    if (!row) {
      // Gone from the queue: the completion log knows a one-task submission for sure (`sacct -c` cannot
      // tell the tasks of an array apart).
      const sub = parseSubmission(attempt.submission)
      const matches = sub ? (sacctByName.get(sub.name) ?? []) : []
      const exit = sub ? seen.exits?.get(`${sub.name}_${sub.index}`) : undefined
      if (exit !== undefined)
        // The command ended by itself and said how: that is the whole story.
        slurm = mapSlurmState(exit === 0 ? "COMPLETED" : "FAILED", "None", { exitCode: exit, signal: 0 })
      else if (matches.length === 1 && liveBySubmission.get(sub!.name) === 1) {
        const m = matches[0]!
        slurm = mapSlurmState(m.state, "None", { exitCode: m.exitCode ?? 0, signal: m.signal ?? 0 })
      } else if (now - Date.parse(attempt.createdAt) > LostAfterMs) {
        transitions.push({
          ref,
          outcome: {
            kind: "worker_failed",
            attemptUid: attempt.attemptUid,
            reason: "lost",
            message: `job ${attempt.target} left Slurm's queue before its end was seen`,
          },
        })
        continue
      }
    }
    if (!slurm) continue
    const seenOf = outcomeFor(ref, attempt, slurm, record?.restarts ?? 0)
    if (seenOf.waiting) waiting.push({ ref, reason: seenOf.waiting })
    if (seenOf.outcome) transitions.push({ ref, outcome: seenOf.outcome })
  }
  return { transitions, progress, waiting }
}

/** Whether a job in this state still holds or waits for a place on the cluster. */
export const isUnfinished = (state: string) => {
  const kind = mapSlurmState(state).kind
  return kind === "pending" || kind === "running"
}

/**
 * The attempts swarmplane ended that Slurm may still run (`task.stopping`): stopped once the queue no
 * longer has them unfinished, else listed (with their Slurm id, found by name when the store never
 * learned it: a submission whose answer was lost) to be cancelled again.
 */
export function observeStopping(
  stopping: readonly TaskRef[],
  rows: readonly SqueueRow[],
): Required<Pick<ReconcileResult, "transitions" | "unstopped">> {
  const byTarget = rowIndex([...rows])
  const transitions: ReconcileResult["transitions"] = []
  const unstopped: NonNullable<ReconcileResult["unstopped"]> = []
  for (const ref of stopping) {
    const uid = ref.task.data.stopping?.attemptUid
    const attempt = ref.task.data.attempts.find((a) => a.attemptUid === uid)
    if (!uid || !attempt) continue
    let target = parseTarget(attempt.target)
    if (!target) {
      const sub = parseSubmission(attempt.submission)
      const row = sub
        ? rows.find(
            (r) =>
              r.name === sub.name &&
              (r.arrayTaskId === sub.index ||
                (r.arrayTaskId === undefined && r.arrayTaskIds?.includes(sub.index))),
          )
        : undefined
      if (row && sub) target = { jobId: row.arrayJobId ?? row.jobId, index: sub.index }
    }
    const row = target ? byTarget.get(key(target.jobId, target.index)) : undefined
    if (row && target && isUnfinished(row.state))
      unstopped.push({ ref, target: key(target.jobId, target.index) })
    else transitions.push({ ref, outcome: { kind: "stopped", attemptUid: uid } })
  }
  return { transitions, unstopped }
}
