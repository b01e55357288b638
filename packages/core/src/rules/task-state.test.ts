import { describe, expect, test } from "vitest"
import type { Task } from "../model/job"
import { type TaskState, TaskStates } from "../model/states"
import {
  applyGangOutcome,
  applyOutcome,
  canTransition,
  failureBackoffMs,
  MaxAttemptsKept,
  newTask,
  noteServing,
  type Outcome,
  waitingForStop,
} from "./task-state"

const now = "2026-01-01T00:00:10.000Z"
const policy = { maxRetriesFailure: 1, maxRetriesPreemption: 1 }

/** Builder: a task in `state` whose current attempt is `uid` (when live). */
function task(
  state: TaskState,
  opts: { uid?: string; failures?: number; preemptions?: number; index?: number } = {},
): Task {
  const t = newTask(opts.index ?? 0, "2026-01-01T00:00:00.000Z")
  const live = state === "ASSIGNED" || state === "BUILDING" || state === "RUNNING"
  return {
    ...t,
    state,
    failureCount: opts.failures ?? 0,
    preemptionCount: opts.preemptions ?? 0,
    attempts: live ? [{ attemptUid: opts.uid ?? "a-1", state, createdAt: t.updatedAt }] : [],
  }
}

describe("legal transitions", () => {
  const legal: [TaskState, TaskState][] = [
    ["PENDING", "ASSIGNED"],
    ["PENDING", "UNSCHEDULABLE"],
    ["PENDING", "KILLED"],
    ["ASSIGNED", "BUILDING"],
    ["ASSIGNED", "RUNNING"],
    ["BUILDING", "RUNNING"],
    ["RUNNING", "SUCCEEDED"],
    ["RUNNING", "PENDING"],
    ["RUNNING", "FAILED"],
    ["RUNNING", "WORKER_FAILED"],
    ["RUNNING", "PREEMPTED"],
    ["RUNNING", "KILLED"],
    ["RUNNING", "COSCHED_FAILED"],
  ]
  const illegal: [TaskState, TaskState][] = [
    ["PENDING", "RUNNING"],
    ["PENDING", "SUCCEEDED"],
    ["RUNNING", "ASSIGNED"],
    ["RUNNING", "BUILDING"],
    ["SUCCEEDED", "PENDING"],
    ["FAILED", "PENDING"],
    ["KILLED", "RUNNING"],
    ["UNSCHEDULABLE", "ASSIGNED"],
  ]
  for (const [from, to] of legal)
    test(`${from} → ${to} is legal`, () => expect(canTransition(from, to)).toBe(true))
  for (const [from, to] of illegal)
    test(`${from} → ${to} is illegal`, () => expect(canTransition(from, to)).toBe(false))

  test("no terminal state has a way out", () => {
    for (const s of [
      "SUCCEEDED",
      "FAILED",
      "KILLED",
      "WORKER_FAILED",
      "PREEMPTED",
      "UNSCHEDULABLE",
      "COSCHED_FAILED",
    ] as const)
      expect(TaskStates.filter((to) => canTransition(s, to))).toEqual([])
  })
})

describe("applyOutcome", () => {
  const cases: Record<
    string,
    {
      from: Task
      outcome: Outcome
      state: TaskState
      attempt?: string
      failures?: number
      preemptions?: number
      stop?: string[]
    }
  > = {
    "placement mints an attempt": {
      from: task("PENDING"),
      outcome: { kind: "assigned", attemptUid: "a-9", target: "w-1" },
      state: "ASSIGNED",
      attempt: "ASSIGNED",
    },
    "running from assigned": {
      from: task("ASSIGNED"),
      outcome: { kind: "running", attemptUid: "a-1" },
      state: "RUNNING",
      attempt: "RUNNING",
    },
    success: {
      from: task("RUNNING"),
      outcome: { kind: "succeeded", attemptUid: "a-1", exitCode: 0 },
      state: "SUCCEEDED",
      attempt: "SUCCEEDED",
    },
    "failure with budget left retries": {
      from: task("RUNNING"),
      outcome: { kind: "failed", attemptUid: "a-1", exitCode: 3, reason: "exit_code" },
      state: "PENDING",
      attempt: "FAILED",
      failures: 1,
    },
    "failure past the budget is final": {
      from: task("RUNNING", { failures: 1 }),
      outcome: { kind: "failed", attemptUid: "a-1", exitCode: 3, reason: "exit_code" },
      state: "FAILED",
      attempt: "FAILED",
      failures: 2,
    },
    "worker loss uses the preemption budget": {
      from: task("RUNNING"),
      outcome: { kind: "worker_failed", attemptUid: "a-1", reason: "worker_lost" },
      state: "PENDING",
      attempt: "WORKER_FAILED",
      preemptions: 1,
    },
    "worker loss past the budget is final": {
      from: task("RUNNING", { preemptions: 1 }),
      outcome: { kind: "worker_failed", attemptUid: "a-1", reason: "worker_lost" },
      state: "WORKER_FAILED",
      preemptions: 2,
    },
    "preemption while running uses the budget": {
      from: task("RUNNING"),
      outcome: { kind: "preempted", attemptUid: "a-1", reason: "preempted" },
      state: "PENDING",
      attempt: "PREEMPTED",
      preemptions: 1,
    },
    "preemption past the budget is final": {
      from: task("BUILDING", { preemptions: 1 }),
      outcome: { kind: "preempted", attemptUid: "a-1", reason: "preempted" },
      state: "PREEMPTED",
      preemptions: 2,
    },
    "preemption while only assigned always returns, free": {
      from: task("ASSIGNED", { preemptions: 1 }),
      outcome: { kind: "preempted", attemptUid: "a-1", reason: "preempted" },
      state: "PENDING",
      attempt: "PREEMPTED",
      preemptions: 1,
    },
    "kill of a running task stops its attempt": {
      from: task("RUNNING"),
      outcome: { kind: "killed", reason: "cancelled" },
      state: "KILLED",
      attempt: "KILLED",
      stop: ["a-1"],
    },
    "kill of a pending task stops nothing": {
      from: task("PENDING"),
      outcome: { kind: "killed", reason: "cancelled" },
      state: "KILLED",
      stop: [],
    },
    "scheduling timeout": {
      from: task("PENDING"),
      outcome: { kind: "unschedulable", reason: "timeout", message: "needs 8 gpu" },
      state: "UNSCHEDULABLE",
    },
  }
  for (const [name, tc] of Object.entries(cases)) {
    test(name, () => {
      const result = applyOutcome(tc.from, tc.outcome, policy, now)
      expect(result.changed).toBe(true)
      expect(result.task.state).toBe(tc.state)
      if (tc.attempt) expect(result.task.attempts.at(-1)?.state).toBe(tc.attempt)
      if (tc.failures !== undefined) expect(result.task.failureCount).toBe(tc.failures)
      if (tc.preemptions !== undefined) expect(result.task.preemptionCount).toBe(tc.preemptions)
      if (tc.stop) expect(result.stop).toEqual(tc.stop)
      expect(result.task.updatedAt).toBe(now)
    })
  }

  const ignored: Record<string, { from: Task; outcome: Outcome }> = {
    "a report about an older attempt": {
      from: task("RUNNING", { uid: "a-2" }),
      outcome: { kind: "failed", attemptUid: "a-1", reason: "exit_code" },
    },
    "a report after the task is final": {
      from: task("SUCCEEDED"),
      outcome: { kind: "failed", attemptUid: "a-1", reason: "x" },
    },
    "an assignment of a task already placed": {
      from: task("RUNNING"),
      outcome: { kind: "assigned", attemptUid: "a-3" },
    },
    "an unschedulable verdict on a placed task": {
      from: task("ASSIGNED"),
      outcome: { kind: "unschedulable", reason: "timeout" },
    },
    "a kill of a finished task": { from: task("FAILED"), outcome: { kind: "killed", reason: "cancelled" } },
    "a report for a pending task": { from: task("PENDING"), outcome: { kind: "running", attemptUid: "a-1" } },
  }
  for (const [name, tc] of Object.entries(ignored)) {
    test(`ignores ${name}`, () => {
      const result = applyOutcome(tc.from, tc.outcome, policy, now)
      expect(result.changed).toBe(false)
      expect(result.task).toBe(tc.from)
    })
  }

  test("only the newest attempts are kept, however many retries the budget allows", () => {
    let t = task("PENDING")
    const generous = { maxRetriesFailure: 100, maxRetriesPreemption: 100 }
    for (let i = 0; i < 70; i++) {
      t = applyOutcome(t, { kind: "assigned", attemptUid: `a-${i}` }, generous, now).task
      t = applyOutcome(t, { kind: "failed", attemptUid: `a-${i}`, reason: "exit_code" }, generous, now).task
    }
    expect(t.attempts).toHaveLength(MaxAttemptsKept)
    expect(t.attempts.at(-1)?.attemptUid).toBe("a-69")
    expect(t.failureCount).toBe(70)
  })

  test("a retried task keeps its history and the next placement adds a new attempt", () => {
    let t = applyOutcome(
      task("RUNNING"),
      { kind: "failed", attemptUid: "a-1", exitCode: 3, reason: "exit_code" },
      policy,
      now,
    ).task
    t = applyOutcome(t, { kind: "assigned", attemptUid: "a-2" }, policy, now).task
    expect(t.attempts.map((a) => [a.attemptUid, a.state, a.exitCode])).toEqual([
      ["a-1", "FAILED", 3],
      ["a-2", "ASSIGNED", undefined],
    ])
  })
})

describe("gang rules", () => {
  const gang = () => [
    task("RUNNING", { index: 0, uid: "g-0" }),
    task("RUNNING", { index: 1, uid: "g-1" }),
    task("PENDING", { index: 2 }),
  ]

  test("a retriable failure sends every live sibling back to PENDING and stops their attempts", () => {
    const result = applyGangOutcome(
      gang(),
      0,
      { kind: "failed", attemptUid: "g-0", exitCode: 1, reason: "exit_code" },
      policy,
      now,
    )
    expect(result.tasks.map((t) => t.state)).toEqual(["PENDING", "PENDING", "PENDING"])
    expect(result.stop).toEqual(["g-1"])
    expect(result.tasks[1]?.failureCount).toBe(0)
    expect(result.tasks[1]?.attempts.at(-1)?.reason).toBe("gang_retry")
  })

  test("a terminal failure marks every other unfinished task COSCHED_FAILED", () => {
    const tasks = gang()
    tasks[0] = task("RUNNING", { index: 0, uid: "g-0", failures: 1 })
    const result = applyGangOutcome(
      tasks,
      0,
      { kind: "failed", attemptUid: "g-0", exitCode: 1, reason: "exit_code" },
      policy,
      now,
    )
    expect(result.tasks.map((t) => t.state)).toEqual(["FAILED", "COSCHED_FAILED", "COSCHED_FAILED"])
    expect(result.stop).toEqual(["g-1"])
  })

  test("an unschedulable member fails the gang: the others can no longer be placed together", () => {
    const tasks = [
      task("PENDING", { index: 0 }),
      task("PENDING", { index: 1 }),
      task("PENDING", { index: 2 }),
    ]
    const result = applyGangOutcome(
      tasks,
      1,
      { kind: "unschedulable", reason: "timeout", message: "needs 8 gpu" },
      policy,
      now,
    )
    expect(result.tasks.map((t) => t.state)).toEqual(["COSCHED_FAILED", "UNSCHEDULABLE", "COSCHED_FAILED"])
  })

  test("a success touches no sibling", () => {
    const result = applyGangOutcome(gang(), 1, { kind: "succeeded", attemptUid: "g-1" }, policy, now)
    expect(result.tasks.map((t) => t.state)).toEqual(["RUNNING", "SUCCEEDED", "PENDING"])
    expect(result.changed).toEqual([1])
  })

  test("a stale report changes nothing in the gang", () => {
    const result = applyGangOutcome(
      gang(),
      0,
      { kind: "failed", attemptUid: "old", reason: "exit_code" },
      policy,
      now,
    )
    expect(result.changed).toEqual([])
  })
})

describe("notes on the current attempt", () => {
  test("a queued submission's reason is kept on the ASSIGNED task, and cleared when it starts", () => {
    const assigned = task("ASSIGNED", { uid: "a-1" })
    const noted = noteServing(
      assigned,
      { attemptUid: "a-1", pendingReason: "Slurm: waiting for resources" },
      now,
    )
    expect(noted.changed).toBe(true)
    expect(noted.task.pendingReason).toBe("Slurm: waiting for resources")
    expect(
      noteServing(noted.task, { attemptUid: "a-1", pendingReason: "Slurm: waiting for resources" }, now)
        .changed,
    ).toBe(false)
    const running = applyOutcome(noted.task, { kind: "running", attemptUid: "a-1" }, policy, now)
    expect(running.task.state).toBe("RUNNING")
    expect(running.task.pendingReason).toBeUndefined()
    // A late note about the queue does not bring it back once it runs.
    expect(
      noteServing(running.task, { attemptUid: "a-1", pendingReason: "Slurm: queued" }, now).task
        .pendingReason,
    ).toBeUndefined()
  })

  test("a note about another attempt changes nothing", () => {
    const assigned = task("ASSIGNED", { uid: "a-2" })
    expect(
      noteServing(assigned, { attemptUid: "a-1", pendingReason: "x", progress: { done: 1, failed: 0 } }, now)
        .changed,
    ).toBe(false)
  })

  test("progress lands on the attempt, and an unchanged report writes nothing", () => {
    const running = task("RUNNING", { uid: "a-1" })
    const noted = noteServing(running, { attemptUid: "a-1", progress: { done: 5, failed: 1, total: 9 } }, now)
    expect(noted.task.attempts.at(-1)?.progress).toEqual({ done: 5, failed: 1, total: 9 })
    expect(
      noteServing(noted.task, { attemptUid: "a-1", progress: { done: 5, failed: 1, total: 9 } }, now).changed,
    ).toBe(false)
  })
})

describe("what the substrate said, and what is still alive there", () => {
  test("an outcome's message is kept on the attempt; `stop` asks for the attempt to be stopped after the commit", () => {
    const requeued = applyOutcome(
      task("RUNNING"),
      { kind: "preempted", attemptUid: "a-1", reason: "requeued", message: "Slurm requeued it", stop: true },
      policy,
      now,
    )
    expect(requeued.task.state).toBe("PENDING")
    expect(requeued.task.attempts[0]).toMatchObject({ state: "PREEMPTED", message: "Slurm requeued it" })
    expect(requeued.stop).toEqual(["a-1"])
    const ended = applyOutcome(
      task("RUNNING"),
      {
        kind: "failed",
        attemptUid: "a-1",
        reason: "cancelled_on_cluster",
        message: "cancelled on the cluster",
      },
      policy,
      now,
    )
    expect(ended.stop).toEqual([])
    expect(ended.task.attempts[0]!.message).toBe("cancelled on the cluster")
  })

  test("a submit that did not reach the substrate is counted and told, until the attempt gets its target", () => {
    const failed = noteServing(
      task("ASSIGNED"),
      {
        attemptUid: "a-1",
        submitFailure: { message: "connection refused", retryAt: "2026-01-01T00:00:20.000Z" },
      },
      now,
    ).task
    expect(failed.attempts[0]).toMatchObject({ submitFailures: 1, retryAt: "2026-01-01T00:00:20.000Z" })
    expect(failed.pendingReason).toBe(
      "not submitted yet (try 1): connection refused; next try at 2026-01-01T00:00:20.000Z",
    )
    const again = noteServing(
      failed,
      { attemptUid: "a-1", submitFailure: { message: "refused", retryAt: "2026-01-01T00:00:30.000Z" } },
      now,
    ).task
    expect(again.attempts[0]!.submitFailures).toBe(2)
    const submitted = noteServing(again, { attemptUid: "a-1", target: "31_0" }, now).task
    expect(submitted.pendingReason).toBeUndefined()
    expect(submitted.attempts[0]!.target).toBe("31_0")
    // A stale note (another attempt) changes nothing.
    expect(
      noteServing(again, { attemptUid: "a-0", submitFailure: { message: "x", retryAt: now } }, now).changed,
    ).toBe(false)
  })
})

describe("failing attempts back off", () => {
  test("2 s after the first failure, doubling, at most 5 min", () => {
    expect([1, 2, 3, 8, 9, 20].map(failureBackoffMs)).toEqual([
      2_000, 4_000, 8_000, 256_000, 300_000, 300_000,
    ])
  })

  test("a retried task waits until retryAt and says why; its next placement clears both", () => {
    const failed = applyOutcome(
      task("RUNNING"),
      {
        kind: "failed",
        attemptUid: "a-1",
        reason: "start_failed",
        exitCode: 127,
        message: "exited with code 127",
      },
      policy,
      now,
    ).task
    expect(failed).toMatchObject({ state: "PENDING", retryAt: "2026-01-01T00:00:12.000Z" })
    expect(failed.pendingReason).toBe(
      "retrying after failure 1 of 2: exited with code 127; next try at 2026-01-01T00:00:12.000Z",
    )
    const placed = applyOutcome(failed, { kind: "assigned", attemptUid: "a-2" }, policy, now).task
    expect(placed.retryAt).toBeUndefined()
    expect(placed.pendingReason).toBeUndefined()
    // The last failure of the budget is final: no retry, no wait.
    const final = applyOutcome(
      { ...task("RUNNING"), failureCount: 1 },
      { kind: "failed", attemptUid: "a-1", reason: "exit_code", exitCode: 1 },
      policy,
      now,
    ).task
    expect(final).toMatchObject({ state: "FAILED" })
    expect(final.retryAt).toBeUndefined()
  })
})

describe("an ended attempt that may still run holds its task until the substrate says it stopped", () => {
  test("a preemption, a kill and a gang retry mark the attempt `stopping`; a PENDING task says why it waits", () => {
    const preempted = applyOutcome(
      task("RUNNING"),
      { kind: "preempted", attemptUid: "a-1", reason: "priority", stop: true },
      policy,
      now,
    ).task
    expect(preempted).toMatchObject({ state: "PENDING", stopping: { attemptUid: "a-1", since: now } })
    expect(preempted.pendingReason).toBe(waitingForStop("a-1"))

    const killed = applyOutcome(task("RUNNING"), { kind: "killed", reason: "cancelled" }, policy, now).task
    expect(killed).toMatchObject({ state: "KILLED", stopping: { attemptUid: "a-1" } })

    const gang = applyGangOutcome(
      [task("RUNNING", { index: 0, uid: "g-0" }), task("RUNNING", { index: 1, uid: "g-1" })],
      0,
      { kind: "failed", attemptUid: "g-0", exitCode: 1, reason: "exit_code" },
      policy,
      now,
    )
    // The failed one ended by itself; its sibling was ended by the control plane while it ran.
    expect(gang.tasks[0]?.stopping).toBeUndefined()
    expect(gang.tasks[1]).toMatchObject({ state: "PENDING", stopping: { attemptUid: "g-1" } })
  })

  test("an attempt that ended by itself, or a task that never ran, waits for nothing", () => {
    for (const outcome of [
      { kind: "failed", attemptUid: "a-1", exitCode: 1, reason: "exit_code" },
      { kind: "succeeded", attemptUid: "a-1" },
      { kind: "worker_failed", attemptUid: "a-1", reason: "worker_lost" },
    ] as Outcome[])
      expect(applyOutcome(task("RUNNING"), outcome, policy, now).task.stopping).toBeUndefined()
    expect(
      applyOutcome(task("PENDING"), { kind: "killed", reason: "cancelled" }, policy, now).task.stopping,
    ).toBeUndefined()
  })

  test("it is not placed again until then; `stopped` of that attempt frees it, of another changes nothing", () => {
    const waiting = applyOutcome(
      task("RUNNING"),
      { kind: "preempted", attemptUid: "a-1", reason: "priority", stop: true },
      policy,
      now,
    ).task
    expect(applyOutcome(waiting, { kind: "assigned", attemptUid: "a-2" }, policy, now).changed).toBe(false)
    expect(applyOutcome(waiting, { kind: "stopped", attemptUid: "a-0" }, policy, now).changed).toBe(false)
    const freed = applyOutcome(waiting, { kind: "stopped", attemptUid: "a-1" }, policy, now)
    expect(freed.changed).toBe(true)
    expect(freed.task.stopping).toBeUndefined()
    expect(freed.task.pendingReason).toBeUndefined()
    expect(freed.task.state).toBe("PENDING")
    expect(applyOutcome(freed.task, { kind: "assigned", attemptUid: "a-2" }, policy, now).task.state).toBe(
      "ASSIGNED",
    )
    // A KILLED task keeps its state; only the mark goes.
    const killed = applyOutcome(task("RUNNING"), { kind: "killed", reason: "cancelled" }, policy, now).task
    const done = applyOutcome(killed, { kind: "stopped", attemptUid: "a-1" }, policy, now).task
    expect(done.state).toBe("KILLED")
    expect(done.stopping).toBeUndefined()
  })
})
