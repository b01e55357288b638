/**
 * Task state machine (Iris semantics, DESIGN.md §2): which transitions are legal, what each outcome
 * costs in retry budget, and the gang rules. Pure: functions take a task and return the next one.
 *
 * A report is about one attempt. A report about an attempt that is not the task's current one is
 * stale and changes nothing. A task sent back to PENDING keeps its attempts; the next placement mints
 * a new `attemptUid`.
 */
import type { Attempt, Task } from "../model/job"
import type { Outcome } from "../model/outcome"
import {
  type AttemptState,
  FailedTaskStates,
  isLive,
  isTerminalTask,
  type TaskState,
  TerminalTaskStates,
} from "../model/states"

/**
 * Attempts kept on a task (the newest). Budgets can allow a thousand retries; the counts keep the
 * totals, and the item stays small.
 */
export const MaxAttemptsKept = 50

/** How long a task waits before its next attempt after `failures` failures: 2 s doubling, at most 5 min. */
export function failureBackoffMs(failures: number): number {
  return Math.min(5 * 60_000, 2_000 * 2 ** Math.max(0, failures - 1))
}

/** Why a failed attempt ended, in words: its message, else its reason and exit code. */
export function endedWhy(outcome: { reason: string; message?: string; exitCode?: number }): string {
  if (outcome.message) return outcome.message
  return outcome.exitCode !== undefined ? `${outcome.reason} (exit code ${outcome.exitCode})` : outcome.reason
}

/** The retry budgets of a job, as they apply to each of its tasks. */
export interface RetryPolicy {
  maxRetriesFailure: number
  maxRetriesPreemption: number
}

export type { Outcome }

/** Legal task transitions. PENDING may be re-entered from a live state (a retry). */
export const TaskTransitions: Record<TaskState, readonly TaskState[]> = {
  PENDING: ["ASSIGNED", "UNSCHEDULABLE", "KILLED", "COSCHED_FAILED"],
  ASSIGNED: [
    "BUILDING",
    "RUNNING",
    "SUCCEEDED",
    "PENDING",
    "FAILED",
    "WORKER_FAILED",
    "PREEMPTED",
    "KILLED",
    "COSCHED_FAILED",
  ],
  BUILDING: [
    "RUNNING",
    "SUCCEEDED",
    "PENDING",
    "FAILED",
    "WORKER_FAILED",
    "PREEMPTED",
    "KILLED",
    "COSCHED_FAILED",
  ],
  RUNNING: ["SUCCEEDED", "PENDING", "FAILED", "WORKER_FAILED", "PREEMPTED", "KILLED", "COSCHED_FAILED"],
  SUCCEEDED: [],
  FAILED: [],
  KILLED: [],
  WORKER_FAILED: [],
  PREEMPTED: [],
  UNSCHEDULABLE: [],
  COSCHED_FAILED: [],
}

export function canTransition(from: TaskState, to: TaskState): boolean {
  return TaskTransitions[from].includes(to)
}

/** The task's current attempt: the last one, if the task is live (PENDING tasks have none running). */
export function currentAttempt(task: Task): Attempt | undefined {
  return isLive(task.state) ? task.attempts.at(-1) : undefined
}

/** The result of applying an outcome: the next task, whether anything changed, and attempts to stop. */
export interface Applied {
  task: Task
  changed: boolean
  /** Attempts that were live on a backend and must now be stopped there (after the state commit). */
  stop: string[]
  /** True when the task went back to PENDING to be retried (for gang rules). */
  retried: boolean
}

const unchanged = (task: Task): Applied => ({ task, changed: false, stop: [], retried: false })

function endAttempt(task: Task, state: AttemptState, iso: string, extra: Partial<Attempt>): Attempt[] {
  const attempts = task.attempts.slice()
  const last = attempts.at(-1)
  if (last) attempts[attempts.length - 1] = { ...last, ...extra, state, finishedAt: iso }
  return attempts
}

/**
 * Apply one outcome to a task. Stale reports (another attempt than the current one), reports after the
 * task is terminal and illegal transitions leave the task unchanged.
 */
export function applyOutcome(task: Task, outcome: Outcome, policy: RetryPolicy, nowIso: string): Applied {
  if (outcome.kind === "stopped") return confirmStopped(task, outcome.attemptUid, nowIso)
  // Not placed again while its last attempt may still run: two copies would run at once.
  if (outcome.kind === "assigned" && task.stopping) return unchanged(task)
  const applied = decide(task, outcome, policy, nowIso)
  const uid = applied.stop[0]
  return uid ? { ...applied, task: markStopping(applied.task, uid, nowIso) } : applied
}

/** Why a task waits when its last attempt is still being stopped. */
export const waitingForStop = (attemptUid: string) =>
  `waiting for attempt ${attemptUid} to stop before it is placed again`

/**
 * Note that `attemptUid`, which the control plane just ended, may still run on its substrate: the task
 * keeps it in `stopping` until the substrate confirms it stopped (`confirmStopped`).
 */
export function markStopping(task: Task, attemptUid: string, nowIso: string): Task {
  const waits = task.state === "PENDING" && !task.pendingReason
  return {
    ...task,
    stopping: { attemptUid, since: nowIso },
    ...(waits ? { pendingReason: waitingForStop(attemptUid) } : {}),
  }
}

/** The substrate no longer runs `attemptUid`: the task may be placed again (any state; stale ones change nothing). */
export function confirmStopped(task: Task, attemptUid: string, nowIso: string): Applied {
  if (task.stopping?.attemptUid !== attemptUid) return unchanged(task)
  const { stopping: _, ...rest } = task
  const reason = task.pendingReason === waitingForStop(attemptUid) ? { pendingReason: undefined } : {}
  return { task: { ...rest, ...reason, updatedAt: nowIso }, changed: true, stop: [], retried: false }
}

function decide(
  task: Task,
  outcome: Exclude<Outcome, { kind: "stopped" }>,
  policy: RetryPolicy,
  nowIso: string,
): Applied {
  if (isTerminalTask(task.state)) return unchanged(task)
  const current = currentAttempt(task)
  if ("attemptUid" in outcome && outcome.kind !== "assigned" && current?.attemptUid !== outcome.attemptUid)
    return unchanged(task)
  const base = { ...task, pendingReason: undefined, updatedAt: nowIso }

  switch (outcome.kind) {
    case "assigned": {
      if (task.state !== "PENDING") return unchanged(task)
      const attempt: Attempt = {
        attemptUid: outcome.attemptUid,
        state: "ASSIGNED",
        createdAt: nowIso,
        ...(outcome.target ? { target: outcome.target } : {}),
        ...(outcome.workerId ? { workerId: outcome.workerId } : {}),
        ...(outcome.submission ? { submission: outcome.submission } : {}),
      }
      return {
        task: {
          ...base,
          state: "ASSIGNED",
          retryAt: undefined,
          attempts: [...task.attempts, attempt].slice(-MaxAttemptsKept),
        },
        changed: true,
        stop: [],
        retried: false,
      }
    }
    case "building":
      if (task.state !== "ASSIGNED") return unchanged(task)
      return {
        task: { ...base, state: "BUILDING", attempts: withLast(task, { state: "BUILDING" }) },
        changed: true,
        stop: [],
        retried: false,
      }
    case "running":
      if (task.state === "RUNNING") return unchanged(task)
      return {
        task: {
          ...base,
          state: "RUNNING",
          attempts: withLast(task, {
            state: "RUNNING",
            startedAt: nowIso,
            ...(outcome.target ? { target: outcome.target } : {}),
          }),
        },
        changed: true,
        stop: [],
        retried: false,
      }
    case "succeeded":
      return {
        task: {
          ...base,
          state: "SUCCEEDED",
          attempts: endAttempt(task, "SUCCEEDED", nowIso, { exitCode: outcome.exitCode ?? 0 }),
        },
        changed: true,
        stop: [],
        retried: false,
      }
    case "failed": {
      const attempts = endAttempt(task, "FAILED", nowIso, {
        reason: outcome.reason,
        ...(outcome.exitCode !== undefined ? { exitCode: outcome.exitCode } : {}),
        ...(outcome.message ? { message: outcome.message } : {}),
      })
      const failureCount = task.failureCount + 1
      const retry = failureCount <= policy.maxRetriesFailure
      // A retry waits, longer after each failure, so a task that cannot start does not loop.
      const retryAt = new Date(Date.parse(nowIso) + failureBackoffMs(failureCount)).toISOString()
      const backoff = retry
        ? {
            retryAt,
            pendingReason: `retrying after failure ${failureCount} of ${policy.maxRetriesFailure + 1}: ${endedWhy(outcome)}; next try at ${retryAt}`,
          }
        : {}
      return {
        task: { ...base, state: retry ? "PENDING" : "FAILED", attempts, failureCount, ...backoff },
        changed: true,
        stop: outcome.stop && current ? [current.attemptUid] : [],
        retried: retry,
      }
    }
    case "worker_failed":
    case "preempted": {
      const attemptState = outcome.kind === "preempted" ? "PREEMPTED" : "WORKER_FAILED"
      const attempts = endAttempt(task, attemptState, nowIso, {
        reason: outcome.reason,
        ...(outcome.message ? { message: outcome.message } : {}),
      })
      const stop = outcome.stop && current ? [current.attemptUid] : []
      // A task preempted before it started (only ASSIGNED) lost nothing: it always goes back, free.
      if (outcome.kind === "preempted" && task.state === "ASSIGNED")
        return { task: { ...base, state: "PENDING", attempts }, changed: true, stop, retried: true }
      const preemptionCount = task.preemptionCount + 1
      const retry = preemptionCount <= policy.maxRetriesPreemption
      return {
        task: { ...base, state: retry ? "PENDING" : attemptState, attempts, preemptionCount },
        changed: true,
        stop,
        retried: retry,
      }
    }
    case "killed":
    case "cosched_failed": {
      const state = outcome.kind === "killed" ? "KILLED" : "COSCHED_FAILED"
      const live = currentAttempt(task)
      const attempts = live
        ? endAttempt(task, "KILLED", nowIso, {
            reason: outcome.reason,
            ...(outcome.message ? { message: outcome.message } : {}),
          })
        : task.attempts
      return {
        task: { ...base, state, attempts, pendingReason: undefined },
        changed: true,
        stop: live ? [live.attemptUid] : [],
        retried: false,
      }
    }
    case "unschedulable":
      if (task.state !== "PENDING") return unchanged(task)
      return {
        task: { ...base, state: "UNSCHEDULABLE", pendingReason: outcome.message ?? task.pendingReason },
        changed: true,
        stop: [],
        retried: false,
      }
  }
}

function withLast(task: Task, patch: Partial<Attempt>): Attempt[] {
  const attempts = task.attempts.slice()
  const last = attempts.at(-1)
  if (last) attempts[attempts.length - 1] = { ...last, ...patch }
  return attempts
}

/**
 * Record where a live attempt runs on its substrate (`target`, e.g. a Slurm job id), where a replica or
 * router listens and whether it is ready. Not a state change; stale
 * reports (another attempt, a task no longer live) change nothing.
 */
export function noteServing(
  task: Task,
  report: {
    attemptUid: string
    endpoint?: string
    ready?: boolean
    target?: string
    progress?: Attempt["progress"]
    pendingReason?: string
    submitFailure?: { message: string; retryAt: string }
    message?: string
  },
  nowIso: string,
): Applied {
  const current = currentAttempt(task)
  if (!current || current.attemptUid !== report.attemptUid) return unchanged(task)
  if (report.submitFailure) {
    // Not on the substrate yet: count the try, say why and when the next is due.
    if (task.state !== "ASSIGNED" || current.target) return unchanged(task)
    const failures = (current.submitFailures ?? 0) + 1
    const { message, retryAt } = report.submitFailure
    return {
      task: {
        ...task,
        pendingReason: `not submitted yet (try ${failures}): ${message}; next try at ${retryAt}`,
        attempts: withLast(task, { submitFailures: failures, retryAt }),
        updatedAt: nowIso,
      },
      changed: true,
      stop: [],
      retried: false,
    }
  }
  // Why a submitted attempt waits: kept on the task while it is ASSIGNED (a start clears it).
  const submitted = report.target !== undefined && task.pendingReason?.startsWith("not submitted yet")
  const reason = submitted
    ? { pendingReason: undefined }
    : report.pendingReason !== undefined &&
        task.state === "ASSIGNED" &&
        report.pendingReason !== task.pendingReason
      ? { pendingReason: report.pendingReason }
      : {}
  const patch: Partial<Attempt> = {
    ...(report.ready !== undefined ? { ready: report.ready } : {}),
    ...(report.endpoint !== undefined ? { endpoint: report.endpoint } : {}),
    ...(report.target !== undefined ? { target: report.target } : {}),
    ...(report.progress !== undefined ? { progress: report.progress } : {}),
    // A running server's own word on why it is not serving; an empty one clears it.
    ...(report.message !== undefined && task.state === "RUNNING"
      ? { message: report.message || undefined }
      : {}),
  }
  const same = Object.entries(patch).every(
    ([k, v]) => JSON.stringify(current[k as keyof Attempt]) === JSON.stringify(v),
  )
  if (same && !("pendingReason" in reason)) return unchanged(task)
  return {
    task: { ...task, ...reason, attempts: same ? task.attempts : withLast(task, patch), updatedAt: nowIso },
    changed: true,
    stop: [],
    retried: false,
  }
}

/**
 * Apply an outcome to one task of a gang (a coscheduled job). A retriable failure sends every live
 * sibling back to PENDING (their attempts are stopped; no budget is spent for them); a terminal failure
 * marks every non-terminal sibling COSCHED_FAILED.
 */
export function applyGangOutcome(
  tasks: readonly Task[],
  index: number,
  outcome: Outcome,
  policy: RetryPolicy,
  nowIso: string,
): { tasks: Task[]; changed: number[]; stop: string[] } {
  const target = tasks.find((t) => t.index === index)
  if (!target) return { tasks: [...tasks], changed: [], stop: [] }
  const applied = applyOutcome(target, outcome, policy, nowIso)
  if (!applied.changed) return { tasks: [...tasks], changed: [], stop: [] }
  const next = tasks.map((t) => (t.index === index ? applied.task : t))
  const changed = [index]
  const stop = [...applied.stop]
  // A confirmed stop is news of the substrate, not of the task: the gang rules were applied when it ended.
  if (outcome.kind === "stopped") return { tasks: next, changed, stop }
  // Any terminal failure of one member (UNSCHEDULABLE included: the gang can no longer be placed whole).
  const failedTerminally = (FailedTaskStates as readonly TaskState[]).includes(applied.task.state)
  if (!applied.retried && !failedTerminally) return { tasks: next, changed, stop }

  for (const [i, sibling] of next.entries()) {
    if (sibling.index === index || isTerminalTask(sibling.state)) continue
    if (applied.retried) {
      if (!isLive(sibling.state)) continue
      const live = currentAttempt(sibling)
      const retried: Task = {
        ...sibling,
        state: "PENDING",
        updatedAt: nowIso,
        attempts: endAttempt(sibling, "KILLED", nowIso, { reason: "gang_retry" }),
      }
      next[i] = live ? markStopping(retried, live.attemptUid, nowIso) : retried
      if (live) stop.push(live.attemptUid)
    } else {
      const result = applyOutcome(
        sibling,
        { kind: "cosched_failed", reason: "gang_member_failed" },
        policy,
        nowIso,
      )
      next[i] = result.task
      stop.push(...result.stop)
    }
    changed.push(sibling.index)
  }
  return { tasks: next, changed, stop }
}

/**
 * Repair a gang that a half-applied write left inconsistent (some members PENDING while others hold
 * attempts, or one failed for good while others go on): apply the gang rules from stored state, so
 * the rule holds whatever order writes landed in. Returns the changed tasks and attempts to stop.
 */
export function repairGang(
  tasks: readonly Task[],
  policy: RetryPolicy,
  nowIso: string,
): { changed: Task[]; stop: string[] } {
  const failed = tasks.some((t) => (FailedTaskStates as readonly TaskState[]).includes(t.state))
  const pending = tasks.some((t) => t.state === "PENDING")
  const live = tasks.filter((t) => isLive(t.state))
  const changed: Task[] = []
  const stop: string[] = []
  if (failed) {
    for (const t of tasks) {
      if (isTerminalTask(t.state)) continue
      const result = applyOutcome(t, { kind: "cosched_failed", reason: "gang_member_failed" }, policy, nowIso)
      changed.push(result.task)
      stop.push(...result.stop)
    }
  } else if (pending && live.length)
    for (const t of live) {
      const uid = t.attempts.at(-1)!.attemptUid
      const retried: Task = {
        ...t,
        state: "PENDING",
        updatedAt: nowIso,
        attempts: endAttempt(t, "KILLED", nowIso, { reason: "gang_retry" }),
      }
      changed.push(markStopping(retried, uid, nowIso))
      stop.push(uid)
    }
  return { changed, stop }
}

/** A new task in its initial state. */
export function newTask(index: number, nowIso: string): Task {
  return { index, state: "PENDING", attempts: [], failureCount: 0, preemptionCount: 0, updatedAt: nowIso }
}

export { TerminalTaskStates }
