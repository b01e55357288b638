import { describe, expect, test } from "vitest"
import { type Attempt, type Job, JobSpec, type Task } from "../../model/job"
import type { JobStatus } from "../../model/states"
import type { Swarm } from "../../model/swarm"
import type { ReplicaObservation } from "../../rules/swarm-rollout"
import { swarmFixture } from "../../rules/testing"
import {
  CrashLoopAttempts,
  observation,
  replicaCommand,
  replicaJobId,
  routerHost,
  routerJobId,
  routerPort,
} from "./serving"

const t0 = "2026-01-01T00:00:00.000Z"

/** The router job of swarm `llm` (one task, index 0). */
function servingJob(replicas: number, status: JobStatus = "RUNNING"): Job {
  return {
    id: "srv-llm-x-router-g4",
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

describe("what a serving task is, as the rollout reads it", () => {
  const cases: Record<string, { task: Task; want: ReplicaObservation }> = {
    "not placed: pending, with why": {
      task: pending(0, "needs 8 gpu, largest free is 4"),
      want: { state: "pending", detail: "needs 8 gpu, largest free is 4" },
    },
    "not placed, no reason yet: pending": { task: pending(0), want: { state: "pending" } },
    "placed: starting": { task: assigned(0), want: { state: "starting" } },
    "running, not healthy yet: starting": {
      task: running(0, { endpoint: "http://10.0.0.1:9001" }),
      want: { state: "starting" },
    },
    "healthy: ready at its endpoint": {
      task: ready(0, 9001),
      want: { state: "ready", url: "http://10.0.0.1:9001" },
    },
    "ready without an endpoint: not ready": {
      task: running(0, { ready: true }),
      want: { state: "starting" },
    },
    "a ready flag on a task no longer running does not count": {
      task: task(0, "BUILDING", { state: "BUILDING", ready: true, endpoint: "http://10.0.0.1:9001" }),
      want: { state: "starting" },
    },
    "FAILED for good: failed, over, with its exit code and reason": {
      task: ended(0, "FAILED", 1, "CUDA out of memory"),
      want: { state: "failed", over: true, detail: "failed (exit code 1): CUDA out of memory" },
    },
    "unschedulable: failed, saying why": {
      task: ended(0, "UNSCHEDULABLE", undefined, "needs 80 gpu, largest free is 8"),
      want: { state: "failed", over: true, detail: "unschedulable: needs 80 gpu, largest free is 8" },
    },
    "its worker lost for good: failed": {
      task: ended(0, "WORKER_FAILED"),
      want: { state: "failed", over: true, detail: "worker_failed" },
    },
    "KILLED (stopped by us): ended": { task: ended(0, "KILLED"), want: { state: "ended", detail: "killed" } },
    "its agent restarting it: starting, with the agent's word": {
      task: running(0, {
        endpoint: "http://10.0.0.1:21000",
        ready: false,
        message: "router restarting (restart 2 of 5): the router process was killed by SIGKILL",
      }),
      want: {
        state: "starting",
        detail: "router restarting (restart 2 of 5): the router process was killed by SIGKILL",
      },
    },
    "placed again after its attempt failed: starting, with the attempt and why": {
      task: {
        ...pending(0, "retrying after failure 1 of 101: port 21000 on 10.0.0.1 is in use; next try at x"),
        attempts: [{ attemptUid: "r-1", state: "FAILED", endpoint: "http://10.0.0.1:21000", createdAt: t0 }],
      },
      want: {
        state: "starting",
        detail:
          "restarting (attempt 2): retrying after failure 1 of 101: port 21000 on 10.0.0.1 is in use; next try at x",
      },
    },
    "moved off a lost worker, starting again: saying so": {
      task: {
        ...assigned(0),
        attempts: [
          { attemptUid: "r-1", state: "WORKER_FAILED", endpoint: "http://10.0.0.1:21000", createdAt: t0 },
          { attemptUid: "r-2", state: "ASSIGNED", createdAt: t0 },
        ],
      },
      want: { state: "starting", detail: "restarting (attempt 2)" },
    },
  }
  for (const [name, tc] of Object.entries(cases))
    test(name, () => expect(observation(tc.task)).toEqual(tc.want))
})

const swarm = (patch: Partial<Swarm> = {}): Swarm =>
  swarmFixture({
    model: "meta-llama/Llama-3.1-8B-Instruct",
    gpusPerReplica: 1,
    phase: "PENDING",
    observedGeneration: 0,
    ...patch,
  })

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

describe("serving job ids", () => {
  const llm = swarm({ createdAt: "2026-01-01T00:00:00.000Z" })
  test("a replica's job is named by the swarm, its incarnation and its slot", () => {
    expect(replicaJobId(llm, 7)).toBe(`srv-llm-${Date.parse(llm.createdAt).toString(36)}-r7`)
  })
  test("slots and generations never share a job; a swarm made again under its name does not adopt", () => {
    expect(replicaJobId(llm, 1)).not.toBe(replicaJobId(llm, 2))
    expect(routerJobId(llm, 1)).not.toBe(routerJobId(llm, 2))
    const again = swarm({ createdAt: "2026-01-02T00:00:00.000Z" })
    expect(replicaJobId(again, 1)).not.toBe(replicaJobId(llm, 1))
    expect(routerJobId(again, 1)).not.toBe(routerJobId(llm, 1))
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

  test(`${CrashLoopAttempts} failed attempts in a row, none ready: failed, saying why, though it restarts`, () => {
    expect(observation(looping([1, 2, 3, 4, 5].map((n) => failedAttempt(n))))).toEqual({
      state: "failed",
      detail:
        "keeps failing: 5 attempts in a row ended before it was ready; the last: exited with code 127; last output: vllm: command not found",
    })
  })

  test("one of them ready (a server that served, then crashed): not a crash loop; the reason shows while it retries", () => {
    const attempts = [1, 2, 3, 4, 5].map((n) => failedAttempt(n, n === 3 ? { ready: true } : {}))
    const seen = observation(looping(attempts))
    expect(seen.state).toBe("starting")
    expect(seen.detail).toMatch(/^restarting \(attempt 6\): retrying after failure 5 of 101/)
  })

  test("once it is stopped nothing runs: ended, so a drain or a delete completes", () => {
    const stopped = { ...looping([1, 2, 3, 4, 5].map((n) => failedAttempt(n))), state: "KILLED" as const }
    expect(observation(stopped).state).toBe("ended")
  })
})
