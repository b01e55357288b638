import { describe, expect, test } from "vitest"
import type { Task } from "../../model/job"
import type { TaskRef } from "../protocol"
import { LostAfterMs, type Observed, observeStopping, observeTasks } from "./observe"
import { parseSqueue } from "./parse"

const now = Date.parse("2026-12-01T12:00:00Z")

/** A live task whose attempt went out as `sp-s-1#<index>` and got Slurm id `31_<index>`. */
function ref(state: Task["state"], index = 0, createdAt = "2026-12-01T11:59:00Z"): TaskRef {
  return {
    job: { id: "job-1", spec: { tasks: 2 } } as TaskRef["job"],
    task: {
      pk: "p",
      sk: `t${index}`,
      type: "task",
      version: 1,
      data: {
        index,
        state,
        failureCount: 0,
        preemptionCount: 0,
        updatedAt: createdAt,
        attempts: [
          {
            attemptUid: `a-${index}`,
            state: state === "RUNNING" ? "RUNNING" : "ASSIGNED",
            submission: `sp-s-1#${index}`,
            target: `31_${index}`,
            createdAt,
          },
        ],
      },
    } as TaskRef["task"],
  }
}

/** squeue lines in SQUEUE_FORMAT, as the cluster prints them. */
const row = (index: number, state: string, reason = "None") =>
  `31_${index}|31|${index}|sp-s-1|${state}|${reason}|0:05|10:00|debug|vm|1|1|1G|N/A`

const seen = (lines: string[], extra: Partial<Observed> = {}): Observed => ({
  rows: parseSqueue(lines.join("\n")),
  records: [],
  sacct: new Map(),
  progress: new Map(),
  ...extra,
})

describe("what Slurm says, told truthfully", () => {
  test("an admin's scancel of a live attempt is a failure on the cluster, not a silent KILLED", () => {
    const { transitions } = observeTasks([ref("RUNNING")], seen([row(0, "CANCELLED")]), now)
    expect(transitions[0]!.outcome).toMatchObject({
      kind: "failed",
      attemptUid: "a-0",
      reason: "cancelled_on_cluster",
      message: expect.stringContaining("not through swarmplane"),
    })
  })

  test("a run Slurm put back in its queue after it started is preempted and stopped, never left RUNNING", () => {
    const { transitions, waiting } = observeTasks(
      [ref("RUNNING")],
      seen([row(0, "PENDING", "BeginTime")]),
      now,
    )
    expect(waiting).toEqual([])
    expect(transitions[0]!.outcome).toMatchObject({ kind: "preempted", reason: "requeued", stop: true })
  })

  test("a submitted attempt that has not started waits with Slurm's reason", () => {
    const { transitions, waiting } = observeTasks(
      [ref("ASSIGNED")],
      seen([row(0, "PENDING", "Resources")]),
      now,
    )
    expect(transitions).toEqual([])
    expect(waiting![0]!.reason).toBe("Slurm: waiting for resources")
  })

  test("a node failure is a worker failure", () => {
    const { transitions } = observeTasks([ref("RUNNING")], seen([row(0, "NODE_FAIL", "NodeDown")]), now)
    expect(transitions[0]!.outcome).toMatchObject({ kind: "worker_failed", reason: "node_fail" })
  })

  test("tasks of an array gone from the queue end as their exit files say, not as lost", () => {
    const exits = new Map([
      ["sp-s-1_0", 0],
      ["sp-s-1_1", 4],
    ])
    const old = "2026-12-01T11:00:00Z"
    const { transitions } = observeTasks(
      [ref("RUNNING", 0, old), ref("RUNNING", 1, old)],
      seen([], { exits }),
      now,
    )
    expect(transitions.map((t) => t.outcome)).toMatchObject([
      { kind: "succeeded", exitCode: 0 },
      { kind: "failed", exitCode: 4, reason: "exit_code" },
    ])
  })

  test("an attempt gone without a trace is lost after a while, not before", () => {
    const recent = observeTasks([ref("RUNNING", 0, new Date(now - 1000).toISOString())], seen([]), now)
    expect(recent.transitions).toEqual([])
    const old = observeTasks(
      [ref("RUNNING", 0, new Date(now - LostAfterMs - 1).toISOString())],
      seen([]),
      now,
    )
    expect(old.transitions[0]!.outcome).toMatchObject({ kind: "worker_failed", reason: "lost" })
  })

  test("a pending remainder row stands for each of its tasks", () => {
    const pending = "31_[0-1]|31|0-1|sp-s-1|PENDING|Priority|0:00|10:00|debug||1|1|1G|N/A"
    const { waiting } = observeTasks([ref("ASSIGNED", 0), ref("ASSIGNED", 1)], seen([pending]), now)
    expect(waiting!.map((w) => w.reason)).toEqual([
      "Slurm: waiting behind higher-priority jobs",
      "Slurm: waiting behind higher-priority jobs",
    ])
  })
})

describe("what swarmplane ended and Slurm may still run", () => {
  /** A task KILLED in the store whose attempt (`31_<index>`, or no id yet) is being stopped. */
  const stopping = (index: number, target: string | undefined = `31_${index}`): TaskRef => {
    const r = ref("RUNNING", index)
    const { target: _, ...rest } = r.task.data.attempts[0]!
    const attempt = { ...rest, state: "KILLED" as const, ...(target ? { target } : {}) }
    return {
      ...r,
      task: {
        ...r.task,
        data: {
          ...r.task.data,
          state: "KILLED",
          attempts: [attempt],
          stopping: { attemptUid: `a-${index}`, since: "2026-12-01T11:59:30Z" },
        },
      },
    }
  }

  test("gone from the queue, or ended there: stopped; still running or waiting: cancelled again", () => {
    const out = observeStopping(
      [stopping(0), stopping(1), stopping(2), stopping(3)],
      parseSqueue([row(0, "RUNNING"), row(1, "CANCELLED"), row(2, "PENDING", "Priority")].join("\n")),
    )
    expect(out.unstopped.map((u) => [u.ref.task.data.index, u.target])).toEqual([
      [0, "31_0"],
      [2, "31_2"],
    ])
    expect(out.transitions.map((t) => t.outcome)).toEqual([
      { kind: "stopped", attemptUid: "a-1" },
      { kind: "stopped", attemptUid: "a-3" },
    ])
  })

  test("an attempt whose Slurm id the store never learned (its sbatch answer was lost) is found by its name", () => {
    const out = observeStopping([stopping(1, undefined)], parseSqueue(row(1, "RUNNING")))
    expect(out.unstopped.map((u) => u.target)).toEqual(["31_1"])
    // In a pending array's rest (`31_[1-3]`) too.
    const rest = "31_[1-3]|31|1-3|sp-s-1|PENDING|Priority|0:00|10:00|debug||1|1|1G|N/A"
    expect(observeStopping([stopping(2, undefined)], parseSqueue(rest)).unstopped[0]?.target).toBe("31_2")
    // Never on the cluster at all: nothing to wait for.
    expect(observeStopping([stopping(1, undefined)], []).transitions[0]?.outcome.kind).toBe("stopped")
  })
})
