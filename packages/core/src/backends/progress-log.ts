/**
 * A batch shard's progress as its log shows it, for the backends that have no file of the task's to
 * read (lepton, eks): the shard's batch runner, told so by `ProgressStdoutVariable`, prints each change
 * of its counters as a progress line, and a reconcile pass reads the newest lines of a few shards' logs
 * (`progressReads` picks whose, `readProgressLogs` reads them a few at once within a budget,
 * `progressFromLog` finds the counters). Shared by those backends: how each gets a log's text is its own.
 * Best effort: a read that fails or finds no progress line leaves the attempt's counters as they were,
 * and is no failed contact (the pass's listing is the backend's health).
 */
import type { Attempt } from "../model/job"
import { fileSafe, progressCounters } from "../model/progress"
import type { Clock } from "../util/clock"
import type { Logger } from "../util/logger"
import type { ReconcileResult, TaskRef } from "./protocol"

/**
 * Set (to `1`) in a batch job's shards: the batch runner then prints its progress as lines of its log,
 * where the backend reads them (the agent's batch/progress.ts reads the same name).
 */
export const ProgressStdoutVariable = "SWARMPLANE_PROGRESS_STDOUT"

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

/** Logs a pass reads for progress at most. */
export const ProgressReadsPerPass = 8

const isBatch = (ref: TaskRef) => ref.job.spec.batch !== undefined

/**
 * Whose logs a pass reads for progress, at most `limit`: batch attempts only (their runner prints the
 * lines) that the backend has a target for (a job it launched). First those that ended in this pass
 * (their final counters, from a log that no longer grows), then the running ones; when those are more
 * than the room left, a run of them from a place that `turn` picks (any number that differs from pass
 * to pass, such as the time in seconds; it is scrambled, so passes at a steady interval do not keep
 * picking the same ones), so each is read every few passes.
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

/** A pass's reads of logs for progress start within this long, so they leave the pass its time. */
export const ProgressBudgetMs = 10_000
/** Logs read at once for progress. */
export const ProgressReadsAtOnce = 4

/**
 * The counters of each attempt in `refs` (its task's last attempt), from the text `readLog` gives of
 * that attempt's log (undefined: none to read yet), at most `ProgressReadsAtOnce` at once; no read
 * starts past `ProgressBudgetMs`, and each is told that end (`until`) to keep to it too. A read that
 * throws is logged at debug (`label` says whose backend) and the others go on.
 */
export async function readProgressLogs(
  refs: readonly TaskRef[],
  readLog: (ref: TaskRef, attempt: Attempt, until: number) => Promise<string | undefined>,
  clock: Clock,
  logger: Logger,
  label: string,
): Promise<NonNullable<ReconcileResult["progress"]>> {
  const out: NonNullable<ReconcileResult["progress"]> = []
  if (!refs.length) return out
  const until = clock.now() + ProgressBudgetMs
  const one = async (ref: TaskRef) => {
    const attempt = ref.task.data.attempts.at(-1)
    if (!attempt) return
    const text = await readLog(ref, attempt, until)
    const counters = text ? progressFromLog(text, attempt.attemptUid) : undefined
    if (counters) out.push({ ref, progress: counters })
  }
  const queue = [...refs]
  const reader = async () => {
    for (let ref = queue.shift(); ref && clock.now() < until; ref = queue.shift())
      await one(ref).catch((error: unknown) =>
        logger.debug(
          `${label}: no progress read for ${ref!.task.data.attempts.at(-1)?.target}: ${error instanceof Error ? error.message : String(error)}`,
        ),
      )
  }
  await Promise.all(Array.from({ length: Math.min(ProgressReadsAtOnce, refs.length) }, reader))
  return out
}
