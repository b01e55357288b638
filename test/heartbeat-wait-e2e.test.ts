/**
 * Held heartbeats end to end: the local control plane and a real agent on a `workers` backend whose
 * heartbeat interval is 300 s (the most a backend allows). The agent's heartbeat is held open until work is placed on it, so a job
 * submitted while it waits runs and finishes long before the agent's next interval heartbeat would
 * have brought it; an agent that does not ask to wait still works (the old protocol).
 */
import { spawn } from "node:child_process"
import { afterAll, beforeAll, expect, test } from "vitest"
import { agentBin, type Plane, startPlane, until } from "./support/plane"

let p: Plane
const children: ReturnType<typeof spawn>[] = []

beforeAll(async () => {
  p = await startPlane()
})
afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill("SIGTERM")
  await Promise.all(
    children.map((c) => (c.exitCode === null ? new Promise((r) => c.once("exit", r)) : undefined)),
  )
  await p.stop()
})

/** A backend (heartbeat every `intervalS`) and one real agent on it, healthy. */
async function pool(id: string, waitS: number, intervalS: number): Promise<void> {
  const res = await p.call("POST", "/v1/backends", {
    id,
    config: { type: "workers", heartbeatIntervalS: intervalS, heartbeatGraceS: Math.max(5, intervalS * 3) },
  })
  expect(res.status).toBe(201)
  const child = spawn(
    process.execPath,
    [
      agentBin,
      "worker",
      ...["--api", p.plane.url, "--backend", id, "--name", id, "--cpu", "2", "--memory-mib", "2048"],
      ...["--heartbeat-wait", String(waitS)],
    ],
    { env: { ...process.env, SWARMPLANE_TOKEN: p.workerKey }, stdio: "ignore" },
  )
  children.push(child)
  await until(`the worker of ${id}`, async () => {
    const items = (await p.call("GET", `/v1/workers?backendId=${id}`)).json.items
    return items.some((w: { health: string }) => w.health === "healthy")
  })
}

async function submitAndFinish(backendId: string, deadlineMs: number) {
  const res = await p.call("POST", "/v1/jobs", { backendId, command: ["true"] })
  expect(res.status).toBe(202)
  return until(
    `job ${res.json.id} to succeed`,
    async () => {
      const job = (await p.call("GET", `/v1/jobs/${res.json.id}`)).json
      return job.status === "SUCCEEDED" && job
    },
    deadlineMs,
  )
}

test("a job placed while the agent's heartbeat is held runs without waiting for the 300 s interval", {
  timeout: 120_000,
}, async () => {
  await pool("held", 20, 300)
  // Several in a row: each is placed while the agent waits in a held heartbeat. Were work picked up
  // at the interval, the first would wait up to 5 minutes, past the test's own timeout.
  for (let i = 0; i < 3; i++) {
    const job = await submitAndFinish("held", 30_000)
    const attempt = job.tasks[0].attempts[0]
    expect(Date.parse(attempt.startedAt)).toBeGreaterThanOrEqual(Date.parse(job.createdAt))
    expect(attempt.state).toBe("SUCCEEDED")
  }
})

test("an agent that does not ask to wait heartbeats at the interval, as before, and runs its work", {
  timeout: 60_000,
}, async () => {
  await pool("interval", 0, 1)
  const job = await submitAndFinish("interval", 30_000)
  expect(job.tasks[0].attempts[0].state).toBe("SUCCEEDED")
})
