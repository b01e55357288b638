import { describe, expect, test } from "vitest"
import { type Attempt, type Job, JobSpec, type Task } from "../../model/job"
import type { JobStatus } from "../../model/states"
import type { Swarm } from "../../model/swarm"
import type { ServingStatus } from "../protocol"
import {
  CrashLoopAttempts,
  replicaCommand,
  routerHost,
  routerPort,
  servingJobId,
  servingStatus,
} from "./serving"

const t0 = "2026-01-01T00:00:00.000Z"

/** The serving job of swarm `llm` generation 4, with `replicas` replicas (the router is task `replicas`). */
function servingJob(replicas: number, status: JobStatus = "RUNNING"): Job {
  return {
    id: servingJobId("llm", 4),
    project: "p",
    spec: JobSpec.parse({ name: "llm", command: ["serve"], tasks: replicas + 1, priority: "production" }),
    backendId: "b",
    status,
    counts: {},
    cancelRequested: false,
    serving: { swarm: "llm", generation: 4, replicas, healthPath: "/health" },
    createdAt: t0,
    updatedAt: t0,
  }
}

/** Small task builders: `pending(0, "why")`, `running(1, { ready: true, endpoint })`, `ended(2, "FAILED", 137)`. */
function task(index: number, state: Task["state"], attempt?: Partial<Attempt>, pendingReason?: string): Task {
  return {
    index,
    state,
    ...(pendingReason ? { pendingReason } : {}),
    attempts: attempt
      ? [{ attemptUid: `a-${index}`, state: "RUNNING", workerId: "w1", createdAt: t0, ...attempt }]
      : [],
    failureCount: 0,
    preemptionCount: 0,
    updatedAt: t0,
  }
}
const pending = (index: number, reason?: string) => task(index, "PENDING", undefined, reason)
const assigned = (index: number) => task(index, "ASSIGNED", { state: "ASSIGNED" })
const running = (index: number, attempt: Partial<Attempt> = {}) => task(index, "RUNNING", attempt)
const ready = (index: number, port: number) =>
  running(index, { ready: true, endpoint: `http://10.0.0.1:${port}` })
const ended = (index: number, state: Task["state"], exitCode?: number, reason?: string) =>
  task(index, state, { state: "FAILED", ...(exitCode !== undefined ? { exitCode } : {}) }, reason)

describe("servingStatus", () => {
  const cases: Record<
    string,
    {
      job: Job
      tasks: Task[]
      want: Partial<Omit<ServingStatus, "detail">> & { detail?: string | RegExp | undefined }
    }
  > = {
    "all PENDING: PENDING with the first pending reason": {
      job: servingJob(2, "PENDING"),
      tasks: [pending(0), pending(1, "needs 8 gpu, largest free is 4"), pending(2, "router reason")],
      want: { phase: "PENDING", detail: "needs 8 gpu, largest free is 4", generation: 4 },
    },
    "all PENDING without a reason: PENDING and no detail": {
      job: servingJob(2, "PENDING"),
      tasks: [pending(0), pending(1), pending(2)],
      want: { phase: "PENDING", detail: undefined },
    },
    "some placed: INITIALIZING with n/m replicas ready": {
      job: servingJob(2),
      tasks: [ready(0, 9001), assigned(1), pending(2, "no workers yet")],
      want: { phase: "INITIALIZING", detail: "1/2 replicas ready" },
    },
    "replicas running but not healthy yet: INITIALIZING": {
      job: servingJob(2),
      tasks: [running(0, { endpoint: "http://10.0.0.1:9001" }), running(1), ready(2, 8080)],
      want: { phase: "INITIALIZING", detail: "0/2 replicas ready", url: undefined },
    },
    "replicas ready but the router not yet: INITIALIZING": {
      job: servingJob(2),
      tasks: [ready(0, 9001), ready(1, 9002), running(2, { endpoint: "http://10.0.0.1:8080" })],
      want: { phase: "INITIALIZING", detail: "2/2 replicas ready", url: undefined },
    },
    "router ready without an endpoint: not RUNNING": {
      job: servingJob(1),
      tasks: [ready(0, 9001), running(1, { ready: true })],
      want: { phase: "INITIALIZING", detail: "1/1 replicas ready" },
    },
    "all replicas and the router ready: RUNNING at the router's URL": {
      job: servingJob(2),
      tasks: [ready(0, 9001), ready(1, 9002), ready(2, 8080)],
      want: { phase: "RUNNING", url: "http://10.0.0.1:8080", detail: undefined, generation: 4 },
    },
    "tasks in any order are read by index": {
      job: servingJob(2),
      tasks: [ready(2, 8080), ready(1, 9002), ready(0, 9001)],
      want: { phase: "RUNNING", url: "http://10.0.0.1:8080" },
    },
    "a FAILED replica: FAILED naming the replica and its exit code": {
      job: servingJob(3),
      tasks: [ready(0, 9001), ended(1, "FAILED", 137), ready(2, 9003), ready(3, 8080)],
      want: { phase: "FAILED", detail: "replica 1 failed (exit code 137)", url: undefined },
    },
    "a failure's message follows its exit code": {
      job: servingJob(1),
      tasks: [ended(0, "FAILED", 1, "CUDA out of memory"), pending(1)],
      want: { phase: "FAILED", detail: "replica 0 failed (exit code 1): CUDA out of memory" },
    },
    "a failed router is named as the router": {
      job: servingJob(1),
      tasks: [ready(0, 9001), ended(1, "WORKER_FAILED")],
      want: { phase: "FAILED", detail: /^the router worker_failed$/ },
    },
    "an unschedulable replica fails the swarm": {
      job: servingJob(1),
      tasks: [ended(0, "UNSCHEDULABLE", undefined, "needs 80 gpu, largest free is 8"), pending(1)],
      want: { phase: "FAILED", detail: /^replica 0 unschedulable: needs 80 gpu/ },
    },
    "all KILLED: STOPPED": {
      job: servingJob(2, "RUNNING"),
      tasks: [ended(0, "KILLED"), ended(1, "KILLED"), ended(2, "KILLED")],
      want: { phase: "STOPPED", url: undefined, detail: undefined },
    },
    "the router's agent restarting it: INITIALIZING with the agent's word, no URL": {
      job: servingJob(1),
      tasks: [
        ready(0, 9001),
        running(1, {
          endpoint: "http://10.0.0.1:21000",
          ready: false,
          message: "router restarting (restart 2 of 5): the router process was killed by SIGKILL",
        }),
      ],
      want: {
        phase: "INITIALIZING",
        url: undefined,
        detail:
          "1/1 replicas ready; router restarting (restart 2 of 5): the router process was killed by SIGKILL",
      },
    },
    "a router placed again after its attempt failed: INITIALIZING with the attempt and why": {
      job: servingJob(1),
      tasks: [
        ready(0, 9001),
        {
          ...pending(1, "retrying after failure 1 of 101: port 21000 on 10.0.0.1 is in use; next try at x"),
          attempts: [
            { attemptUid: "r-1", state: "FAILED", endpoint: "http://10.0.0.1:21000", createdAt: t0 },
          ],
        },
      ],
      want: {
        phase: "INITIALIZING",
        detail:
          "1/1 replicas ready; router restarting (attempt 2): retrying after failure 1 of 101: port 21000 on 10.0.0.1 is in use; next try at x",
      },
    },
    "a router moved off a lost worker, starting again: INITIALIZING, saying so": {
      job: servingJob(1),
      tasks: [
        ready(0, 9001),
        {
          ...assigned(1),
          attempts: [
            { attemptUid: "r-1", state: "WORKER_FAILED", endpoint: "http://10.0.0.1:21000", createdAt: t0 },
            { attemptUid: "r-2", state: "ASSIGNED", createdAt: t0 },
          ],
        },
      ],
      want: { phase: "INITIALIZING", detail: "1/1 replicas ready; router restarting (attempt 2)" },
    },
    "a first router waiting for its replicas' addresses: nothing said of it": {
      job: servingJob(1),
      tasks: [ready(0, 9001), running(1, { endpoint: "http://10.0.0.1:21000", ready: false })],
      want: { phase: "INITIALIZING", detail: "1/1 replicas ready" },
    },
    "a cancelled job is STOPPED even before its tasks end": {
      job: servingJob(1, "CANCELLED"),
      tasks: [ready(0, 9001), ready(1, 8080)],
      want: { phase: "STOPPED" },
    },
  }

  for (const [name, tc] of Object.entries(cases))
    test(name, () => {
      const got: Record<string, unknown> = { ...servingStatus(tc.job, tc.tasks) }
      // A field wanted as `undefined` must be absent; a RegExp must match; anything else must equal.
      for (const [key, value] of Object.entries(tc.want)) {
        if (value === undefined) expect(got, key).not.toHaveProperty(key)
        else if (value instanceof RegExp) expect(got[key], key).toMatch(value)
        else expect(got[key], key).toEqual(value)
      }
    })
})

describe("servingStatus replica items", () => {
  test("replicas show READY or their state, URLs only while running, and pending reasons", () => {
    const got = servingStatus(servingJob(4), [
      ready(0, 9001),
      running(1, { endpoint: "http://10.0.0.1:9002" }),
      pending(2, "needs 8 gpu, largest free is 4"),
      task(3, "BUILDING", { state: "BUILDING", endpoint: "http://10.0.0.1:9004" }),
      ready(4, 8080),
    ])
    expect(got.replicas).toEqual({
      ready: 1,
      total: 4,
      items: [
        { index: 0, state: "READY", url: "http://10.0.0.1:9001" },
        { index: 1, state: "RUNNING", url: "http://10.0.0.1:9002" },
        { index: 2, state: "PENDING", message: "needs 8 gpu, largest free is 4" },
        { index: 3, state: "BUILDING" },
      ],
    })
  })

  test("the router is not a replica item", () => {
    const got = servingStatus(servingJob(1), [ready(0, 9001), ready(1, 8080)])
    expect(got.replicas.items.map((i) => i.index)).toEqual([0])
  })

  test("a ready flag on a replica that is no longer RUNNING does not count", () => {
    const stale = task(0, "PREEMPTED", { state: "PREEMPTED", ready: true, endpoint: "http://10.0.0.1:9001" })
    const got = servingStatus(servingJob(1), [stale, ready(1, 8080)])
    expect(got.replicas.ready).toBe(0)
    expect(got.replicas.items[0]).toEqual({ index: 0, state: "PREEMPTED" })
  })
})

function swarm(patch: Partial<Swarm> = {}): Swarm {
  return {
    name: "llm",
    project: "p",
    model: "meta-llama/Llama-3.1-8B-Instruct",
    replicas: 2,
    gpusPerReplica: 1,
    cpusPerReplica: 1,
    memoryMiBPerReplica: 4096,
    args: [],
    env: {},
    port: 8000,
    healthPath: "/health",
    serving: {},
    labels: {},
    phase: "PENDING",
    desired: "running",
    generation: 1,
    observedGeneration: 0,
    replicaStatus: { ready: 0, total: 2, items: [] },
    createdAt: t0,
    updatedAt: t0,
    ...patch,
  }
}

describe("replicaCommand", () => {
  const vllm = 'exec vllm serve "$MODEL" --host 0.0.0.0 --port "$PORT" "$@"'
  const cases: Record<string, { swarm: Swarm; argv: string[] }> = {
    "model echo runs the agent's echo server": {
      swarm: swarm({ model: "echo" }),
      argv: ["swarmplane-agent", "echo-server"],
    },
    "echo passes the args on": {
      swarm: swarm({ model: "echo", args: ["--delay-ms", "5"] }),
      argv: ["swarmplane-agent", "echo-server", "--delay-ms", "5"],
    },
    "a custom command runs as given, args appended": {
      swarm: swarm({ command: ["python", "-m", "sglang.launch_server"], args: ["--tp", "2"] }),
      argv: ["python", "-m", "sglang.launch_server", "--tp", "2"],
    },
    "a custom command wins over model echo": {
      swarm: swarm({ model: "echo", command: ["my-server"] }),
      argv: ["my-server"],
    },
    "any other model runs vLLM on the agent's PORT": {
      swarm: swarm(),
      argv: ["sh", "-c", vllm, "vllm"],
    },
    "vLLM gets the args as its own ($@ after $0)": {
      swarm: swarm({ args: ["--max-model-len", "8192", "--tensor-parallel-size", "2"] }),
      argv: ["sh", "-c", vllm, "vllm", "--max-model-len", "8192", "--tensor-parallel-size", "2"],
    },
  }
  for (const [name, tc] of Object.entries(cases))
    test(name, () => expect(replicaCommand(tc.swarm)).toEqual(tc.argv))

  test("the command does not alias the swarm's arrays", () => {
    const s = swarm({ command: ["serve"], args: ["--x"] })
    replicaCommand(s).push("--mutated")
    expect(s.command).toEqual(["serve"])
    expect(s.args).toEqual(["--x"])
  })
})

describe("the router's address", () => {
  const withRouterUrl = (url?: string): Job => ({
    ...servingJob(1),
    serving: { ...servingJob(1).serving!, ...(url ? { routerUrl: url } : {}) },
  })
  const attempt = (endpoint?: string): Attempt => ({
    attemptUid: "r",
    state: "FAILED",
    createdAt: t0,
    ...(endpoint ? { endpoint } : {}),
  })
  const cases: Record<string, { job: Job; attempts: Attempt[]; port?: number; host?: string }> = {
    "a first router: none, it picks one": { job: withRouterUrl(), attempts: [] },
    "where its latest attempt listened": {
      job: withRouterUrl(),
      attempts: [attempt("http://10.0.0.1:21000"), attempt("http://10.0.0.2:21000"), attempt()],
      port: 21000,
      host: "10.0.0.2",
    },
    "a new generation: the swarm's URL it was made with": {
      job: withRouterUrl("http://10.0.0.3:22000"),
      attempts: [],
      port: 22000,
      host: "10.0.0.3",
    },
    "its own attempts win over the URL it was made with": {
      job: withRouterUrl("http://10.0.0.3:22000"),
      attempts: [attempt("http://10.0.0.4:22000")],
      port: 22000,
      host: "10.0.0.4",
    },
    "an IPv6 host, without brackets": {
      job: withRouterUrl("http://[fd00::5]:23000"),
      attempts: [],
      port: 23000,
      host: "fd00::5",
    },
    "an unparsable address: none": { job: withRouterUrl("not a url"), attempts: [] },
  }
  for (const [name, tc] of Object.entries(cases))
    test(name, () => {
      const router: Task = { ...pending(1), attempts: tc.attempts }
      expect(routerPort(tc.job, router)).toBe(tc.port)
      expect(routerHost(tc.job, router)).toBe(tc.host)
    })
})

describe("servingJobId", () => {
  const cases: Record<string, { swarm: string; generation: number; id: string }> = {
    "first generation": { swarm: "llm", generation: 1, id: "srv-llm-g1" },
    "later generation": { swarm: "llama-70b", generation: 12, id: "srv-llama-70b-g12" },
  }
  for (const [name, tc] of Object.entries(cases))
    test(name, () => expect(servingJobId(tc.swarm, tc.generation)).toBe(tc.id))

  test("generations of one swarm never share a job", () => {
    expect(servingJobId("llm", 1)).not.toBe(servingJobId("llm", 2))
  })
})

describe("a crash-looping server", () => {
  const failedAttempt = (n: number, extra: Partial<Attempt> = {}): Attempt => ({
    attemptUid: `a-${n}`,
    state: "FAILED",
    reason: "start_failed",
    exitCode: 127,
    message: "exited with code 127; last output: vllm: command not found",
    createdAt: t0,
    finishedAt: t0,
    ...extra,
  })
  const looping = (attempts: Attempt[]): Task => ({
    ...pending(0, "retrying after failure 5 of 101: exited with code 127; next try at x"),
    attempts,
    failureCount: attempts.length,
  })

  test(`${CrashLoopAttempts} failed attempts in a row, none ready: FAILED, saying why`, () => {
    const status = servingStatus(servingJob(1), [
      looping([1, 2, 3, 4, 5].map((n) => failedAttempt(n))),
      pending(1),
    ])
    expect(status).toMatchObject({ phase: "FAILED" })
    expect(status.detail).toBe(
      "replica 0 keeps failing: 5 attempts in a row ended before it was ready; the last: exited with code 127; last output: vllm: command not found",
    )
    expect(status.idle).toBeUndefined()
  })

  test("one of them ready (a server that served, then crashed): not a crash loop; the reason shows while it retries", () => {
    const attempts = [1, 2, 3, 4, 5].map((n) => failedAttempt(n, n === 3 ? { ready: true } : {}))
    const status = servingStatus(servingJob(1), [looping(attempts), running(1)])
    expect(status.phase).toBe("INITIALIZING")
    expect(status.detail).toMatch(/^0\/1 replicas ready; replica 0: retrying after failure 5 of 101/)
  })

  test("once its job is cancelled nothing runs: idle, so a teardown or a delete completes", () => {
    const status = servingStatus(servingJob(1, "CANCELLED"), [
      { ...looping([1, 2, 3, 4, 5].map((n) => failedAttempt(n))), state: "KILLED" },
      ended(1, "KILLED"),
    ])
    expect(status).toMatchObject({ phase: "FAILED", idle: true })
  })
})
