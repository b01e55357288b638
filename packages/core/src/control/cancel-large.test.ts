/**
 * One big request does not stall everyone: cancelling a 10,000-task job answers at once, in a few store
 * calls whatever the job's size; the reconcile passes after it kill the tasks a page at a time, a
 * bounded number of writes each, the live ones first and none placed meanwhile; a heartbeat and
 * `/v1/me` in between stay as cheap as ever; the job ends CANCELLED with every task KILLED and an event
 * for each. Costs are counted in store calls, not time.
 */
import { expect, test } from "vitest"
import { testApi } from "../api/testing"
import { countingStore } from "../store/counting"
import { MemoryStore } from "../store/memory"
import { KillsPerPass, reconcilePass } from "./reconcile"

const Tasks = 10_000

/** Every item of a paged listing. */
async function all<T>(page: (cursor?: string) => Promise<{ items: T[]; cursor?: string }>): Promise<T[]> {
  const items: T[] = []
  let cursor: string | undefined
  do {
    const next = await page(cursor)
    items.push(...next.items)
    cursor = next.cursor
  } while (cursor)
  return items
}
const Writes = ["create", "createMany", "update", "delete"]

async function setup() {
  const counter = countingStore(MemoryStore())
  const api = await testApi({ store: counter.store })
  const backend = {
    id: "pool",
    config: {
      type: "workers",
      scaleGroups: [{ name: "pool", provider: { type: "local" }, max: 1, resources: {} }],
    },
  }
  expect((await api.call("POST", "/v1/backends", { body: backend })).status).toBe(201)
  const reg = await api.call("POST", "/v1/workers/register", {
    body: { backendId: "pool", scaleGroup: "pool", name: "w1", resources: { cpu: 4, memoryMiB: 4096 } },
  })
  expect(reg.status).toBe(201)
  const worker = { id: reg.json.worker.id as string, credential: reg.json.credential as string }
  const heartbeat = (attempts: { attemptUid: string; state: string }[]) =>
    api.call("POST", `/v1/workers/${worker.id}/heartbeat`, {
      body: { attempts },
      headers: { "Swarmplane-Worker-Credential": worker.credential },
    })
  const pass = async () => {
    const record = (await api.deps.repos.backends.get("default", "pool"))!
    return reconcilePass(api.deps, record, "test")
  }
  /** Store calls `run` makes: in all, and writes. */
  const cost = async <T>(run: () => Promise<T>) => {
    counter.reset()
    const result = await run()
    const writes = Writes.reduce((n, name) => n + (counter.counts[name] ?? 0), 0)
    return { result, calls: counter.total(), writes, updates: counter.counts.update ?? 0 }
  }
  return { api, heartbeat, pass, cost }
}

test("cancelling a 10,000-task job answers in a few store calls; the passes after it kill the tasks a page at a time while heartbeats and /v1/me stay cheap", {
  timeout: 120_000,
}, async () => {
  const { api, heartbeat, pass, cost } = await setup()
  const submitted = await api.call("POST", "/v1/jobs", {
    body: { command: ["true"], tasks: Tasks, backendId: "pool", resources: { cpu: 1, memoryMiB: 64 } },
  })
  expect(submitted.status).toBe(202)
  const id = submitted.json.id as string

  // The worker runs the 4 tasks that fit it.
  expect((await pass()).placed).toBe(4)
  const desired = (await heartbeat([])).json.desired as { attemptUid: string }[]
  expect(desired).toHaveLength(4)
  await heartbeat(desired.map((d) => ({ attemptUid: d.attemptUid, state: "RUNNING" })))

  // 1. The cancel answers at once: it marks the job and records why, nothing more.
  const cancel = await cost(() => api.call("POST", `/v1/jobs/${id}/cancel`))
  expect(cancel.result.status).toBe(202)
  expect(cancel.result.json).toMatchObject({ id, status: "RUNNING", cancelRequested: true })
  expect(cancel.calls).toBeLessThanOrEqual(6)
  const job = await api.call("GET", `/v1/jobs/${id}`)
  expect(job.json).toMatchObject({ status: "RUNNING", cancelRequested: true })
  // A second cancel changes nothing and is as cheap.
  expect((await cost(() => api.call("POST", `/v1/jobs/${id}/cancel`))).writes).toBe(0)

  // 2. Passes kill the tasks a page at a time; heartbeats and /v1/me in between cost what they always do.
  let passes = 0
  let running = desired.map((d) => ({ attemptUid: d.attemptUid, state: "RUNNING" }))
  for (;;) {
    const me = await cost(() => api.call("GET", "/v1/me"))
    expect(me.result.status).toBe(200)
    expect(me.calls).toBeLessThanOrEqual(3)
    const beat = await cost(() => heartbeat(running))
    expect(beat.result.status).toBe(200)
    // The heartbeat that confirms the worker stopped its killed attempts also reads and writes those
    // (its own few), never the job's thousands.
    expect(beat.calls).toBeLessThanOrEqual(15 + 2 * desired.length)
    running = running.filter((r) =>
      (beat.result.json.desired as { attemptUid: string }[]).some((d) => d.attemptUid === r.attemptUid),
    )

    const step = await cost(pass)
    passes++
    expect(step.result.error).toBeUndefined()
    expect(step.result.placed).toBe(0)
    // A page of task writes, the job's counts, the lease and the backend's status; events go in batches.
    expect(step.updates).toBeLessThanOrEqual(KillsPerPass + 10)
    const now = (await api.call("GET", `/v1/jobs/${id}`)).json
    if (now.status === "CANCELLED") break
    // Honest while it runs: not ended, cancel requested, with how far it got in its counts (its
    // status is derived from its tasks: PENDING once the running ones are stopped).
    expect(now).toMatchObject({ status: passes === 0 ? "RUNNING" : "PENDING", cancelRequested: true })
    expect(now.counts.KILLED).toBe(Math.min(Tasks, passes * KillsPerPass))
    expect(passes).toBeLessThan(Tasks / KillsPerPass + 3)
  }
  // The live attempts went first: the worker was told to stop them after the first pass.
  expect(running).toEqual([])
  expect(passes).toBe(Math.ceil(Tasks / KillsPerPass))

  // 3. At rest: CANCELLED, every task KILLED, none placed after the cancel, an event for each.
  const done = (await api.call("GET", `/v1/jobs/${id}`)).json
  expect(done).toMatchObject({ status: "CANCELLED", counts: { KILLED: Tasks } })
  const { deps } = api
  const tasks = await all((cursor) => deps.repos.jobs.tasks("default", id, { limit: 1000, cursor }))
  expect(tasks).toHaveLength(Tasks)
  expect(tasks.filter((t) => t.state !== "KILLED")).toEqual([])
  // The worker said it stopped the killed attempts: nothing is left waiting for a stop.
  expect(tasks.filter((t) => t.stopping)).toEqual([])
  expect(tasks.filter((t) => t.attempts.length > 0)).toHaveLength(4)
  const events = await all((cursor) => deps.repos.events.ofJob("default", id, { limit: 1000, cursor }))
  const killed = events.filter((e) => e.entity.kind === "task" && e.to === "KILLED")
  expect(killed).toHaveLength(Tasks)
  expect(new Set(killed.map((e) => e.entity.id)).size).toBe(Tasks)
  expect(killed.every((e) => e.reason === "cancelled")).toBe(true)
  const jobEvents = events.filter((e) => e.entity.kind === "job")
  expect(jobEvents.map((e) => e.reason)).toContain("cancel_requested")
  expect(jobEvents.at(-1)).toMatchObject({ to: "CANCELLED", reason: "cancelled" })
  expect((await deps.repos.active.of("default", "pool")).count).toBe(0)
})

test("a job of at most 100 tasks is CANCELLED by the request itself", async () => {
  const { api, cost } = await setup()
  const id = (
    await api.call("POST", "/v1/jobs", {
      body: { command: ["true"], tasks: 100, backendId: "pool", resources: { cpu: 1, memoryMiB: 64 } },
    })
  ).json.id
  const cancel = await cost(() => api.call("POST", `/v1/jobs/${id}/cancel`))
  expect(cancel.result.json).toMatchObject({ status: "CANCELLED", counts: { KILLED: 100 } })
  // Bounded by the job's size: a write per task, a few batches of events, and the job.
  expect(cancel.calls).toBeLessThan(130)
})

test("the kills of a pass are shared: a small cancel is not held up behind a large one", async () => {
  const { api, pass } = await setup()
  const submit = async (tasks: number) =>
    (
      await api.call("POST", "/v1/jobs", {
        body: { command: ["true"], tasks, backendId: "pool", resources: { cpu: 64, memoryMiB: 64 } },
      })
    ).json.id as string
  const large = await submit(2_000)
  const small = await submit(150)
  for (const id of [large, small]) expect((await api.call("POST", `/v1/jobs/${id}/cancel`)).status).toBe(202)

  await pass()
  const counts = async (id: string) => (await api.call("GET", `/v1/jobs/${id}`)).json
  expect(await counts(small)).toMatchObject({ status: "CANCELLED", counts: { KILLED: 150 } })
  expect(await counts(large)).toMatchObject({ status: "PENDING", counts: { KILLED: KillsPerPass - 150 } })
  await pass()
  await pass()
  expect(await counts(large)).toMatchObject({ status: "CANCELLED", counts: { KILLED: 2_000 } })
})
