/**
 * What one listing of the workspace's jobs says of the live and stopping attempts. Pure: the jobs
 * Lepton listed (its live list, plus archived jobs of attempts the list no longer shows, read one by
 * one: `unlisted`, `withJobs`; indexed by id and by the name swarmplane gave each) and the time
 * go in; transitions, queue reasons and attempts to stop again come out, as in the Slurm backend's
 * observe.ts. An attempt is found by its Lepton id, else by its name (a create whose answer was lost);
 * one Lepton no longer lists is lost after `LostAfterMs`, never silently left running.
 * A batch shard's progress is read from its log (progress.ts, with ../progress-log.ts).
 */
import type { ReconcileResult, TaskRef } from "../protocol"
import { jobName } from "./spec"
import { jobOutcome, readJob } from "./states"
import type { LeptonJob } from "./types"

// Which shards' logs a pass reads for progress is backend-neutral; backend.ts takes it from here.

/** An attempt whose job Lepton has not listed this long after it was minted counts as lost. */
export const LostAfterMs = 120_000

export interface JobIndex {
  byId: Map<string, LeptonJob>
  byName: Map<string, LeptonJob>
}

/** The listed jobs by Lepton id and by swarmplane's name (its label when Lepton keeps labels). */
export function indexJobs(jobs: LeptonJob[]): JobIndex {
  const byId = new Map<string, LeptonJob>()
  const byName = new Map<string, LeptonJob>()
  for (const job of jobs) {
    byId.set(job.metadata.id, job)
    const attempt = job.metadata.labels?.["swarmplane-attempt"]
    const name = attempt ? jobName(attempt) : job.metadata.name
    if (name) byName.set(name, job)
  }
  return { byId, byName }
}

/** The attempt (the last, or the one `uid` names) and its Lepton job, if listed. */
export function jobOf(index: JobIndex, ref: TaskRef, uid?: string) {
  const attempt = uid
    ? ref.task.data.attempts.find((a) => a.attemptUid === uid)
    : ref.task.data.attempts.at(-1)
  if (!attempt) return { attempt, job: undefined }
  const job =
    (attempt.target ? index.byId.get(attempt.target) : undefined) ??
    (attempt.submission ? index.byName.get(attempt.submission) : undefined)
  return { attempt, job }
}

/** Archived jobs a pass reads one by one at most (the rest the next pass). */
export const ArchiveReadsPerPass = 32

/**
 * The attempts (live, or stopping) whose Lepton job the live list does not show though Lepton gave it
 * an id: most have just ended and moved to the archive, to be read one by one. The first `limit` ids
 * are to be read (each with the refs it answers for, so a read that fails defers just those); the
 * rest are `deferred` to a later pass (left out of this one, not taken for lost).
 */
export function unlisted(
  index: JobIndex,
  launched: readonly TaskRef[],
  stopping: readonly TaskRef[],
  limit = ArchiveReadsPerPass,
): { read: Map<string, TaskRef[]>; deferred: Set<TaskRef> } {
  /** Each Lepton id to read, with the attempts' refs it answers for. */
  const read = new Map<string, TaskRef[]>()
  const deferred = new Set<TaskRef>()
  const consider = (ref: TaskRef, uid?: string) => {
    const { attempt, job } = jobOf(index, ref, uid)
    if (job || !attempt?.target) return
    const refs = read.get(attempt.target)
    if (refs) refs.push(ref)
    else if (read.size < limit) read.set(attempt.target, [ref])
    else deferred.add(ref)
  }
  for (const ref of launched) consider(ref)
  for (const ref of stopping) consider(ref, ref.task.data.stopping?.attemptUid)
  return { read, deferred }
}

/** The index with these jobs (read one by one) added. */
export function withJobs(index: JobIndex, jobs: readonly LeptonJob[]): JobIndex {
  const more = indexJobs([...jobs])
  return {
    byId: new Map([...index.byId, ...more.byId]),
    byName: new Map([...index.byName, ...more.byName]),
  }
}

export type JobObservation = Required<Pick<ReconcileResult, "transitions" | "waiting" | "unstopped">> & {
  /** Jobs in a state this code does not know, in words (logged; the task is left as it is). */
  unknown: string[]
}

export function observeJobs(
  launched: readonly TaskRef[],
  stopping: readonly TaskRef[],
  index: JobIndex,
  now: number,
): JobObservation {
  const out: JobObservation = { transitions: [], waiting: [], unstopped: [], unknown: [] }
  for (const ref of launched) {
    const { attempt, job } = jobOf(index, ref)
    if (!attempt) continue
    const uid = attempt.attemptUid
    if (!job) {
      // Created (or being created) but not listed: after a while the job is gone from Lepton.
      if (attempt.target && now - Date.parse(attempt.createdAt) > LostAfterMs)
        out.transitions.push({
          ref,
          outcome: {
            kind: "worker_failed",
            attemptUid: uid,
            reason: "lost",
            message: `Lepton no longer lists job ${attempt.target}`,
          },
        })
      continue
    }
    const reading = readJob(job)
    // A state this code does not know is shown with its raw name: as the submitted task's reason
    // (the task keeps its state; nothing is guessed), and in the pass's log.
    if (reading.kind === "waiting" || reading.kind === "starting" || reading.kind === "unknown")
      out.waiting.push({ ref, reason: reading.message })
    if (reading.kind === "unknown") out.unknown.push(reading.message)
    const outcome = jobOutcome(reading, uid, job.metadata.id)
    // A task already RUNNING is not told so again every pass.
    if (outcome && !(outcome.kind === "running" && ref.task.data.state === "RUNNING"))
      out.transitions.push({ ref, outcome })
  }
  // What swarmplane ended: stopped once Lepton lists it no more or it has ended, else stopped again.
  for (const ref of stopping) {
    const uid = ref.task.data.stopping?.attemptUid
    const { attempt, job } = jobOf(index, ref, uid)
    if (!uid || !attempt) continue
    const reading = job ? readJob(job, true) : undefined
    if (!job || !reading || ["stopped", "succeeded", "failed"].includes(reading.kind))
      out.transitions.push({ ref, outcome: { kind: "stopped", attemptUid: uid } })
    else out.unstopped.push({ ref, target: job.metadata.id })
  }
  return out
}
