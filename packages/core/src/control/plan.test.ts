import { expect, test } from "vitest"
import type { TaskRef } from "../backends/protocol"
import { type Job, JobSpec, type Task } from "../model/job"
import type { StoredItem } from "../store/port"
import {
  jobsToSettle,
  planLaunch,
  planPlacement,
  planTimeouts,
  readyToPlace,
  Snapshot,
  unsubmitted,
} from "./plan"

const now = Date.parse("2026-01-01T00:00:00Z")
const at = (ms: number) => new Date(ms).toISOString()

function job(id: string, counts: Job["counts"], extra: Partial<Job> = {}, spec: Partial<JobSpec> = {}): Job {
  return {
    id,
    project: "p",
    backendId: "b",
    spec: JobSpec.parse({ command: ["true"], tasks: 2, ...spec }),
    status: "RUNNING",
    counts,
    cancelRequested: false,
    createdAt: at(now - 60_000),
    updatedAt: at(now - 60_000),
    ...extra,
  }
}

function task(index: number, state: Task["state"], extra: Partial<Task> = {}): StoredItem<Task> {
  const attempts =
    state === "PENDING" ? [] : [{ attemptUid: `a-${index}`, state: "RUNNING" as const, startedAt: at(now) }]
  return {
    pk: "x",
    sk: String(index),
    type: "task",
    version: 3,
    data: { index, state, attempts, ...extra } as Task,
  }
}

function snapshot(jobs: Job[], tasks: [string, StoredItem<Task>][]): Snapshot {
  return new Snapshot(
    [],
    new Map(jobs.map((j) => [j.id, j])),
    tasks.map(([jobId, task]) => ({ jobId, task })),
    0,
  )
}

test("a job at rest is left alone; one whose counts disagree with its open tasks is recounted after the pass's writes", () => {
  const s = snapshot(
    [job("rest", { RUNNING: 1, SUCCEEDED: 1 }), job("moved", { RUNNING: 2 })],
    [
      ["rest", task(0, "RUNNING")],
      ["moved", task(0, "RUNNING")],
      ["moved", task(1, "PENDING")],
    ],
  )
  expect(jobsToSettle(s)).toEqual({ settle: new Set(), recount: new Set(["moved"]) })
})

test("cancels, failures past tolerance and moved gangs are settled before placement", () => {
  const s = snapshot(
    [
      job("cancel", { RUNNING: 1, PENDING: 1 }, { cancelRequested: true }),
      job("failed", { FAILED: 1, RUNNING: 1 }, { status: "FAILED" }),
      job("gang", { RUNNING: 2 }, {}, { coscheduling: { groupBy: "tpu-name" } }),
      job("tolerated", { FAILED: 1, RUNNING: 1 }, {}, { maxTaskFailures: 1 }),
    ],
    [
      ["cancel", task(0, "RUNNING")],
      ["cancel", task(1, "PENDING")],
      ["failed", task(1, "RUNNING")],
      ["gang", task(0, "RUNNING")],
      ["gang", task(1, "PENDING")],
      ["tolerated", task(1, "RUNNING")],
    ],
  )
  expect(jobsToSettle(s)).toEqual({ settle: new Set(["cancel", "failed", "gang"]), recount: new Set() })
})

test("a job whose last open task ended with no recount (a crash between the writes) is recounted", () => {
  const s = snapshot([job("orphan", { RUNNING: 1, SUCCEEDED: 1 })], [])
  expect(jobsToSettle(s).recount).toEqual(new Set(["orphan"]))
})

test("the snapshot takes in the pass's writes: an ended task leaves it, a placed one is live with its new version", () => {
  const j = job("j", { PENDING: 2 })
  const s = snapshot(
    [j],
    [
      ["j", task(0, "PENDING")],
      ["j", task(1, "RUNNING")],
    ],
  )
  expect(s.pending()).toHaveLength(1)
  s.take("j", [{ ...task(0, "ASSIGNED"), version: 4 }, task(1, "SUCCEEDED")])
  expect(s.pending()).toHaveLength(0)
  expect(s.live().map((r) => [r.task.data.index, r.task.version])).toEqual([[0, 4]])
  expect([...s.known("j").keys()]).toEqual([0])
  // Where an attempt ran stays known after its task left, for the stop after the commit.
  expect(s.targets.has("a-1")).toBe(true)
})

test("timeouts, backoff and launch: each ref gets the write a user expects", () => {
  const j = job("j", { PENDING: 2 }, {}, { schedulingTimeoutS: 30 })
  const refs: TaskRef[] = [
    { job: j, task: task(0, "PENDING") },
    { job: j, task: task(1, "PENDING", { retryAt: at(now + 1000) }) },
  ]
  expect(planTimeouts(refs, now).map((e) => e.report)).toEqual([
    { index: 0, outcome: expect.objectContaining({ kind: "unschedulable", reason: "scheduling_timeout" }) },
    { index: 1, outcome: expect.objectContaining({ kind: "unschedulable" }) },
  ])
  expect(planTimeouts(refs, now - 45_000)).toEqual([])
  expect(readyToPlace(refs, now).map((r) => r.task.data.index)).toEqual([0])

  const assigned: TaskRef = { job: j, task: task(0, "ASSIGNED") }
  expect(unsubmitted([assigned], now)).toEqual([assigned])
  const launched = planLaunch(
    { launched: [], failed: [], deferred: [{ ref: assigned, message: "refused" }] },
    now,
  )
  expect(launched[0]!.report).toEqual({
    index: 0,
    serving: { attemptUid: "a-0", submitFailure: { message: "refused", retryAt: at(now + 5000) } },
  })
})

test("placement: a reason per waiting job, only when it changed", () => {
  const a = job("a", { PENDING: 2 }, { pendingReason: "no capacity" })
  const b = job("b", { PENDING: 1 })
  const ready: TaskRef[] = [
    { job: a, task: task(0, "PENDING") },
    { job: a, task: task(1, "PENDING") },
    { job: b, task: task(0, "PENDING") },
  ]
  const planned = planPlacement(
    {
      assignments: [{ ref: ready[0]!, attemptUid: "a-new", workerId: "w" }],
      preemptions: [],
      pendingReasons: new Map([
        ["a/1", "no capacity"],
        ["b/0", "needs 4 GPUs"],
      ]),
    },
    ready,
  )
  expect(planned.assignments.map((e) => e.report)).toEqual([
    { index: 0, outcome: { kind: "assigned", attemptUid: "a-new", workerId: "w" } },
  ])
  expect(planned.reasons).toEqual([{ jobId: "b", reason: "needs 4 GPUs" }])
})

test("a task whose last attempt is still being stopped is not placed, and a gang waits for all its members", () => {
  const j = job("j", { PENDING: 2 })
  const gang = job("g", { PENDING: 3 }, {}, { tasks: 3, coscheduling: {} })
  const stopping = { attemptUid: "a-1", since: at(now - 1000) }
  const refs: TaskRef[] = [
    { job: j, task: task(0, "PENDING") },
    { job: j, task: task(1, "PENDING", { stopping }) },
    { job: gang, task: task(0, "PENDING") },
    { job: gang, task: task(1, "PENDING", { stopping }) },
    { job: gang, task: task(2, "PENDING") },
  ]
  expect(readyToPlace(refs, now).map((r) => `${r.job.id}/${r.task.data.index}`)).toEqual(["j/0"])
  // One member backing off after its failure holds the gang too.
  const backoff: TaskRef[] = [
    { job: gang, task: task(0, "PENDING", { retryAt: at(now + 1000) }) },
    { job: gang, task: task(1, "PENDING") },
  ]
  expect(readyToPlace(backoff, now)).toEqual([])
  expect(readyToPlace(backoff, now + 1000)).toHaveLength(2)
})

test("the snapshot keeps an ended task while its attempt is being stopped, apart from the open ones", () => {
  const j = job("j", { RUNNING: 1 })
  const s = snapshot([j], [["j", task(0, "RUNNING")]])
  const killed = { ...task(0, "KILLED", { stopping: { attemptUid: "a-0", since: at(now) } }), version: 4 }
  s.take("j", [killed])
  expect(s.live()).toEqual([])
  expect(s.openCounts("j")).toEqual({})
  expect(s.stopping().map((r) => r.task.version)).toEqual([4])
  // A write on it (the confirmation) starts from its version, and once it lands the task leaves.
  expect(s.known("j").get(0)?.version).toBe(4)
  s.take("j", [{ ...task(0, "KILLED"), version: 5 }])
  expect(s.stopping()).toEqual([])
  expect(s.known("j").size).toBe(0)
})
