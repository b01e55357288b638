import { describe, expect, test } from "vitest"
import type { Task } from "../model/job"
import type { JobStatus, TaskState } from "../model/states"
import { countsWithOpen, countTasks, deriveJobStatus, planKills, sameCounts } from "./job-status"
import { newTask } from "./task-state"

const spec = (maxTaskFailures = 0) => ({ maxTaskFailures, maxRetriesFailure: 0, maxRetriesPreemption: 100 })
const tasks = (...states: TaskState[]): Task[] =>
  states.map((state, index) => ({
    ...newTask(index, "2026-01-01T00:00:00.000Z"),
    state,
    attempts:
      state === "RUNNING" || state === "ASSIGNED" || state === "BUILDING"
        ? [{ attemptUid: `a-${index}`, state, createdAt: "2026-01-01T00:00:00.000Z" }]
        : [],
  }))

describe("deriveJobStatus", () => {
  const cases: [string, TaskState[], number, boolean, JobStatus][] = [
    ["all pending", ["PENDING", "PENDING"], 0, false, "PENDING"],
    ["one placed", ["ASSIGNED", "PENDING"], 0, false, "RUNNING"],
    ["one done, one pending", ["SUCCEEDED", "PENDING"], 0, false, "RUNNING"],
    ["all succeeded", ["SUCCEEDED", "SUCCEEDED"], 0, false, "SUCCEEDED"],
    ["one failed, none tolerated", ["FAILED", "RUNNING"], 0, false, "FAILED"],
    ["one failed, one tolerated, still running", ["FAILED", "RUNNING"], 1, false, "RUNNING"],
    [
      "one unschedulable, tolerated, nothing placed",
      ["UNSCHEDULABLE", "PENDING", "PENDING"],
      1,
      false,
      "PENDING",
    ],
    ["one failed, one tolerated, rest succeeded", ["FAILED", "SUCCEEDED"], 1, false, "SUCCEEDED"],
    ["unschedulable counts as failed", ["UNSCHEDULABLE", "SUCCEEDED"], 0, false, "FAILED"],
    ["cosched failure counts as failed", ["COSCHED_FAILED", "FAILED"], 1, false, "FAILED"],
    ["cancel requested, still running", ["RUNNING", "PENDING"], 0, true, "RUNNING"],
    ["cancelled", ["KILLED", "SUCCEEDED"], 0, true, "CANCELLED"],
    ["cancel requested after everything finished", ["SUCCEEDED", "SUCCEEDED"], 0, true, "SUCCEEDED"],
    ["killed without cancel (job failed)", ["KILLED", "SUCCEEDED"], 0, false, "FAILED"],
  ]
  for (const [name, states, tolerated, cancel, want] of cases) {
    test(name, () => {
      expect(
        deriveJobStatus({ maxTaskFailures: tolerated }, countTasks(tasks(...states)), states.length, cancel),
      ).toBe(want)
    })
  }
})

describe("planKills", () => {
  test("cancel kills every unfinished task and stops the live ones", () => {
    const result = planKills(
      spec(),
      tasks("RUNNING", "PENDING", "SUCCEEDED"),
      true,
      "2026-01-01T00:01:00.000Z",
    )
    expect(result.changed.map((t) => [t.index, t.state])).toEqual([
      [0, "KILLED"],
      [1, "KILLED"],
    ])
    expect(result.stop).toEqual(["a-0"])
  })

  test("failures past maxTaskFailures kill the rest", () => {
    const result = planKills(spec(0), tasks("FAILED", "RUNNING"), false, "2026-01-01T00:01:00.000Z")
    expect(result.changed.map((t) => t.state)).toEqual(["KILLED"])
    expect(result.changed[0]?.attempts.at(-1)?.reason).toBe("job_failed")
  })

  test("failures within tolerance kill nothing", () => {
    expect(planKills(spec(1), tasks("FAILED", "RUNNING"), false, "t").changed).toEqual([])
  })
})

describe("counts from ended counts and open tasks", () => {
  test("ended tasks come from the stored counts, open ones from what is seen now", () => {
    expect(countsWithOpen({ SUCCEEDED: 2, RUNNING: 3 }, { RUNNING: 1, PENDING: 2 }, 5)).toEqual({
      SUCCEEDED: 2,
      RUNNING: 1,
      PENDING: 2,
    })
  })
  test("a task that ended unseen since the stored count: they do not add up, so count every task", () => {
    expect(countsWithOpen({ SUCCEEDED: 2, RUNNING: 3 }, { RUNNING: 2 }, 5)).toBeUndefined()
  })
  test("the same counts in another key order, or with zeros, are the same", () => {
    expect(sameCounts({ RUNNING: 1, PENDING: 0, SUCCEEDED: 2 }, { SUCCEEDED: 2, RUNNING: 1 })).toBe(true)
    expect(sameCounts({ RUNNING: 1 }, { RUNNING: 2 })).toBe(false)
  })
})
