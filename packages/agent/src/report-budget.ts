/**
 * Bounds the log tails one heartbeat carries. Each tail is at most 32 KiB, but a worker may run
 * hundreds of attempts, and one request to the control plane (a Lambda behind a Function URL) must
 * stay small; tails that do not fit wait for a later heartbeat.
 */
import type { ObservedAttempt } from "@swarmplane/core/contract/worker"

/** Total characters of log tails in one heartbeat. */
export const LogBudgetChars = 256 * 1024

/**
 * Drop `logTail` from the reports that do not fit in `budget`, in place. Finished attempts go first
 * (their output is final and they will soon be forgotten), then the rest from a rotating start, so a
 * few chatty attempts cannot starve the others' logs forever.
 */
export function fitLogBudget(reports: ObservedAttempt[], budget = LogBudgetChars, rotation = 0): void {
  const withLogs = reports.filter((r) => r.logTail !== undefined)
  const finished = withLogs.filter((r) => r.state !== "RUNNING")
  const running = withLogs.filter((r) => r.state === "RUNNING")
  const start = running.length ? rotation % running.length : 0
  const order = [...finished, ...running.slice(start), ...running.slice(0, start)]
  let left = budget
  for (const report of order) {
    const size = report.logTail?.length ?? 0
    if (size <= left) left -= size
    else delete report.logTail
  }
}
