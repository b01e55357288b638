import type { z } from "@hono/zod-openapi"
import { describe, expect, test } from "vitest"
import { ScaleGroup } from "../../model/backend"
import { type Job, JobSpec, type Task } from "../../model/job"
import type { LiveTaskStates } from "../../model/states"
import type { Worker } from "../../model/worker"
import type { ProviderInstance } from "../../providers/port"
import type { ScaleGroupStatus, TaskRef } from "../protocol"
import { backoffMs, type GroupState, planScaling, type ScalingInput } from "./autoscaler"

const t0 = "2026-01-01T00:00:00.000Z"
const now = Date.parse("2026-01-01T01:00:00.000Z")
const secondsAgo = (s: number) => new Date(now - s * 1000).toISOString()

/** A group of 4-cpu, 8 GiB workers: min 0, max 10, no buffer, Zod's defaults for the rest. */
function group(name: string, patch: Partial<z.input<typeof ScaleGroup>> = {}): ScaleGroup {
  return ScaleGroup.parse({
    name,
    provider: { type: "local" },
    max: 10,
    resources: { cpu: 4, memoryMiB: 8192, gpu: 0 },
    ...patch,
  })
}

/** A registered worker of group `cpu`, started by the provider as `i-<id>`, with nothing running. */
function worker(id: string, patch: Partial<Worker> = {}): Worker {
  return {
    id,
    project: "p",
    backendId: "b",
    scaleGroup: "cpu",
    resources: { cpu: 4, memoryMiB: 8192, gpu: 0 },
    attributes: {},
    health: "healthy",
    lastSeen: secondsAgo(1),
    registeredAt: secondsAgo(3600),
    instanceId: `i-${id}`,
    ...patch,
  }
}

function job(id: string, spec: Partial<z.input<typeof JobSpec>> = {}): Job {
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
  }
}

function ref(j: Job, index: number, patch: Partial<Task> = {}): TaskRef {
  const data: Task = {
    index,
    state: "PENDING",
    attempts: [],
    failureCount: 0,
    preemptionCount: 0,
    updatedAt: t0,
    ...patch,
  }
  return { job: j, task: { pk: `p#job#${j.id}`, sk: `task#${index}`, type: "task", version: 1, data } }
}

/** Every task of `j`, PENDING. */
const pending = (j: Job): TaskRef[] => Array.from({ length: j.spec.tasks }, (_, i) => ref(j, i))

/** Task `index` of `j` with a current attempt on `workerId`. */
const liveOn = (
  j: Job,
  index: number,
  workerId: string,
  state: (typeof LiveTaskStates)[number] = "RUNNING",
): TaskRef =>
  ref(j, index, {
    state,
    attempts: [
      {
        attemptUid: `${j.id}-${index}-a`,
        state,
        workerId,
        createdAt: t0,
      },
    ],
  })

const instance = (id: string, startedSecondsAgo = 30): ProviderInstance => ({
  id,
  startedAt: now - startedSecondsAgo * 1000,
})

const groupState = (patch: Partial<GroupState> = {}): GroupState => ({
  starts: [],
  stops: [],
  failures: 0,
  ...patch,
})

function input(patch: Partial<ScalingInput> = {}): ScalingInput {
  return {
    groups: [group("cpu")],
    workers: [],
    instances: new Map(),
    pending: [],
    live: [],
    state: {},
    now,
    ...patch,
  }
}

/** The plan in one comparable shape: starts and stops by group name, plus each group's status. */
function summary(i: ScalingInput) {
  const plan = planScaling(i)
  return {
    start: Object.fromEntries(plan.start.map((s) => [s.group.name, s.count])),
    stop: Object.fromEntries(plan.stop.map((s) => [s.group.name, s.instanceIds])),
    status: plan.status,
  }
}

interface Case {
  input: ScalingInput
  start?: Record<string, number>
  stop?: Record<string, string[]>
  /** Per group, in config order: the fields that matter, and a pattern the reason must match. */
  status: (Partial<Omit<ScaleGroupStatus, "reason">> & { reason: RegExp })[]
}

const small = job("small", { tasks: 3, resources: { cpu: 2, memoryMiB: 1024 } })
const big = job("big", { tasks: 5, resources: { cpu: 4, memoryMiB: 4096 } })

describe("planScaling: scale up", () => {
  const cases: Record<string, Case> = {
    "from zero, packs pending tasks onto new workers of the group's shape": {
      input: input({ pending: pending(small) }),
      start: { cpu: 2 },
      status: [
        {
          group: "cpu",
          action: "scale_up",
          current: 0,
          starting: 0,
          demand: 2,
          target: 2,
          reason: /^2 new worker\(s\) for pending work: starting 2$/,
        },
      ],
    },
    "tasks that fit existing free capacity create no demand": {
      input: input({
        workers: [worker("w1")],
        live: [liveOn(small, 0, "w1")],
        pending: [ref(small, 1)],
      }),
      status: [{ action: "none", current: 1, demand: 1, target: 1, reason: /busy or needed; at target/ }],
    },
    "only the tasks that do not fit existing capacity count": {
      input: input({
        workers: [worker("w1")],
        live: [liveOn(small, 0, "w1")],
        pending: [ref(small, 1), ref(small, 2)],
      }),
      start: { cpu: 1 },
      status: [{ action: "scale_up", current: 1, demand: 2, target: 2, reason: /1 new worker\(s\)/ }],
    },
    "min starts workers with no demand": {
      input: input({ groups: [group("cpu", { min: 2 })] }),
      start: { cpu: 2 },
      status: [{ action: "scale_up", demand: 0, target: 2, reason: /^min 2: starting 2$/ }],
    },
    "min above demand is named as the reason, not the pending work": {
      input: input({ groups: [group("cpu", { min: 3 })], pending: [ref(big, 0)] }),
      start: { cpu: 3 },
      status: [{ action: "scale_up", demand: 1, target: 3, reason: /^min 3: starting 3$/ }],
    },
    "busy workers plus buffer are named as the reason": {
      input: input({
        groups: [group("cpu", { buffer: 1 })],
        workers: [worker("w1"), worker("w2")],
        live: [liveOn(big, 0, "w1"), liveOn(big, 1, "w2")],
      }),
      start: { cpu: 1 },
      status: [{ action: "scale_up", demand: 2, target: 3, reason: /^2 busy \+ buffer 1: starting 1$/ }],
    },
    "a buffer beyond max says the target is capped": {
      input: input({
        groups: [group("cpu", { buffer: 2, max: 3 })],
        workers: [worker("w1"), worker("w2")],
        live: [liveOn(big, 0, "w1"), liveOn(big, 1, "w2")],
      }),
      start: { cpu: 1 },
      status: [{ action: "scale_up", target: 3, reason: /^2 busy \+ buffer 2 \(max 3\): starting 1$/ }],
    },
    "max caps the target": {
      input: input({ groups: [group("cpu", { max: 3 })], pending: pending(big) }),
      start: { cpu: 3 },
      status: [{ action: "scale_up", demand: 3, target: 3, reason: /starting 3/ }],
    },
    "buffer adds idle workers above demand, within max": {
      input: input({ groups: [group("cpu", { buffer: 2, max: 3 })], pending: [ref(big, 0)] }),
      start: { cpu: 3 },
      status: [
        { action: "scale_up", demand: 1, target: 3, reason: /for pending work \+ buffer 2: starting 3$/ },
      ],
    },
    "starts within the last minute count against scaleUpPerMinute": {
      input: input({
        groups: [group("cpu", { scaleUpPerMinute: 3 })],
        pending: pending(big),
        state: { cpu: groupState({ starts: [now - 10_000, now - 59_000, now - 61_000] }) },
      }),
      start: { cpu: 1 },
      status: [{ action: "scale_up", target: 5, reason: /starting 1 \(rate limit 3\/min\)$/ }],
    },
    "a spent rate limit blocks the scale-up and says so": {
      input: input({
        groups: [group("cpu", { scaleUpPerMinute: 2 })],
        pending: pending(big),
        state: { cpu: groupState({ starts: [now - 1_000, now - 2_000] }) },
      }),
      status: [{ action: "blocked", target: 5, reason: /^needs 5 more; rate limit of 2\/min reached$/ }],
    },
    "a backoff blocks the scale-up with the provider's error": {
      input: input({
        pending: pending(small),
        state: {
          cpu: groupState({ failures: 2, backoffUntil: now + 20_000, lastError: "spawn agent: ENOENT" }),
        },
      }),
      status: [
        {
          action: "blocked",
          target: 2,
          backoffUntil: new Date(now + 20_000).toISOString(),
          reason: /^backing off after a provider error \(spawn agent: ENOENT\)$/,
        },
      ],
    },
    "an expired backoff no longer blocks": {
      input: input({
        pending: pending(small),
        state: { cpu: groupState({ failures: 2, backoffUntil: now - 1, lastError: "boom" }) },
      }),
      start: { cpu: 2 },
      status: [{ action: "scale_up", reason: /starting 2/ }],
    },
    "instances started but not registered count as starting toward current": {
      input: input({
        pending: pending(small),
        instances: new Map([["cpu", [instance("i-a"), instance("i-b")]]]),
      }),
      status: [
        {
          action: "none",
          current: 2,
          starting: 2,
          demand: 2,
          target: 2,
          reason: /^2 worker\(s\) busy or needed; at target$/,
        },
      ],
    },
    "a registered instance is a worker, not a starting one": {
      input: input({
        workers: [worker("w1")],
        live: [liveOn(big, 0, "w1")],
        pending: [ref(big, 1), ref(big, 2)],
        instances: new Map([["cpu", [instance("i-w1", 600), instance("i-new")]]]),
      }),
      start: { cpu: 1 },
      status: [{ action: "scale_up", current: 2, starting: 1, demand: 3, target: 3, reason: /starting 1$/ }],
    },
    "two groups in order share demand: the first takes what it can": {
      input: input({
        groups: [group("a", { max: 2 }), group("b", { max: 10 })],
        pending: pending(big),
      }),
      start: { a: 2, b: 3 },
      status: [
        { group: "a", action: "scale_up", demand: 2, target: 2, reason: /2 new worker\(s\)/ },
        { group: "b", action: "scale_up", demand: 3, target: 3, reason: /3 new worker\(s\)/ },
      ],
    },
    "a full first group leaves the demand to the next one": {
      input: input({
        groups: [group("a", { max: 1 }), group("b")],
        workers: [worker("w1", { scaleGroup: "a" })],
        live: [liveOn(big, 0, "w1")],
        pending: [ref(big, 1)],
      }),
      start: { b: 1 },
      status: [
        { group: "a", action: "none", demand: 1, target: 1, reason: /at target/ },
        { group: "b", action: "scale_up", demand: 1, target: 1, reason: /1 new worker\(s\)/ },
      ],
    },
    "a task only the second group's shape holds scales the second group": {
      input: input({
        groups: [
          group("cpu"),
          group("gpu", { resources: { cpu: 8, memoryMiB: 65536, gpu: 8, gpuType: "h100" } }),
        ],
        pending: [ref(job("train", { resources: { cpu: 4, memoryMiB: 16384, gpu: 8, gpuType: "h100" } }), 0)],
      }),
      start: { gpu: 1 },
      status: [
        { group: "cpu", action: "none", demand: 0, reason: /^no demand; at target$/ },
        { group: "gpu", action: "scale_up", demand: 1, reason: /1 new worker\(s\)/ },
      ],
    },
    "a task no group's shape can hold creates no demand": {
      input: input({
        groups: [
          group("cpu"),
          group("gpu", { resources: { cpu: 8, memoryMiB: 65536, gpu: 8, gpuType: "a100" } }),
        ],
        pending: [
          ref(job("huge", { resources: { cpu: 64, memoryMiB: 1024 } }), 0),
          ref(job("h100", { resources: { cpu: 1, memoryMiB: 1024, gpu: 1, gpuType: "h100" } }), 0),
          ref(job("zone", { constraints: [{ key: "zone", op: "eq", value: "mars" }] }), 0),
        ],
      }),
      status: [
        { group: "cpu", action: "none", demand: 0, target: 0, reason: /^no demand; at target$/ },
        { group: "gpu", action: "none", demand: 0, target: 0, reason: /^no demand; at target$/ },
      ],
    },
    "a constraint picks the group whose attributes match": {
      input: input({
        groups: [group("a", { attributes: { zone: "a" } }), group("b", { attributes: { zone: "b" } })],
        pending: [ref(job("zb", { constraints: [{ key: "zone", op: "eq", value: "b" }] }), 0)],
      }),
      start: { b: 1 },
      status: [
        { group: "a", demand: 0, action: "none", reason: /no demand/ },
        { group: "b", demand: 1, action: "scale_up", reason: /1 new worker\(s\)/ },
      ],
    },
  }

  for (const [name, tc] of Object.entries(cases))
    test(name, () => {
      const got = summary(tc.input)
      expect(got.start).toEqual(tc.start ?? {})
      expect(got.stop).toEqual(tc.stop ?? {})
      expect(got.status).toHaveLength(tc.status.length)
      for (const [i, { reason, ...fields }] of tc.status.entries()) {
        expect(got.status[i]).toMatchObject(fields)
        expect(got.status[i]!.reason).toMatch(reason)
      }
    })
})

describe("planScaling: scale down", () => {
  const cases: Record<string, Case> = {
    "stops only workers idle for at least idleTimeoutS": {
      input: input({
        workers: [
          worker("w1", { idleSince: secondsAgo(600) }),
          worker("w2", { idleSince: secondsAgo(300) }),
          worker("w3", { idleSince: secondsAgo(299) }),
        ],
      }),
      stop: { cpu: ["i-w1", "i-w2"] },
      status: [
        {
          action: "scale_down",
          current: 3,
          target: 0,
          reason: /^3 more than needed; stopping 2 idle for ≥ 300s$/,
        },
      ],
    },
    "never stops a busy worker, even with a stale idleSince": {
      input: input({
        workers: [worker("w1", { idleSince: secondsAgo(900) }), worker("w2", { idleSince: secondsAgo(10) })],
        live: [liveOn(small, 0, "w1")],
      }),
      status: [
        {
          action: "none",
          current: 2,
          demand: 1,
          target: 1,
          reason: /^1 more than needed, but none idle for 300s yet$/,
        },
      ],
    },
    "a worker whose task is still starting is busy": {
      input: input({
        workers: [worker("w1", { idleSince: secondsAgo(900) })],
        live: [liveOn(small, 0, "w1", "ASSIGNED")],
      }),
      status: [{ action: "none", demand: 1, target: 1, reason: /at target/ }],
    },
    "a worker pending work fits on is not surplus": {
      input: input({
        workers: [worker("w1", { idleSince: secondsAgo(900) })],
        pending: [ref(small, 0)],
      }),
      status: [{ action: "none", current: 1, demand: 1, target: 1, reason: /at target/ }],
    },
    "min keeps idle workers": {
      input: input({
        groups: [group("cpu", { min: 2 })],
        workers: [worker("w1", { idleSince: secondsAgo(900) }), worker("w2", { idleSince: secondsAgo(900) })],
      }),
      status: [{ action: "none", current: 2, demand: 0, target: 2, reason: /^no demand; at target$/ }],
    },
    "buffer keeps idle workers above demand": {
      input: input({
        groups: [group("cpu", { buffer: 1 })],
        workers: [worker("w1"), worker("w2", { idleSince: secondsAgo(900) })],
        live: [liveOn(big, 0, "w1")],
      }),
      status: [{ action: "none", current: 2, demand: 1, target: 2, reason: /at target/ }],
    },
    "the longest idle go first, limited by scaleDownPerMinute": {
      input: input({
        groups: [group("cpu", { scaleDownPerMinute: 2 })],
        workers: [
          worker("w1", { idleSince: secondsAgo(400) }),
          worker("w2", { idleSince: secondsAgo(1200) }),
          worker("w3", { idleSince: secondsAgo(800) }),
        ],
      }),
      stop: { cpu: ["i-w2", "i-w3"] },
      status: [{ action: "scale_down", reason: /^3 more than needed; stopping 2 idle for ≥ 300s$/ }],
    },
    "stops within the last minute count against scaleDownPerMinute": {
      input: input({
        groups: [group("cpu", { scaleDownPerMinute: 2 })],
        workers: [worker("w1", { idleSince: secondsAgo(900) }), worker("w2", { idleSince: secondsAgo(900) })],
        state: { cpu: groupState({ stops: [now - 30_000, now - 90_000] }) },
      }),
      stop: { cpu: ["i-w1"] },
      status: [{ action: "scale_down", reason: /stopping 1 idle/ }],
    },
    "a spent scale-down rate limit stops nothing and says so": {
      input: input({
        groups: [group("cpu", { scaleDownPerMinute: 1 })],
        workers: [worker("w1", { idleSince: secondsAgo(900) })],
        state: { cpu: groupState({ stops: [now - 5_000] }) },
      }),
      status: [{ action: "none", reason: /^1 more than needed, but rate limit 1\/min reached$/ }],
    },
    "a hand-started worker (no instance id) is never stopped": {
      input: input({
        workers: [worker("w1", { idleSince: secondsAgo(900), instanceId: undefined })],
      }),
      status: [{ action: "none", current: 1, target: 0, reason: /^1 more than needed/ }],
    },
    "workers of other groups are left alone": {
      input: input({
        groups: [group("cpu"), group("gpu")],
        workers: [worker("w1", { scaleGroup: "gpu", idleSince: secondsAgo(900) })],
      }),
      stop: { gpu: ["i-w1"] },
      status: [
        { group: "cpu", action: "none", current: 0, reason: /no demand; at target/ },
        { group: "gpu", action: "scale_down", current: 1, reason: /stopping 1/ },
      ],
    },
  }

  for (const [name, tc] of Object.entries(cases))
    test(name, () => {
      const got = summary(tc.input)
      expect(got.start).toEqual(tc.start ?? {})
      expect(got.stop).toEqual(tc.stop ?? {})
      expect(got.status).toHaveLength(tc.status.length)
      for (const [i, { reason, ...fields }] of tc.status.entries()) {
        expect(got.status[i]).toMatchObject(fields)
        expect(got.status[i]!.reason).toMatch(reason)
      }
    })
})

test("every decision carries a reason in words, with its numbers", () => {
  const plan = planScaling(
    input({
      groups: [group("a", { max: 1 }), group("b", { min: 1 }), group("c")],
      workers: [worker("w9", { scaleGroup: "c", idleSince: secondsAgo(900) })],
      pending: pending(small),
    }),
  )
  expect(plan.status.map((s) => s.group)).toEqual(["a", "b", "c"])
  for (const s of plan.status) {
    expect(s.reason.length).toBeGreaterThan(10)
    expect(s.reason).not.toMatch(/undefined|NaN|\[object/)
  }
})

describe("backoffMs", () => {
  const cases: Record<string, { failures: number; ms: number }> = {
    "no failure yet waits the base": { failures: 0, ms: 10_000 },
    "first failure waits 10 s": { failures: 1, ms: 10_000 },
    "second failure doubles": { failures: 2, ms: 20_000 },
    "third failure doubles again": { failures: 3, ms: 40_000 },
    "fifth failure": { failures: 5, ms: 160_000 },
    "capped at five minutes": { failures: 6, ms: 300_000 },
    "stays capped for many failures": { failures: 1000, ms: 300_000 },
  }
  for (const [name, tc] of Object.entries(cases)) test(name, () => expect(backoffMs(tc.failures)).toBe(tc.ms))
})
