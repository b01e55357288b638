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
 *
 * Where a backend cannot read a file of the task's but can read its log (Lepton), it sets
 * `SWARMPLANE_PROGRESS_STDOUT=1` and the runner also prints each changed document to stdout as one
 * `@@swarmplane:progress@@ {...}` line, which the backend finds in the log's tail.
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

/** Print progress lines on stdout when this variable is `1`. */
export const ProgressStdoutVariable = "SWARMPLANE_PROGRESS_STDOUT"
/** What starts a progress line; the Lepton backend looks for the same text. */
export const ProgressLineMarker = "@@swarmplane:progress@@"

/** The document as one line of the task's log. */
export const progressLine = (progress: BatchProgress) => `${ProgressLineMarker} ${JSON.stringify(progress)}\n`

/**
 * A printer of progress lines that prints only what changed: the runner reports every couple of
 * seconds, and a log should not grow by a line each time when nothing moved.
 */
export function progressPrinter(print: (line: string) => void): (progress: BatchProgress) => void {
  let last: string | undefined
  return (progress) => {
    const { updatedAt: _, ...counters } = progress
    const key = JSON.stringify(counters)
    if (key === last) return
    last = key
    print(progressLine(progress))
  }
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
