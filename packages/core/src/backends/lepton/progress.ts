/**
 * A batch shard's progress counters on Lepton, read from its log: Lepton has no file of the task's to
 * read, so the shard's runner prints each change of its counters as a line there, and a pass reads the
 * newest text of a few shards' logs (../progress-log.ts: which shards, how many at once, within what
 * time, and what a line says). Here: how Lepton gives a job's log (its first worker's, streamed).
 */
import type { Clock } from "../../util/clock"
import type { Logger } from "../../util/logger"
import { readProgressLogs } from "../progress-log"
import type { ReconcileResult, TaskRef } from "../protocol"
import type { LeptonClient, LogTailLimits } from "./client"

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

/** The counters of each attempt in `refs`, from the newest text of its job's first worker's log. */
export function readProgress(
  c: LeptonClient,
  refs: readonly TaskRef[],
  clock: Clock,
  logger: Logger,
  label: string,
): Promise<NonNullable<ReconcileResult["progress"]>> {
  return readProgressLogs(
    refs,
    async (_ref, attempt, until) => {
      const target = attempt.target!
      const replicas = await c.jobs.replicas(target)
      const first = [...replicas].sort((a, b) => a.id.localeCompare(b.id))[0]
      if (!first) return undefined
      const maxMs = Math.min(ProgressLogLimits.maxMs, until - clock.now())
      const tail = await c.jobs.replicaLogTail(target, first.id, { ...ProgressLogLimits, maxMs })
      return tail?.text
    },
    clock,
    logger,
    label,
  )
}
