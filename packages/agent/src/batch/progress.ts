/**
 * The progress of one shard, as JSON: `shard-<ID>/progress.json` in the output (a folder or an S3
 * prefix), and the same document in the local file named by `SWARMPLANE_PROGRESS_FILE` when that
 * variable is set (the agent points it at a path of its own and reads it to report the task's
 * counters; it stays local when the output is on S3). Both are replaced whole (an atomic rename, a
 * PutObject) at the start, at every checkpoint and at the end, so a reader never sees half a document.
 *
 * Counters, for the shard's `total` rows: `done` rows have a response (those of earlier attempts
 * included), `failed` rows were written with an error by this attempt, so `total - done - failed`
 * are still to do; `skipped` rows were found done in earlier parts and not sent again; `retries`
 * counts the requests this attempt repeated (429, 5xx, timeouts, connection errors); `sent` rows have
 * been sent to the endpoint (answered or not, earlier attempts' skipped rows included); `resent` rows
 * are ones an earlier attempt had sent but not checkpointed when it ended, which this one sends again.
 */
import type { OutputStore } from "./output-port"
import { writeFileAtomic } from "./output-store"

export const ProgressState = ["running", "succeeded", "failed", "stopped"] as const
export type ProgressState = (typeof ProgressState)[number]

export interface BatchProgress {
  shardId: number
  nshards: number
  /** The attempt (ATTEMPT_UID, or the random id this run chose) that wrote this. */
  runId: string
  /** `running`, then `succeeded` (every row has a response), `failed` (some rows failed for good) or
   * `stopped` (interrupted; the next attempt resumes). */
  state: ProgressState
  total: number
  done: number
  failed: number
  retries: number
  skipped: number
  sent: number
  resent: number
  /** ISO 8601. */
  updatedAt: string
}

/** The shard's progress document in the output store. */
export const progressName = (shardDir: string) => `${shardDir}/progress.json`

/** Write the document to the shard's progress.json and to the local file `extraFile` when given. */
export async function writeProgress(
  store: OutputStore,
  shardDir: string,
  progress: BatchProgress,
  extraFile?: string,
): Promise<void> {
  const text = `${JSON.stringify(progress)}\n`
  await store.write(progressName(shardDir), text)
  if (extraFile) await writeFileAtomic(extraFile, text)
}

/** The shard's progress document as the last attempt left it; undefined when there is none or it is not one. */
export async function readProgress(
  store: OutputStore,
  shardDir: string,
): Promise<Partial<BatchProgress> | undefined> {
  const text = await store.read(progressName(shardDir))
  if (!text) return undefined
  try {
    const doc: unknown = JSON.parse(text)
    return typeof doc === "object" && doc !== null ? (doc as Partial<BatchProgress>) : undefined
  } catch {
    return undefined
  }
}
