import type { z } from "@hono/zod-openapi"
import { describe, expect, test } from "vitest"
import type { Resources } from "../../model/common"
import { type Attempt, type Job, JobSpec, type Task } from "../../model/job"
import type { LiveTaskStates } from "../../model/states"
import type { Worker } from "../../model/worker"
import type { SchedJob } from "../../scheduling/types"
import type { TaskRef } from "../protocol"
import { buildSnapshot, bySubmission, RouterResources, res, schedJobId, taskResources } from "./snapshot"

const t0 = "2026-01-01T00:00:00.000Z"
const MiB = 1024 * 1024

function job(id: string, spec: Partial<z.input<typeof JobSpec>> = {}, patch: Partial<Job> = {}): Job {
  return {
    id,
    project: "p",
    spec: JobSpec.parse({ command: ["run"], ...spec }),
    backendId: "b",
    status: "PENDING",
    counts: {},
    cancelRequested: false,
    createdAt: t0,
    updatedAt: t0,
    ...patch,
  }
}

/** A swarm's serving job: `replicas` replica tasks, then the router. */
const serving = (id: string, replicas: number, spec: Partial<z.input<typeof JobSpec>> = {}) =>
  job(
    id,
    { tasks: replicas + 1, priority: "production", ...spec },
    { serving: { swarm: "llm", generation: 1, replicas, healthPath: "/health" } },
  )

function ref(
  j: Job,
  index: number,
  state: Task["state"] = "PENDING",
  attempts: Partial<Attempt>[] = [],
): TaskRef {
  const data: Task = {
    index,
    state,
    attempts: attempts.map((a, n) => ({
      attemptUid: `${j.id}-${index}-${n}`,
      state: "RUNNING",
      createdAt: t0,
      ...a,
    })),
    failureCount: 0,
    preemptionCount: 0,
    updatedAt: t0,
  }
  return { job: j, task: { pk: `p#job#${j.id}`, sk: `task#${index}`, type: "task", version: 1, data } }
}

type LiveState = (typeof LiveTaskStates)[number]

/** A live task whose current attempt runs on `workerId`. */
const on = (j: Job, index: number, workerId: string, state: LiveState = "RUNNING") =>
  ref(j, index, state, [{ workerId, state }])

function worker(
  id: string,
  resources: Partial<Resources> = {},
  attributes: Record<string, string> = {},
): Worker {
  return {
    id,
    project: "p",
    backendId: "b",
    resources: { cpu: 8, memoryMiB: 16384, gpu: 0, ...resources },
    attributes,
    health: "healthy",
    lastSeen: t0,
    registeredAt: t0,
  }
}

describe("res", () => {
  const cases: Record<string, { r: Resources; want: ReturnType<typeof res> }> = {
    "whole cores and MiB": {
      r: { cpu: 2, memoryMiB: 1024, gpu: 1 },
      want: { cpuMillis: 2000, memoryBytes: 1024 * MiB, gpu: 1, tpu: 0 },
    },
    "fractional cores round to millicores": {
      r: { cpu: 0.1235, memoryMiB: 128, gpu: 0 },
      want: { cpuMillis: 124, memoryBytes: 128 * MiB, gpu: 0, tpu: 0 },
    },
  }
  for (const [name, tc] of Object.entries(cases)) test(name, () => expect(res(tc.r)).toEqual(tc.want))
})

describe("schedJobId and taskResources", () => {
  const batch = job("j1", { tasks: 3, resources: { cpu: 2, memoryMiB: 2048, gpu: 1 } })
  const srv = serving("srv-llm-g1", 2, { resources: { cpu: 4, memoryMiB: 8192, gpu: 1 } })
  const cases: Record<string, { job: Job; index: number; id: string; resources: Resources }> = {
    "a batch task belongs to its job": { job: batch, index: 2, id: "j1", resources: batch.spec.resources },
    "a replica belongs to the serving job": {
      job: srv,
      index: 1,
      id: "srv-llm-g1",
      resources: srv.spec.resources,
    },
    "the router (index = replicas) is its own scheduler job": {
      job: srv,
      index: 2,
      id: "srv-llm-g1#router",
      resources: RouterResources,
    },
    "index = replicas of a batch job is an ordinary task": {
      job: job("j2", { tasks: 3 }),
      index: 2,
      id: "j2",
      resources: { cpu: 1, memoryMiB: 1024, gpu: 0 },
    },
  }
  for (const [name, tc] of Object.entries(cases))
    test(name, () => {
      expect(schedJobId(tc.job, tc.index)).toBe(tc.id)
      expect(taskResources(tc.job, tc.index)).toEqual(tc.resources)
    })

  test("a router is small and needs no GPU", () => {
    expect(RouterResources.gpu).toBe(0)
    expect(RouterResources.cpu).toBeLessThan(1)
    expect(RouterResources.memoryMiB).toBeLessThanOrEqual(256)
  })
})

describe("buildSnapshot: workers and what runs on them", () => {
  const a = job("a", { tasks: 4, priority: "interactive", resources: { cpu: 2, memoryMiB: 1024 } })
  const srv = serving("srv", 1, { resources: { cpu: 4, memoryMiB: 4096, gpu: 1 } })

  test("a live task counts on the worker of its current attempt, not an earlier one", () => {
    const moved = ref(a, 0, "RUNNING", [
      { workerId: "w2", state: "WORKER_FAILED" },
      { workerId: "w1", state: "RUNNING" },
    ])
    const s = buildSnapshot([worker("w1"), worker("w2")], [moved], [])
    expect(s.workers.map((w) => [w.id, w.running.map((r) => r.taskId)])).toEqual([
      ["w1", ["a/0"]],
      ["w2", []],
    ])
    expect(s.workers[0]!.running[0]).toEqual({
      taskId: "a/0",
      band: 1,
      resources: { cpuMillis: 2000, memoryBytes: 1024 * MiB, gpu: 0, tpu: 0 },
      building: false,
    })
  })

  const building: [LiveState, boolean][] = [
    ["ASSIGNED", true],
    ["BUILDING", true],
    ["RUNNING", false],
  ]
  for (const [state, flag] of building)
    test(`a task in ${state} is ${flag ? "" : "not "}building`, () => {
      const s = buildSnapshot([worker("w1")], [on(a, 0, "w1", state)], [])
      expect(s.workers[0]!.running[0]!.building).toBe(flag)
    })

  test("a live task with no worker yet holds nothing", () => {
    const s = buildSnapshot([worker("w1")], [ref(a, 0, "ASSIGNED", [{ state: "ASSIGNED" }])], [])
    expect(s.workers[0]!.running).toEqual([])
  })

  test("a task on a worker not in the snapshot is ignored", () => {
    const s = buildSnapshot([worker("w1")], [on(a, 0, "gone")], [])
    expect(s.workers).toHaveLength(1)
    expect(s.workers[0]!.running).toEqual([])
  })

  test("replicas hold the swarm's resources, the router a router's, both at the job's band", () => {
    const s = buildSnapshot([worker("w1")], [on(srv, 0, "w1"), on(srv, 1, "w1")], [])
    expect(s.workers[0]!.running).toEqual([
      { taskId: "srv/0", band: 0, resources: res(srv.spec.resources), building: false },
      { taskId: "srv/1", band: 0, resources: res(RouterResources), building: false },
    ])
  })

  const attributes: Record<string, { worker: Worker; want: Record<string, string> }> = {
    "a worker's attributes pass through": {
      worker: worker("w", {}, { zone: "a", rack: "r1" }),
      want: { zone: "a", rack: "r1" },
    },
    "resources.gpuType becomes the accelerator attribute": {
      worker: worker("w", { gpu: 8, gpuType: "h100" }, { zone: "a" }),
      want: { zone: "a", accelerator: "h100" },
    },
    "resources.gpuType wins over an advertised accelerator": {
      worker: worker("w", { gpu: 8, gpuType: "h100" }, { accelerator: "a100" }),
      want: { accelerator: "h100" },
    },
  }
  for (const [name, tc] of Object.entries(attributes))
    test(name, () => expect(buildSnapshot([tc.worker], [], []).workers[0]!.attributes).toEqual(tc.want))

  test("capacity is the worker's resources in scheduler units", () => {
    const s = buildSnapshot([worker("w", { cpu: 1.5, memoryMiB: 512, gpu: 2 })], [], [])
    expect(s.workers[0]!.capacity).toEqual({ cpuMillis: 1500, memoryBytes: 512 * MiB, gpu: 2, tpu: 0 })
  })
})

describe("buildSnapshot: pending tasks and their jobs", () => {
  const base: Omit<SchedJob, "resources"> = { id: "j", band: 2, constraints: [], preferences: [] }
  const cases: Record<string, { spec: Partial<z.input<typeof JobSpec>>; want: SchedJob }> = {
    "defaults: batch band, the spec's resources, no variant, no gang": {
      spec: {},
      want: { ...base, resources: { cpuMillis: 1000, memoryBytes: 1024 * MiB, gpu: 0, tpu: 0 } },
    },
    "priority sets the band": {
      spec: { priority: "production" },
      want: { ...base, band: 0, resources: res({ cpu: 1, memoryMiB: 1024, gpu: 0 }) },
    },
    "gpuType becomes the device variant": {
      spec: { resources: { cpu: 4, memoryMiB: 8192, gpu: 2, gpuType: "h100" } },
      want: { ...base, resources: res({ cpu: 4, memoryMiB: 8192, gpu: 2 }), deviceVariant: "h100" },
    },
    "a constraint's value becomes its one value; values and no value map as they are": {
      spec: {
        constraints: [
          { key: "zone", op: "eq", value: "a" },
          { key: "rack", op: "in", values: ["r1", "r2"] },
          { key: "spot", op: "not_exists" },
          { key: "cores", op: "ge", value: "32" },
        ],
      },
      want: {
        ...base,
        resources: res({ cpu: 1, memoryMiB: 1024, gpu: 0 }),
        constraints: [
          { key: "zone", op: "eq", values: ["a"] },
          { key: "rack", op: "in", values: ["r1", "r2"] },
          { key: "spot", op: "not_exists", values: [] },
          { key: "cores", op: "ge", values: ["32"] },
        ],
      },
    },
    "preferences map their constraint and keep the weight": {
      spec: { preferences: [{ constraint: { key: "zone", op: "eq", value: "b" }, weight: 30 }] },
      want: {
        ...base,
        resources: res({ cpu: 1, memoryMiB: 1024, gpu: 0 }),
        preferences: [{ constraint: { key: "zone", op: "eq", values: ["b"] }, weight: 30 }],
      },
    },
    "coscheduling without groupBy is a gang anywhere": {
      spec: { tasks: 2, coscheduling: {} },
      want: { ...base, resources: res({ cpu: 1, memoryMiB: 1024, gpu: 0 }), gang: {} },
    },
    "coscheduling.groupBy is the gang's groupBy": {
      spec: { tasks: 2, coscheduling: { groupBy: "rack" } },
      want: { ...base, resources: res({ cpu: 1, memoryMiB: 1024, gpu: 0 }), gang: { groupBy: "rack" } },
    },
  }
  for (const [name, tc] of Object.entries(cases))
    test(name, () => {
      const s = buildSnapshot([], [], [ref(job("j", tc.spec), 0)])
      expect([...s.jobs.values()]).toEqual([tc.want])
      expect(s.tasks).toEqual([{ id: "j/0", jobId: "j" }])
    })

  test("a serving job's router is a separate scheduler job with small resources and no constraints", () => {
    const srv = serving("srv", 2, {
      resources: { cpu: 4, memoryMiB: 8192, gpu: 1, gpuType: "h100" },
      constraints: [{ key: "zone", op: "eq", value: "a" }],
      coscheduling: {},
    })
    const s = buildSnapshot([], [], [ref(srv, 0), ref(srv, 1), ref(srv, 2)])
    expect(s.tasks).toEqual([
      { id: "srv/0", jobId: "srv" },
      { id: "srv/1", jobId: "srv" },
      { id: "srv/2", jobId: "srv#router" },
    ])
    expect(s.jobs.get("srv")).toMatchObject({
      band: 0,
      resources: res(srv.spec.resources),
      deviceVariant: "h100",
      constraints: [{ key: "zone", op: "eq", values: ["a"] }],
      gang: {},
    })
    expect(s.jobs.get("srv#router")).toEqual({
      id: "srv#router",
      band: 0,
      resources: res(RouterResources),
      constraints: [],
      preferences: [],
    })
  })

  test("a job appears once however many of its tasks are pending, tasks in the order given", () => {
    const a = job("a", { tasks: 3 })
    const b = job("b")
    const s = buildSnapshot([], [], [ref(a, 2), ref(b, 0), ref(a, 0)])
    expect([...s.jobs.keys()]).toEqual(["a", "b"])
    expect(s.tasks.map((t) => t.id)).toEqual(["a/2", "b/0", "a/0"])
  })
})

describe("bySubmission", () => {
  const early = job("zz", {}, { createdAt: "2026-01-01T00:00:00.000Z" })
  const late = job("aa", {}, { createdAt: "2026-01-01T00:00:01.000Z" })
  const sameTimeA = job("m1", {}, { createdAt: "2026-01-01T00:00:02.000Z" })
  const sameTimeB = job("m2", {}, { createdAt: "2026-01-01T00:00:02.000Z" })
  const key = (r: TaskRef) => `${r.job.id}/${r.task.data.index}`
  const cases: Record<string, { refs: TaskRef[]; want: string[] }> = {
    "older jobs first, whatever their ids": { refs: [ref(late, 0), ref(early, 0)], want: ["zz/0", "aa/0"] },
    "same time: by job id": { refs: [ref(sameTimeB, 0), ref(sameTimeA, 0)], want: ["m1/0", "m2/0"] },
    "same job: by index": {
      refs: [ref(early, 10), ref(early, 2), ref(early, 0)],
      want: ["zz/0", "zz/2", "zz/10"],
    },
    "all three keys together": {
      refs: [ref(sameTimeB, 1), ref(late, 1), ref(sameTimeA, 0), ref(early, 3), ref(late, 0)],
      want: ["zz/3", "aa/0", "aa/1", "m1/0", "m2/1"],
    },
  }
  for (const [name, tc] of Object.entries(cases))
    test(name, () => expect([...tc.refs].sort(bySubmission).map(key)).toEqual(tc.want))
})
