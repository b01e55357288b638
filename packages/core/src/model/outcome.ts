/**
 * Outcomes: what was observed or decided about a task's current attempt. Backends produce them (in
 * reconcile results), the control loop applies them with the task state machine (control/task-state.ts).
 */

export type Outcome =
  | { kind: "assigned"; attemptUid: string; target?: string; workerId?: string; submission?: string }
  | { kind: "building"; attemptUid: string }
  | { kind: "running"; attemptUid: string; target?: string }
  | { kind: "succeeded"; attemptUid: string; exitCode?: number }
  | { kind: "failed"; attemptUid: string; exitCode?: number; reason: string; message?: string }
  | { kind: "worker_failed"; attemptUid: string; reason: string; message?: string }
  | { kind: "preempted"; attemptUid: string; reason: string; message?: string }
  | { kind: "killed"; reason: string; message?: string }
  | { kind: "unschedulable"; reason: string; message?: string }
  | { kind: "cosched_failed"; reason: string; message?: string }
