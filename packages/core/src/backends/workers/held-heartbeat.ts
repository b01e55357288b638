/**
 * A heartbeat held open (a long-poll): when a worker asks to wait and already runs exactly what it
 * should, its answer waits until its desired set changes or the hold ends, so new work reaches the
 * agent as soon as it is placed rather than at its next heartbeat.
 *
 * Two ways to learn of a change, both bounded by the hold:
 *   - the in-process `AssignmentSignal` (the API and the reconcile pass share a process: the local
 *     control plane): a placement for this worker wakes the hold at once;
 *   - a re-read of the worker's tasks (the `WTASKS` index, as a heartbeat reads them) every `pollMs`,
 *     for what no signal reaches: placements committed by another process (the deployed reconcile
 *     Lambda), and cancels, preemptions and requeues, which end an attempt it runs.
 */
import type { Task } from "../../model/job"
import type { DesiredAttempt, ObservedAttempt } from "../../model/worker"
import type { BackendDeps } from "../protocol"
import type { AssignmentSignal } from "./assignment-signal"

/** The longest a heartbeat is held, whatever the agent asks: well under an API function's 30 s timeout. */
export const MaxHoldS = 20

/** How often a held heartbeat re-reads the worker's tasks. */
export const HoldPollMs = 1000

/**
 * How long to hold a heartbeat that asked to wait `waitS`: at most `MaxHoldS`, and at most a third of
 * the backend's grace, so a worker held open is never judged suspect (silent past half the grace) for
 * being held.
 */
export function holdMs(waitS: number, heartbeatGraceS: number): number {
  return Math.max(0, Math.min(waitS, MaxHoldS, heartbeatGraceS / 3)) * 1000
}

/**
 * Whether the agent already runs exactly its desired set: every desired attempt is reported running and
 * every attempt reported running is desired. A router's upstreams change without a placement (replicas
 * on other workers turn ready), which neither way of waking sees: a worker with one is never held.
 */
export function inStep(desired: readonly DesiredAttempt[], observed: readonly ObservedAttempt[]): boolean {
  if (desired.some((d) => d.kind === "router" || d.action !== "run")) return false
  const running = new Set(observed.filter((o) => o.state === "RUNNING").map((o) => o.attemptUid))
  return desired.length === running.size && desired.every((d) => running.has(d.attemptUid))
}

const live = (t: Task) => t.state === "ASSIGNED" || t.state === "BUILDING" || t.state === "RUNNING"

export type HoldEnd = "changed" | "timeout" | "aborted"

/**
 * Hold until the attempts live on `workerId` are no longer `known` (what its answer would list), the
 * hold ends, or `abort` fires (the client went away). `since` is the signal's mark taken before the
 * desired set was read, so a placement committed in between wakes the hold at once.
 */
export async function holdUntilChanged(
  deps: Pick<BackendDeps, "repos" | "clock"> & { assignments?: AssignmentSignal },
  project: string,
  workerId: string,
  known: ReadonlySet<string>,
  options: { holdMs: number; since: number; pollMs?: number; abort?: AbortSignal },
): Promise<HoldEnd> {
  const { clock, assignments } = deps
  const deadline = clock.now() + options.holdMs
  let since = options.since
  for (;;) {
    if (options.abort?.aborted) return "aborted"
    const left = deadline - clock.now()
    if (left <= 0) return "timeout"
    // Until the next re-read, or a signal for this worker, or the client leaving, whichever is first.
    const step = new AbortController()
    const stop = () => step.abort()
    options.abort?.addEventListener("abort", stop, { once: true })
    const aborted = new Promise<void>((resolve) => step.signal.addEventListener("abort", () => resolve()))
    await Promise.race([
      clock.sleep(Math.min(options.pollMs ?? HoldPollMs, left)),
      ...(assignments ? [assignments.next(project, workerId, since, step.signal)] : []),
      aborted,
    ])
    step.abort()
    options.abort?.removeEventListener("abort", stop)
    if (options.abort?.aborted) return "aborted"
    // Signals from here on are news to the next round; the read below sees everything before them.
    if (assignments) since = assignments.mark()
    const held = await deps.repos.jobs.heldBy(project, workerId)
    const now = held
      .map((h) => h.task.data)
      .filter((t) => live(t) && t.attempts.at(-1)?.workerId === workerId)
      .map((t) => t.attempts.at(-1)!.attemptUid)
    if (now.length !== known.size || now.some((uid) => !known.has(uid))) return "changed"
  }
}
