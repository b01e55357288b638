/**
 * A batch shard's progress counters on Lepton, read from its log: the shard's runner prints each change
 * of its counters as a line there (observe.ts `progressFromLog`), and a pass reads the newest text of a
 * few shards' logs (observe.ts `progressReads` picks which), a few at once, within `ProgressBudgetMs`.
 * Best effort: a read that fails or finds no progress line leaves the attempt's counters as they were,
 * and is no failed contact (the job list is the backend's health).
 */
import type { Clock } from "../../util/clock"
import type { Logger } from "../../util/logger"
import type { ReconcileResult, TaskRef } from "../protocol"
import type { LeptonClient, LogTailLimits } from "./client"
import { progressFromLog } from "./observe"

/** A pass's reads of logs for progress start within this long, so they leave the pass its time. */
export const ProgressBudgetMs = 10_000
/** Logs read at once for progress. */
export const ProgressReadsAtOnce = 4
/**
 * One read of a shard's log for progress. The stream follows a running replica: it is left once its
 * backlog is through (a pause of `idleMs`), and never read for long or far.
 */
export const ProgressLogLimits: LogTailLimits = {
  maxBytes: 16 << 20,
  maxMs: 5_000,
  idleMs: 500,
  keepChars: 64 << 10,
}

const lastAttempt = (ref: TaskRef) => ref.task.data.attempts.at(-1)

/** The counters of each attempt in `refs`, from the newest text of its job's first worker's log. */
export async function readProgress(
  c: LeptonClient,
  refs: readonly TaskRef[],
  clock: Clock,
  logger: Logger,
  label: string,
): Promise<NonNullable<ReconcileResult["progress"]>> {
  const out: NonNullable<ReconcileResult["progress"]> = []
  if (!refs.length) return out
  const until = clock.now() + ProgressBudgetMs
  const one = async (ref: TaskRef) => {
    const attempt = lastAttempt(ref)!
    const target = attempt.target!
    const replicas = await c.jobs.replicas(target)
    const first = [...replicas].sort((a, b) => a.id.localeCompare(b.id))[0]
    if (!first) return
    const maxMs = Math.min(ProgressLogLimits.maxMs, until - clock.now())
    const tail = await c.jobs.replicaLogTail(target, first.id, { ...ProgressLogLimits, maxMs })
    const counters = tail ? progressFromLog(tail.text, attempt.attemptUid) : undefined
    if (counters) out.push({ ref, progress: counters })
  }
  const queue = [...refs]
  const reader = async () => {
    for (let ref = queue.shift(); ref && clock.now() < until; ref = queue.shift())
      await one(ref).catch((error: unknown) =>
        logger.debug(
          `${label}: no progress read for ${lastAttempt(ref!)?.target}: ${error instanceof Error ? error.message : String(error)}`,
        ),
      )
  }
  await Promise.all(Array.from({ length: Math.min(ProgressReadsAtOnce, refs.length) }, reader))
  return out
}
