import { expect, test } from "vitest"
import { BackendConfig } from "../model/backend"
import { JobSpec } from "../model/job"
import { handleScheduleBatch, type ScheduleMessage } from "./schedule"
import { memoryRuntime } from "./testing/runtime"

async function setup() {
  const { rt, logger } = memoryRuntime()
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
  return { rt, logger, passes }
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
