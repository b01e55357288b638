/**
 * Job status, derived from its tasks (never stored independently of them), and the job-level rules:
 * `maxTaskFailures` and cancel. Pure.
 */
import type { Job, JobSpec, Task, TaskCounts } from "../model/job"
import {
  FailedTaskStates,
  isLive,
  isTerminalTask,
  type JobStatus,
  LiveTaskStates,
  type TaskState,
} from "../model/states"
import { applyOutcome } from "./task-state"

export function countTasks(tasks: readonly Pick<Task, "state">[]): TaskCounts {
  const counts: TaskCounts = {}
  for (const t of tasks) counts[t.state] = (counts[t.state] ?? 0) + 1
  return counts
}

/** Whether two counts say the same (absent and 0 alike, any key order). */
export function sameCounts(a: TaskCounts, b: TaskCounts): boolean {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]) as Set<TaskState>
  return [...keys].every((k) => (a[k] ?? 0) === (b[k] ?? 0))
}

/**
 * A job's counts from its stored counts of ended tasks (an ended task never reopens) and its open
 * tasks as seen now; undefined when they do not add up to every task (one ended unseen since the
 * stored count): then only counting every task will do.
 */
export function countsWithOpen(stored: TaskCounts, open: TaskCounts, total: number): TaskCounts | undefined {
  const counts: TaskCounts = {}
  for (const [state, n] of Object.entries(stored) as [TaskState, number][])
    if (n && isTerminalTask(state)) counts[state] = n
  for (const [state, n] of Object.entries(open) as [TaskState, number][])
    if (n && !isTerminalTask(state)) counts[state] = n
  return Object.values(counts).reduce((a, n) => a + (n ?? 0), 0) === total ? counts : undefined
}

function sum(counts: TaskCounts, states: readonly TaskState[]): number {
  return states.reduce((n, s) => n + (counts[s] ?? 0), 0)
}

/**
 * PENDING until a task is placed; RUNNING once a task runs or has succeeded, while any is not final; FAILED as soon as more tasks
 * failed than `maxTaskFailures` allows (the rest are being killed); CANCELLED when cancel was asked for
 * and a task was killed by it; SUCCEEDED when every task is final and failures are within tolerance.
 */
export function deriveJobStatus(
  spec: Pick<JobSpec, "maxTaskFailures">,
  counts: TaskCounts,
  total: number,
  cancelRequested: boolean,
): JobStatus {
  const failed = sum(counts, FailedTaskStates)
  const killed = counts.KILLED ?? 0
  const terminal = Object.entries(counts).reduce(
    (n, [s, c]) => n + (isTerminalTask(s as TaskState) ? (c ?? 0) : 0),
    0,
  )
  if (failed > spec.maxTaskFailures) return "FAILED"
  if (terminal === total) {
    if (cancelRequested && killed > 0) return "CANCELLED"
    if (killed > 0) return "FAILED"
    return "SUCCEEDED"
  }
  // RUNNING once something runs or has succeeded; failures within tolerance alone do not start a job.
  const started = LiveTaskStates.reduce((n, st) => n + (counts[st] ?? 0), 0) + (counts.SUCCEEDED ?? 0)
  return started > 0 ? "RUNNING" : "PENDING"
}

/**
 * Tasks to kill now: every non-terminal task when cancel is requested, or when the job has failed past
 * its tolerance. Returns the changed tasks and the attempts to stop on the backend.
 */
export function planKills(
  spec: Pick<JobSpec, "maxTaskFailures" | "maxRetriesFailure" | "maxRetriesPreemption">,
  tasks: readonly Task[],
  cancelRequested: boolean,
  nowIso: string,
): { changed: Task[]; stop: string[] } {
  const counts = countTasks(tasks)
  const failedOut = sum(counts, FailedTaskStates) > spec.maxTaskFailures
  if (!cancelRequested && !failedOut) return { changed: [], stop: [] }
  const reason = cancelRequested ? "cancelled" : "job_failed"
  const changed: Task[] = []
  const stop: string[] = []
  for (const task of tasks) {
    if (isTerminalTask(task.state)) continue
    const result = applyOutcome(task, { kind: "killed", reason }, spec, nowIso)
    if (!result.changed) continue
    changed.push(result.task)
    stop.push(...result.stop)
  }
  return { changed, stop }
}

/** Whether a task holds (or may hold) a substrate object. */
export function hasLiveAttempt(task: Task): boolean {
  return isLive(task.state)
}

/** A task as users see it: a PENDING task without its own reason shows its job's. */
export function withPendingReason(job: Pick<Job, "pendingReason">, task: Task): Task {
  return task.state === "PENDING" && !task.pendingReason && job.pendingReason
    ? { ...task, pendingReason: job.pendingReason }
    : task
}
