/**
 * Gang placement: all pending tasks of a coscheduled job go on distinct workers that share one value
 * of `gang.groupBy` (any workers when there is none), or none of them does. Groups are tried best
 * preference total first, then in worker order; the first with enough fitting workers wins.
 */
import type { CandidateIndex, Requirement } from "./candidates"
import { fits, type Need, type PassState, take } from "./pass-state"
import { explainer } from "./reasons"
import type { SchedJob, SchedTask } from "./types"

export type GangResult = { placed: true; workers: number[] } | { placed: false; reason: string }

/** Try to place `tasks` (the job's pending tasks) as one gang; on success the state is updated. */
export function placeGang(
  s: PassState,
  ix: CandidateIndex,
  job: SchedJob,
  req: Requirement,
  need: Need,
  tasks: SchedTask[],
): GangResult {
  const size = tasks.length
  const groupBy = job.gang?.groupBy
  const groups = groupBy === undefined ? [req.workers] : ix.groups(req, groupBy)
  let bestFitting = 0
  for (const group of groups) {
    // Smaller groups are still counted, so the reason can name the best group found.
    const picked: number[] = []
    for (const w of group) {
      if (!fits(s, w, need)) continue
      picked.push(w)
      if (picked.length === size) break
    }
    if (picked.length === size) {
      for (const w of picked) take(s, w, need)
      return { placed: true, workers: picked }
    }
    bestFitting = Math.max(bestFitting, picked.length)
  }
  // Explained against the state at this gang's turn; a fresh explainer because the state moves on.
  const why = explainer(s, ix).explainGang(req, need, size, groupBy, groups, bestFitting)
  return { placed: false, reason: why }
}
