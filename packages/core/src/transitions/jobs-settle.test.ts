/**
 * `settle` in pages: a cancel or a failure past tolerance kills at most `limit` tasks per call, those
 * holding an attempt first, says whether tasks are left, and with the tasks in hand (`known`, a pass's
 * snapshot) reads none of them: the kills are written on their versions and the counts come from them.
 */
import { expect, test } from "vitest"
import { JobSpec } from "../model/job"
import { isTerminalTask } from "../model/states"
import { Repos } from "../store"
import { countingStore } from "../store/counting"
import { MemoryStore } from "../store/memory"
import { FakeClock } from "../util/clock"
import { memoryLogger } from "../util/logger"
import { InlineCancelTasks, JobTransitions } from "./jobs"

const Tasks = InlineCancelTasks + 50

async function setup(spec: Partial<JobSpec> = {}) {
  const counter = countingStore(MemoryStore())
  const clock = new FakeClock()
  const repos = Repos(counter.store, clock, memoryLogger(), "pepper")
  const jobs = JobTransitions({ jobs: repos.jobs, events: repos.events, clock })
  const job = await jobs.create(
    "p",
    "job-1",
    JobSpec.parse({ command: ["true"], tasks: Tasks, ...spec }),
    "pool",
  )
  // Tasks 120 and 130 run on a worker; the rest wait.
  for (const index of [120, 130]) {
    await jobs.applyReports(job, [
      { index, outcome: { kind: "assigned", attemptUid: `a-${index}`, workerId: "w-1" } },
    ])
    await jobs.applyReports(job, [{ index, outcome: { kind: "running", attemptUid: `a-${index}` } }])
  }
  await jobs.refresh("p", "job-1", "tasks_changed")
  const known = async () => {
    const open = (await repos.jobs.readTasks("p", "job-1")).filter((t) => !isTerminalTask(t.data.state))
    return new Map(open.map((t) => [t.data.index, t]))
  }
  return { counter, repos, jobs, known }
}

test("a cancel is settled a page at a time, the tasks holding an attempt first, without reading the tasks", async () => {
  const { counter, repos, jobs, known } = await setup()
  const marked = await jobs.cancel("p", "job-1")
  expect(marked).toMatchObject({ status: "RUNNING", cancelRequested: true, counts: { PENDING: Tasks - 2 } })

  const open = await known()
  counter.reset()
  const first = await jobs.settle("p", "job-1", undefined, { known: open, limit: 5 })
  expect(first).toMatchObject({ killed: 5, more: true, stop: ["a-120", "a-130"] })
  expect(first.items.map((t) => [t.data.index, t.data.state])).toEqual([
    [120, "KILLED"],
    [130, "KILLED"],
    [0, "KILLED"],
    [1, "KILLED"],
    [2, "KILLED"],
  ])
  expect(first.job).toMatchObject({ status: "PENDING", counts: { KILLED: 5, PENDING: Tasks - 5 } })
  // One read of the job; writes of the 5 tasks and the job; their events in one batch.
  expect(counter.counts.query).toBeUndefined()
  expect(counter.counts.get).toBe(1)
  expect(counter.counts.update).toBe(6)

  // Without the tasks in hand it reads them, and carries on where the page before stopped.
  const second = await jobs.settle("p", "job-1", undefined, { limit: 100 })
  expect(second).toMatchObject({ killed: 100, more: true })
  const rest = await jobs.settle("p", "job-1", undefined, { known: await known(), limit: 1000 })
  expect(rest).toMatchObject({ killed: Tasks - 105, more: false })
  expect(rest.job).toMatchObject({ status: "CANCELLED", counts: { KILLED: Tasks } })
  const events = (await repos.events.ofJob("p", "job-1", { limit: 1000 })).items
  expect(events.filter((e) => e.to === "KILLED" && e.reason === "cancelled")).toHaveLength(Tasks)
})

test("a job past its failure tolerance has the rest of its tasks killed a page at a time", async () => {
  const { repos, jobs, known } = await setup({ maxTaskFailures: 0, maxRetriesFailure: 0 })
  const job = (await repos.jobs.get("p", "job-1"))!
  await jobs.applyReports(job, [
    { index: 120, outcome: { kind: "failed", attemptUid: "a-120", reason: "exit_code", exitCode: 1 } },
  ])
  const failed = await jobs.refresh("p", "job-1", "tasks_ended")
  expect(failed).toMatchObject({ status: "FAILED" })

  const page = await jobs.settle("p", "job-1", undefined, { known: await known(), limit: 10 })
  expect(page).toMatchObject({ killed: 10, more: true, stop: ["a-130"] })
  const rest = await jobs.settle("p", "job-1", undefined, { known: await known(), limit: 1000 })
  expect(rest).toMatchObject({ killed: Tasks - 11, more: false })
  expect(rest.job).toMatchObject({ status: "FAILED", counts: { FAILED: 1, KILLED: Tasks - 1 } })
  const events = (await repos.events.ofJob("p", "job-1", { limit: 1000 })).items
  expect(events.filter((e) => e.to === "KILLED" && e.reason === "job_failed")).toHaveLength(Tasks - 1)
})
