import { expect, test } from "vitest"
import { BackendConfig } from "../model/backend"
import { JobSpec } from "../model/job"
import { MemoryQueue } from "../queue/memory"
import { parseScheduleRequest } from "../queue/port"
import { handleScheduleBatch, type ScheduleMessage } from "./schedule"
import { memoryRuntime } from "./testing/runtime"
import { fanOutTicks, TickReason } from "./ticks"

async function setup() {
  const { rt, logger, clock } = memoryRuntime()
  // Count the passes tried: each asks for the backend's reconcile lease once (a pass that finds it
  // held by another does nothing, but still reads the backend and asks).
  const passes: string[] = []
  const acquire = rt.repos.leases.acquire.bind(rt.repos.leases)
  rt.repos.leases.acquire = async (project, id, kind, owner, ttlMs) => {
    if (kind === "reconcile") passes.push(id)
    return acquire(project, id, kind, owner, ttlMs)
  }
  for (const id of ["a", "b"]) {
    await rt.repos.backends.put("p", id, BackendConfig.parse({ type: "workers" }))
    await rt.repos.workers.register("p", {
      backendId: id,
      resources: { cpu: 16, memoryMiB: 16384, gpu: 0 },
      attributes: {},
    })
  }
  return { rt, logger, clock, passes }
}

const message = (id: string, body: object | string): ScheduleMessage => ({
  id,
  body: typeof body === "string" ? body : JSON.stringify(body),
  receiveCount: 1,
})

test("a batch runs one pass per backend it names, and places every job of it", async () => {
  const { rt, passes } = await setup()
  const messages: ScheduleMessage[] = []
  for (let i = 0; i < 8; i++) {
    const backendId = i < 6 ? "a" : "b"
    await rt.transitions.jobs.create(
      "p",
      `job-${i}`,
      JobSpec.parse({ command: ["true"], tasks: 1 }),
      backendId,
    )
    // Two requests without their backend, as an older version sent them: looked up, then grouped.
    const request = { kind: "job", project: "p", id: `job-${i}`, reason: "job.created" }
    messages.push(message(`m-${i}`, i % 3 === 0 ? request : { ...request, backendId }))
  }
  expect(await handleScheduleBatch(rt, messages)).toEqual({ retry: [] })
  expect(passes.sort()).toEqual(["a", "b"])
  for (let i = 0; i < 8; i++) {
    const { tasks } = (await rt.repos.jobs.load("p", `job-${i}`))!
    expect(tasks.map((t) => t.data.state)).toEqual(["ASSIGNED"])
  }
})

test("a malformed message or one whose object is gone is dropped; the rest still pass", async () => {
  const { rt, passes, logger } = await setup()
  await rt.transitions.jobs.create("p", "job-1", JobSpec.parse({ command: ["true"], tasks: 1 }), "a")
  const result = await handleScheduleBatch(rt, [
    message("m-bad", "not json"),
    message("m-gone", { kind: "job", project: "p", id: "no-such-job", reason: "job.created" }),
    message("m-ok", { kind: "job", project: "p", id: "job-1", reason: "job.created", backendId: "a" }),
  ])
  expect(result).toEqual({ retry: [] })
  expect(passes).toEqual(["a"])
  expect(logger.entries.some((e) => /malformed schedule request/.test(e.message))).toBe(true)
  expect((await rt.repos.jobs.load("p", "job-1"))!.tasks[0]?.data.state).toBe("ASSIGNED")
})

test("when a backend's pass fails, every request of that backend is retried and the other's are not", async () => {
  const { rt } = await setup()
  const get = rt.repos.backends.get.bind(rt.repos.backends)
  rt.repos.backends.get = async (project, id) => {
    if (id === "b") throw Object.assign(new Error("store throttled"), { name: "ThrottlingException" })
    return get(project, id)
  }
  const request = (id: string, backendId: string) => ({
    kind: "job",
    project: "p",
    id,
    reason: "job.created",
    backendId,
  })
  const result = await handleScheduleBatch(rt, [
    message("m-a", request("x", "a")),
    message("m-b1", request("y", "b")),
    message("m-b2", request("z", "b")),
  ])
  expect(result.retry.sort()).toEqual(["m-b1", "m-b2"])
})

test("a backend's tick whose pass fails is not retried (the next tick is seconds away); a job request beside it is", async () => {
  const { rt, logger } = await setup()
  const get = rt.repos.backends.get.bind(rt.repos.backends)
  rt.repos.backends.get = async (project, id) => {
    if (id === "b") throw Object.assign(new Error("store throttled"), { name: "ThrottlingException" })
    return get(project, id)
  }
  const tick = { kind: "backend", project: "p", id: "b", backendId: "b", reason: TickReason }
  const result = await handleScheduleBatch(rt, [
    message("m-tick", tick),
    message("m-job", { kind: "job", project: "p", id: "y", reason: "job.created", backendId: "b" }),
  ])
  expect(result.retry).toEqual(["m-job"])
  expect(logger.entries.some((e) => /tick failed: store throttled/.test(e.message))).toBe(true)
})

test("the fanned-out tick gives each backend with work a pass every 5 s of the next minute, through the queue; an idle backend none", async () => {
  const { rt, clock, passes } = await setup()
  // "c" has no workers and no work; "a" and "b" have live workers (so they are looked after).
  await rt.repos.backends.put("p", "c", BackendConfig.parse({ type: "workers" }))
  await rt.transitions.jobs.create("p", "job-1", JobSpec.parse({ command: ["true"], tasks: 1 }), "a")
  const queue = MemoryQueue({ clock })
  const report = await fanOutTicks(rt, queue, { windowMs: 60_000, intervalMs: 5_000 })
  expect(report).toMatchObject({ sent: 24, busy: 2 })
  const pending = queue.pending()
  const due = (id: string) =>
    pending.filter((m) => parseScheduleRequest(m.body)?.id === id).map((m) => m.visibleAt - clock.now())
  const everyFive = Array.from({ length: 12 }, (_, i) => i * 5_000)
  expect(due("a")).toEqual(everyFive)
  expect(due("b")).toEqual(everyFive)
  expect(due("c")).toEqual([])
  for (const m of pending)
    expect(parseScheduleRequest(m.body)).toMatchObject({ kind: "backend", reason: TickReason, project: "p" })

  // What is due now is one pass per backend, and it places the job; the rest comes due as time passes.
  const now = await queue.receive({ max: 10 })
  expect(now).toHaveLength(2)
  await handleScheduleBatch(
    rt,
    now.map((m) => ({ id: m.id, body: m.body, receiveCount: m.receiveCount })),
  )
  expect(passes.sort()).toEqual(["a", "b"])
  expect((await rt.repos.jobs.load("p", "job-1"))!.tasks[0]?.data.state).toBe("ASSIGNED")
  expect(await queue.receive({ max: 10 })).toEqual([])
  clock.advance(5_000)
  expect(await queue.receive({ max: 10 })).toHaveLength(2)
})
