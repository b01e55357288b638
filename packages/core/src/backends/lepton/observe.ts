/**
 * What one listing of the workspace's jobs says of the live and stopping attempts. Pure: the jobs
 * Lepton listed (live and archived, indexed by id and by the name swarmplane gave each) and the time
 * go in; transitions, queue reasons and attempts to stop again come out, as in the Slurm backend's
 * observe.ts. An attempt is found by its Lepton id, else by its name (a create whose answer was lost);
 * one Lepton no longer lists is lost after `LostAfterMs`, never silently left running.
 *
 * Also what a batch shard's log says of its progress: Lepton has no file of the task's to read, so the
 * batch runner prints each change of its counters as a progress line (`SWARMPLANE_PROGRESS_STDOUT=1`,
 * set in spec.ts), and a pass reads the newest lines of a few shards' logs (`progressReads`).
 */
import type { Attempt } from "../../model/job"
import { fileSafe, progressCounters } from "../../model/progress"
import type { ReconcileResult, TaskRef } from "../protocol"
import { jobName } from "./spec"
import { jobOutcome, readJob } from "./states"
import type { LeptonJob } from "./types"

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
    if (reading.kind === "waiting" || reading.kind === "starting")
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

/** What starts a progress line of the batch runner (the agent's batch/progress.ts prints the same). */
export const ProgressLineMarker = "@@swarmplane:progress@@"

/**
 * The counters of the last progress line of `attemptUid` in a log's text; undefined when it has none
 * (not started yet, or the lines are further back than what was read). A line cut short or not of this
 * attempt is passed over for the one before it.
 */
export function progressFromLog(
  text: string,
  attemptUid: string,
): NonNullable<Attempt["progress"]> | undefined {
  const runId = fileSafe(attemptUid)
  const lines = text.split("\n")
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = lines[i]!
    const at = line.indexOf(ProgressLineMarker)
    if (at < 0) continue
    let doc: unknown
    try {
      doc = JSON.parse(line.slice(at + ProgressLineMarker.length))
    } catch {
      continue
    }
    if (typeof doc !== "object" || doc === null || (doc as { runId?: unknown }).runId !== runId) continue
    const counters = progressCounters(doc)
    if (counters) return counters
  }
  return undefined
}

/** Logs a pass reads for progress at most (two calls each: the replicas, then the log). */
export const ProgressReadsPerPass = 8

const isBatch = (ref: TaskRef) => ref.job.spec.batch !== undefined

/**
 * Whose logs a pass reads for progress, at most `limit`: batch attempts only (their runner prints the
 * lines), with a Lepton job. First those that ended in this pass (their final counters, from a log that
 * no longer grows), then the running ones; when those are more than the room left, a run of them from a
 * place that `turn` picks (any number that differs from pass to pass, such as the time in seconds; it is
 * scrambled, so passes at a steady interval do not keep picking the same ones), so each is read every few
 * passes.
 */
export function progressReads(
  launched: readonly TaskRef[],
  transitions: ReconcileResult["transitions"],
  turn: number,
  limit = ProgressReadsPerPass,
): TaskRef[] {
  const withJob = (ref: TaskRef) => isBatch(ref) && ref.task.data.attempts.at(-1)?.target !== undefined
  const ended = new Set<TaskRef>()
  const started = new Set<TaskRef>()
  for (const t of transitions) {
    const { outcome, ref } = t
    if (!withJob(ref) || !("attemptUid" in outcome)) continue
    if (outcome.attemptUid !== ref.task.data.attempts.at(-1)?.attemptUid) continue
    if (outcome.kind === "succeeded" || outcome.kind === "failed") ended.add(ref)
    if (outcome.kind === "running") started.add(ref)
  }
  const running = launched
    .filter(
      (ref) => withJob(ref) && !ended.has(ref) && (ref.task.data.state === "RUNNING" || started.has(ref)),
    )
    .sort((a, b) =>
      a.task.data.attempts.at(-1)!.attemptUid.localeCompare(b.task.data.attempts.at(-1)!.attemptUid),
    )
  const first = [...ended].slice(0, limit)
  const room = Math.min(limit - first.length, running.length)
  if (room <= 0) return first
  const start = (Math.imul(Math.floor(turn) | 0, 0x9e3779b1) >>> 0) % running.length
  return [...first, ...Array.from({ length: room }, (_, i) => running[(start + i) % running.length]!)]
}
