/**
 * Progress counters from a progress document (what a task wrote to `SWARMPLANE_PROGRESS_FILE`, e.g.
 * the batch runner's progress.json, which has more fields). Free of runtime imports: the agent uses it
 * as well as the control plane.
 */
import type { Progress } from "./worker"

/**
 * An attempt uid as it appears in file names and in a progress document's `runId` (the batch runner
 * names its parts and progress with it): anything but `[A-Za-z0-9._-]` becomes `_`.
 */
export function fileSafe(attemptUid: string): string {
  return attemptUid.replace(/[^A-Za-z0-9._-]/g, "_")
}

/** The counters of `doc`; undefined unless it has a whole `done` count. */
export function progressCounters(doc: unknown): Progress | undefined {
  if (typeof doc !== "object" || doc === null) return undefined
  const d = doc as Record<string, unknown>
  const count = (v: unknown) => (typeof v === "number" && Number.isInteger(v) && v >= 0 ? v : undefined)
  const done = count(d.done)
  if (done === undefined) return undefined
  const out: Progress = { done, failed: count(d.failed) ?? 0 }
  const total = count(d.total)
  const retries = count(d.retries)
  const resent = count(d.resent)
  if (total !== undefined) out.total = total
  if (retries !== undefined) out.retries = retries
  if (resent) out.resent = resent
  return out
}
