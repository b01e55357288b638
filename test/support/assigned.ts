/**
 * Test support: a backend's schedule result as the control loop persists it before launching, each
 * placed task ASSIGNED with its one new attempt (its submission from the plan), for suites and benches
 * that drive a backend's `launch` by hand.
 */
import type { ScheduleResult, TaskRef } from "@swarmplane/core/backends/protocol"

export function assignedRefs(plan: ScheduleResult, createdAt = new Date().toISOString()): TaskRef[] {
  return plan.assignments.map((a) => ({
    job: a.ref.job,
    task: {
      ...a.ref.task,
      data: {
        ...a.ref.task.data,
        state: "ASSIGNED",
        attempts: [{ attemptUid: a.attemptUid, state: "ASSIGNED", submission: a.submission!, createdAt }],
      },
    },
  }))
}
