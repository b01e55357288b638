/**
 * Outcomes: what was observed or decided about a task's current attempt. Backends produce them (in
 * reconcile results), the control loop applies them with the task state machine (rules/task-state.ts).
 * `message` says in words what happened (kept on the attempt and in the event). `stop`: the attempt
 * may still be alive on its substrate (e.g. Slurm requeued it), so it is stopped there after the commit.
 */
import type { Task } from "./job"

export type Outcome =
  | { kind: "assigned"; attemptUid: string; target?: string; workerId?: string; submission?: string }
  | { kind: "building"; attemptUid: string }
  | { kind: "running"; attemptUid: string; target?: string }
  | { kind: "succeeded"; attemptUid: string; exitCode?: number }
  | {
      kind: "failed"
      attemptUid: string
      exitCode?: number
      reason: string
      message?: string
      stop?: boolean
    }
  | { kind: "worker_failed"; attemptUid: string; reason: string; message?: string; stop?: boolean }
  | { kind: "preempted"; attemptUid: string; reason: string; message?: string; stop?: boolean }
  | { kind: "killed"; reason: string; message?: string }
  | { kind: "unschedulable"; reason: string; message?: string }
  | { kind: "cosched_failed"; reason: string; message?: string }
  /** The substrate no longer runs this attempt, which the control plane had ended (`task.stopping`). */
  | { kind: "stopped"; attemptUid: string }

/** An outcome for one task, or a note of where a live replica listens. */
export type TaskReport =
  | { index: number; outcome: Outcome }
  | {
      index: number
      serving: {
        attemptUid: string
        endpoint?: string
        ready?: boolean
        target?: string
        progress?: Task["attempts"][number]["progress"]
        /** Why a running server is not serving; empty once it is again. */
        message?: string
        /** Why the submitted attempt still waits in the substrate's queue. */
        pendingReason?: string
        /** A try to submit it that did not reach the substrate, and when the next is due. */
        submitFailure?: { message: string; retryAt: string }
      }
    }
