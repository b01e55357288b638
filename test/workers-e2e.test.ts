/**
 * The workers backend end to end, through the API, with real agents running real processes on this
 * machine: retries with new attempts, failure budgets, worker loss, cancel, gangs, head-of-line
 * blocking, scheduling timeouts and stale reports.
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, afterEach, beforeAll, describe, expect, test } from "vitest"
import { livingSleeps, sleepMarker } from "../packages/agent/src/testing/wait"
import { type Plane, startAgent, startPlane, stopAgents, until } from "./support/plane"

let p: Plane
let backends = 0
const scratch = mkdtempSync(join(tmpdir(), "swarmplane-e2e-files-"))

beforeAll(async () => {
  p = await startPlane()
})
afterEach(() => stopAgents())
afterAll(() => p.stop())

/** A fresh workers backend (heartbeat every second, dead after 5 s of silence) with agents on it. */
async function pool(
  agents: { attrs?: Record<string, string>; cpu?: number }[],
  config: Record<string, unknown> = {},
) {
  const id = `pool-${++backends}`
  const res = await p.call("POST", "/v1/backends", {
    id,
    config: { type: "workers", heartbeatIntervalS: 1, heartbeatGraceS: 5, ...config },
  })
  expect(res.status).toBe(201)
  const started = agents.map((a, i) => startAgent(p, id, `${id}-agent-${i}`, a))
  await until(`${agents.length} workers on ${id}`, async () => {
    const items = (await p.call("GET", `/v1/workers?backendId=${id}`)).json.items
    return items.filter((w: { health: string }) => w.health === "healthy").length === agents.length
  })
  return { id, agents: started }
}

async function submit(spec: Record<string, unknown>) {
  const res = await p.call("POST", "/v1/jobs", spec)
  expect(res.status, JSON.stringify(res.json)).toBe(202)
  return res.json.id as string
}

const job = async (id: string) => (await p.call("GET", `/v1/jobs/${id}`)).json
const finished = (id: string, timeoutMs = 30_000) =>
  until(
    `job ${id} to finish`,
    async () => {
      const j = await job(id)
      return ["SUCCEEDED", "FAILED", "CANCELLED"].includes(j.status) && j
    },
    timeoutMs,
  )

describe("retries and budgets", () => {
  test("a task that fails once with maxRetriesFailure 2 succeeds on a second attempt with a new attemptUid", async () => {
    const { id } = await pool([{}])
    const mark = join(scratch, "retry-mark")
    const jobId = await submit({
      backendId: id,
      command: ["sh", "-c", 'if [ -f "$MARK" ]; then exit 0; fi; touch "$MARK"; exit 3'],
      env: { MARK: mark },
      maxRetriesFailure: 2,
    })
    const done = await finished(jobId)
    expect(done.status).toBe("SUCCEEDED")
    const [first, second] = done.tasks[0].attempts
    expect(done.tasks[0].attempts).toHaveLength(2)
    expect(first).toMatchObject({ state: "FAILED", exitCode: 3, reason: "exit_code" })
    expect(second).toMatchObject({ state: "SUCCEEDED", exitCode: 0 })
    expect(second.attemptUid).not.toBe(first.attemptUid)
    expect(done.tasks[0].failureCount).toBe(1)
  })

  test("a task that cannot start backs off between attempts, and says why: the exit code and its last output", {
    timeout: 60_000,
  }, async () => {
    const { id } = await pool([{}])
    const jobId = await submit({
      backendId: id,
      command: ["sh", "-c", "echo loading the model; echo 'vllm: command not found' >&2; exit 127"],
      maxRetriesFailure: 2,
    })
    const waiting = await until(
      "the task to wait before its second attempt",
      async () => {
        const t = (await job(jobId)).tasks[0]
        return t.state === "PENDING" && t.attempts.length === 1 && t.pendingReason && t
      },
      20_000,
    )
    expect(waiting.pendingReason).toMatch(
      /^retrying after failure 1 of 3: exited with code 127; last output: loading the model \| vllm: command not found; next try at /,
    )
    const firstRetryAt = Date.parse(waiting.retryAt)
    const second = await until(
      "the task to wait before its third attempt",
      async () => {
        const t = (await job(jobId)).tasks[0]
        return t.state === "PENDING" && t.attempts.length === 2 && t.retryAt && t
      },
      20_000,
    )
    const done = await finished(jobId, 45_000)
    expect(done.status).toBe("FAILED")
    const attempts = done.tasks[0].attempts as { createdAt: string; finishedAt: string; message: string }[]
    expect(attempts).toHaveLength(3)
    // Not a tight loop: the plane put each retry 2 s, then 4 s after the failure it follows (its own
    // recorded decision, not a measured wait), and no attempt started before its retry was due.
    expect(firstRetryAt - Date.parse(attempts[0]!.finishedAt)).toBeGreaterThanOrEqual(2000)
    expect(Date.parse(second.retryAt) - Date.parse(attempts[1]!.finishedAt)).toBeGreaterThanOrEqual(4000)
    expect(Date.parse(attempts[1]!.createdAt)).toBeGreaterThanOrEqual(firstRetryAt)
    expect(Date.parse(attempts[2]!.createdAt)).toBeGreaterThanOrEqual(Date.parse(second.retryAt))
    expect(attempts[2]!.message).toMatch(/vllm: command not found/)
    // Every attempt's output stays readable.
    const first = (
      await p.call("GET", `/v1/jobs/${jobId}/tasks/0/logs?attempt=${done.tasks[0].attempts[0].attemptUid}`)
    ).json
    expect(first.lines.join("\n")).toMatch(/vllm: command not found/)
  })

  test("with a failure budget of 0 the job FAILS on the first non-zero exit", async () => {
    const { id } = await pool([{}])
    const done = await finished(
      await submit({ backendId: id, command: ["sh", "-c", "echo boom >&2; exit 3"] }),
    )
    expect(done.status).toBe("FAILED")
    expect(done.tasks[0]).toMatchObject({ state: "FAILED", attempts: [{ state: "FAILED", exitCode: 3 }] })
    const logs = (await p.call("GET", `/v1/jobs/${done.id}/tasks/0/logs`)).json
    expect(logs.lines).toContain("boom")
  })
})

describe("worker loss", () => {
  test("killing a worker's process requeues its task onto another worker (WORKER_FAILED, preemption budget)", async () => {
    const { id, agents } = await pool([{ cpu: 1 }, { cpu: 1 }])
    // Found by its argv: in the task's own pid namespace, its `$$` is not its pid here.
    const marker = sleepMarker()
    const jobId = await submit({ backendId: id, command: ["sleep", marker] })
    const running = await until("the task to run", async () => {
      const t = (await job(jobId)).tasks[0]
      return t.state === "RUNNING" && t
    })
    const workers = (await p.call("GET", `/v1/workers?backendId=${id}`)).json.items as {
      id: string
      instanceId: string
    }[]
    const victim = workers.find((w) => w.id === running.attempts[0].workerId)!
    await until("the task's process", async () => livingSleeps(marker).length === 1, 5_000)
    agents.find((a) => a.instanceId === victim.instanceId)!.kill("SIGKILL")
    // The attempt does not outlive its agent: its process is gone within moments, long before the
    // control plane gives up on the worker and runs the task elsewhere (never two copies at once).
    await until(
      "the killed agent's attempt to end with it",
      async () => livingSleeps(marker).length === 0,
      3_000,
    )
    const moved = await until(
      "the task to run again on the other worker",
      async () => {
        const t = (await job(jobId)).tasks[0]
        return t.state === "RUNNING" && t.attempts.length === 2 && t
      },
      30_000,
    )
    expect(moved.attempts[0]).toMatchObject({ state: "WORKER_FAILED", reason: "worker_lost" })
    expect(moved.attempts[1].workerId).not.toBe(victim.id)
    expect(moved.attempts[1].attemptUid).not.toBe(moved.attempts[0].attemptUid)
    expect(moved.preemptionCount).toBe(1)
    expect(moved.failureCount).toBe(0)
    const health = (await p.call("GET", `/v1/workers?backendId=${id}`)).json.items.find(
      (w: { id: string }) => w.id === victim.id,
    ).health
    expect(health).toBe("dead")
    await p.call("POST", `/v1/jobs/${jobId}/cancel`)
    await finished(jobId)
  })
})

describe("cancel", () => {
  test("cancelling a running 2-task job stops both processes and marks the tasks KILLED", async () => {
    const { id } = await pool([{}])
    const marker = sleepMarker()
    const jobId = await submit({ backendId: id, tasks: 2, command: ["sleep", marker] })
    await until("both tasks to run", async () => (await job(jobId)).counts.RUNNING === 2)
    await until("both processes", async () => livingSleeps(marker).length === 2)
    expect((await p.call("POST", `/v1/jobs/${jobId}/cancel`)).status).toBe(202)
    const done = await finished(jobId)
    expect(done.status).toBe("CANCELLED")
    expect(done.tasks.map((t: { state: string }) => t.state)).toEqual(["KILLED", "KILLED"])
    await until("both processes to be gone", async () => livingSleeps(marker).length === 0, 15_000)
  })
})

describe("placement", () => {
  test("the backend's free capacity is what the running attempts leave", async () => {
    const { id } = await pool([{ cpu: 4 }])
    const capacity = async () => (await p.call("GET", `/v1/backends/${id}/status`)).json.capacity
    expect((await capacity()).free).toMatchObject({ cpu: 4, memoryMiB: 2048 })
    const jobId = await submit({
      backendId: id,
      tasks: 2,
      command: ["sleep", "30"],
      resources: { cpu: 1.5, memoryMiB: 512 },
    })
    await until("both tasks to run", async () =>
      (await job(jobId)).tasks.every((t: { state: string }) => t.state === "RUNNING"),
    )
    expect(await capacity()).toMatchObject({
      total: { cpu: 4, memoryMiB: 2048 },
      free: { cpu: 1, memoryMiB: 1024 },
    })
    await p.call("POST", `/v1/jobs/${jobId}/cancel`)
    await finished(jobId)
    await until("the capacity to be free again", async () => (await capacity()).free.cpu === 4)
  })

  test("a 3-task gang lands on three workers of one attribute value, or not at all", async () => {
    const { id } = await pool([
      { cpu: 1, attrs: { rack: "a" } },
      { cpu: 1, attrs: { rack: "a" } },
      { cpu: 1, attrs: { rack: "b" } },
      { cpu: 1, attrs: { rack: "b" } },
    ])
    const jobId = await submit({
      backendId: id,
      tasks: 3,
      coscheduling: { groupBy: "rack" },
      command: ["sleep", "1"],
    })
    const waiting = await until("a pending reason for the gang", async () => {
      const j = await job(jobId)
      return (
        j.tasks.every(
          (t: { state: string; pendingReason?: string }) => t.state === "PENDING" && t.pendingReason,
        ) && j
      )
    })
    expect(waiting.tasks[0].pendingReason).toMatch(/gang of 3 by rack/)
    startAgent(p, id, `${id}-agent-4`, { cpu: 1, attrs: { rack: "a" } })
    const done = await finished(jobId)
    expect(done.status).toBe("SUCCEEDED")
    const workers = (await p.call("GET", `/v1/workers?backendId=${id}`)).json.items as {
      id: string
      attributes: { rack: string }
    }[]
    const used = done.tasks.map((t: { attempts: { workerId: string }[] }) => t.attempts[0]!.workerId)
    expect(new Set(used).size).toBe(3)
    expect(used.map((w: string) => workers.find((x) => x.id === w)!.attributes.rack)).toEqual(["a", "a", "a"])
  })

  test("an oversized job queued first does not block a small one, and shows why it waits", async () => {
    const { id } = await pool([{ cpu: 2 }])
    const big = await submit({ backendId: id, resources: { cpu: 64 }, command: ["true"] })
    const small = await submit({ backendId: id, command: ["true"] })
    expect((await finished(small)).status).toBe("SUCCEEDED")
    // While the small job ran the reason said "largest free is 1"; once it ended, the whole worker.
    const waiting = await until("the big job's pending reason with the small one done", async () => {
      const reason: string | undefined = (await job(big)).tasks[0].pendingReason
      return reason?.includes("largest free is 2") && reason
    })
    expect(waiting).toMatch(/^needs 64 cpu, largest free is 2/)
    expect((await job(big)).status).toBe("PENDING")
    await p.call("POST", `/v1/jobs/${big}/cancel`)
  })

  test("an impossible job with schedulingTimeoutS 1 becomes UNSCHEDULABLE", async () => {
    const { id } = await pool([{ cpu: 2 }])
    const jobId = await submit({
      backendId: id,
      resources: { gpu: 8 },
      schedulingTimeoutS: 1,
      command: ["true"],
    })
    const done = await finished(jobId)
    expect(done.status).toBe("FAILED")
    expect(done.tasks[0].state).toBe("UNSCHEDULABLE")
    expect(done.tasks[0].pendingReason).toMatch(/not placed within 1s.*gpu/)
  })
})

describe("stale reports", () => {
  test("a report about an old attempt never changes the current one", async () => {
    // A hand-driven worker (no agent), so the test decides exactly what it reports.
    const { id } = await pool([], { heartbeatGraceS: 120 })
    const reg = await p.call(
      "POST",
      "/v1/workers/register",
      { backendId: id, resources: { cpu: 2, memoryMiB: 1024 } },
      p.workerKey,
    )
    expect(reg.status).toBe(201)
    const w = reg.json.worker.id
    const beat = (attempts: unknown[]) =>
      p.call("POST", `/v1/workers/${w}/heartbeat`, { attempts }, p.workerKey, {
        "Swarmplane-Worker-Credential": reg.json.credential,
      })
    const jobId = await submit({ backendId: id, command: ["true"], maxRetriesFailure: 1 })
    const a1 = await until(
      "a first attempt in the desired set",
      async () => (await beat([])).json.desired[0]?.attemptUid,
    )
    await beat([{ attemptUid: a1, state: "FAILED", exitCode: 1 }])
    const a2 = await until("a second attempt", async () => {
      const d = (await beat([])).json.desired[0]
      return d && d.attemptUid !== a1 && d.attemptUid
    })
    await beat([{ attemptUid: a2, state: "RUNNING" }])
    const stale = await beat([{ attemptUid: a1, state: "SUCCEEDED", exitCode: 0 }])
    expect(stale.json.desired.map((d: { attemptUid: string }) => d.attemptUid)).toEqual([a2])
    const t = (await job(jobId)).tasks[0]
    expect(t.state).toBe("RUNNING")
    expect(t.attempts.map((a: { attemptUid: string; state: string }) => [a.attemptUid, a.state])).toEqual([
      [a1, "FAILED"],
      [a2, "RUNNING"],
    ])
    await beat([{ attemptUid: a2, state: "SUCCEEDED", exitCode: 0 }])
    expect((await finished(jobId)).status).toBe("SUCCEEDED")
  })
})

describe("swarms", () => {
  test("a swarm whose server cannot start says why while it retries, then FAILS with the reason and stops", {
    timeout: 120_000,
  }, async () => {
    const { id } = await pool([{ cpu: 4 }])
    const res = await p.call("POST", "/v1/swarms", {
      name: "crashing",
      model: "meta-llama/Llama-3.1-8B-Instruct",
      replicas: 1,
      memoryMiBPerReplica: 256,
      command: ["sh", "-c", "echo 'vllm: command not found' >&2; exit 127"],
      backendId: id,
    })
    expect(res.status).toBe(202)
    const get = async () => (await p.call("GET", "/v1/swarms/crashing")).json
    const retrying = await until(
      "the swarm to say its replica is retrying",
      async () => {
        const sw = await get()
        return (
          /replica 0 restarting \(attempt \d+\): retrying after failure \d+ of \d+: .*vllm: command not found/.test(
            sw.message ?? "",
          ) && sw
        )
      },
      60_000,
    )
    expect(["PENDING", "INITIALIZING"]).toContain(retrying.phase)
    const failed = await until(
      "the swarm to fail",
      async () => {
        const sw = await get()
        return sw.phase === "FAILED" && sw
      },
      100_000,
    )
    expect(failed.message).toMatch(
      /^replica 0 keeps failing: 5 attempts in a row ended before it was ready; the last: exited with code 127; last output: vllm: command not found/,
    )
    // Torn down: nothing of it is left running, and delete ends it.
    expect((await p.call("DELETE", "/v1/swarms/crashing")).status).toBe(202)
    expect((await p.call("GET", "/v1/swarms/crashing?wait=STOPPED&timeoutS=20")).json.phase).toBe("STOPPED")
  })

  test("an echo swarm serves through its router, a job runs against it, and delete stops every process", async () => {
    const { id } = await pool([{ cpu: 4 }, { cpu: 4 }])
    expect(
      (
        await p.call("POST", "/v1/swarms", {
          name: "e2e",
          model: "echo",
          replicas: 2,
          memoryMiBPerReplica: 256,
          backendId: id,
        })
      ).status,
    ).toBe(202)
    const swarm = (await p.call("GET", "/v1/swarms/e2e?wait=RUNNING&timeoutS=25")).json
    expect(swarm).toMatchObject({ phase: "RUNNING", replicaStatus: { ready: 2, total: 2 } })
    const reply = await fetch(`${swarm.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ model: "echo", messages: [{ role: "user", content: "ping" }] }),
    }).then((r) => r.json())
    expect(reply.choices[0].message.content).toBe("echo: ping")

    const jobId = await submit({
      swarm: "e2e",
      tasks: 4,
      command: ["sh", "-c", 'test -n "$SWARM_ENDPOINT" && echo "shard $SHARD_ID/$NSHARDS"'],
    })
    const done = await finished(jobId)
    expect(done.status).toBe("SUCCEEDED")
    expect(done.tasks.map((t: { attempts: unknown[] }) => t.attempts.length)).toEqual([1, 1, 1, 1])

    const replicas = swarm.replicaStatus.items.map((i: { url: string }) => i.url)
    expect((await p.call("DELETE", "/v1/swarms/e2e")).status).toBe(202)
    const stopped = (await p.call("GET", "/v1/swarms/e2e?wait=STOPPED&timeoutS=25")).json
    expect(stopped.phase).toBe("STOPPED")
    const answers = async (url: string) => {
      try {
        await fetch(`${url}/health`, { signal: AbortSignal.timeout(1000) })
        return true
      } catch {
        return false
      }
    }
    await until("the replicas and the router to stop answering", async () => {
      for (const url of [...replicas, swarm.url]) if (await answers(url)) return false
      return true
    })
  })
})
