/**
 * The `slurm` backend against a real one-node Slurm (scripts/slurm-dev-cluster.sh), through the API
 * of a local control plane: array jobs, exit codes and retries, cancel, time limits, adoption of a
 * duplicate submit, a swarm behind a router, and a changed host key.
 */
import { chmodSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createBackend } from "@swarmplane/core/backends/registry"
import { SshSession } from "@swarmplane/core/backends/slurm/ssh"
import { BackendConfig } from "@swarmplane/core/model/backend"
import { afterAll, beforeAll, describe, expect, test } from "vitest"
import { type Plane, startPlane, until } from "./support/plane"
import { privateKeyOf, slurmConnection } from "./support/slurm"

const connection = slurmConnection()
const suite = connection ? describe : describe.skip

suite("slurm backend on a real cluster", () => {
  const c = connection!
  let p: Plane
  // The cluster's user cannot read this checkout (it may sit in a private folder): the agent goes to
  // the cluster as one file, as it would to a real one (`npm run build:agent`).
  const agentDir = mkdtempSync(join(tmpdir(), "swarmplane-agent-"))
  chmodSync(agentDir, 0o755)
  const agent = join(agentDir, "swarmplane-agent.mjs")
  const config = (extra: Record<string, unknown> = {}) => ({
    type: "slurm",
    loginHost: c.host,
    port: c.port,
    user: c.user,
    sshKeySecret: "slurm-key",
    hostKey: c.hostKey,
    partition: c.partition,
    gpuPartition: c.gpuPartition,
    timeLimit: "00:10:00",
    agentCommand: [process.execPath, agent],
    ...extra,
  })
  const ssh = () =>
    new SshSession({
      host: c.host,
      port: c.port,
      user: c.user,
      privateKey: privateKeyOf(c),
      hostKey: c.hostKey,
      connectTimeoutS: 10,
      commandTimeoutS: 60,
    })

  beforeAll(async () => {
    const { buildAgent } = await import("../scripts/build-agent.mjs")
    await buildAgent(agent)
    p = await startPlane()
    const secrets = join(p.dir, "data", "secrets", "default")
    mkdirSync(secrets, { recursive: true })
    writeFileSync(join(secrets, "slurm-key"), privateKeyOf(c), { mode: 0o600 })
    expect((await p.call("POST", "/v1/backends", { id: "hpc", config: config() })).status).toBe(201)
  })
  afterAll(() => p?.stop())

  const job = async (id: string) => (await p.call("GET", `/v1/jobs/${id}`)).json
  const submit = async (spec: Record<string, unknown>) => {
    const res = await p.call("POST", "/v1/jobs", { backendId: "hpc", ...spec })
    expect(res.status, JSON.stringify(res.json)).toBe(202)
    return res.json.id as string
  }
  const finished = (id: string, timeoutMs = 60_000) =>
    until(
      `job ${id} to finish`,
      async () => {
        const j = await job(id)
        return ["SUCCEEDED", "FAILED", "CANCELLED"].includes(j.status) && j
      },
      timeoutMs,
    )
  const squeue = async (name: string) => {
    const s = ssh()
    const out = await s.exec(`squeue -h -t all -u "$(id -un)" --name=${name} -o '%i|%T'`)
    s.close()
    return out.stdout.trim().split("\n").filter(Boolean)
  }

  test("a 4-task job runs as one array job and every task SUCCEEDS", { timeout: 90_000 }, async () => {
    const id = await submit({
      tasks: 4,
      command: ["sh", "-c", 'echo "shard $SHARD_ID of $NSHARDS ($ATTEMPT_UID)"'],
    })
    const done = await finished(id)
    expect(done.status).toBe("SUCCEEDED")
    const targets = done.tasks.map((t: { attempts: { target: string }[] }) => t.attempts[0]!.target)
    const arrays = new Set(targets.map((t: string) => t.split("_")[0]))
    expect(arrays.size).toBe(1)
    expect(targets.map((t: string) => Number(t.split("_")[1])).sort()).toEqual([0, 1, 2, 3])
    const logs = (await p.call("GET", `/v1/jobs/${id}/tasks/2/logs`)).json
    expect(logs.lines.join("\n")).toMatch(/shard 2 of 4 \(a-/)
  })

  test("a task that exits 3 is FAILED with exit code 3 and retried as its own submission with a new attemptUid", {
    timeout: 90_000,
  }, async () => {
    const id = await submit({ command: ["sh", "-c", "exit 3"], maxRetriesFailure: 1 })
    const done = await finished(id)
    expect(done.status).toBe("FAILED")
    const [first, second] = done.tasks[0].attempts
    expect(first).toMatchObject({ state: "FAILED", exitCode: 3, reason: "exit_code" })
    expect(second).toMatchObject({ state: "FAILED", exitCode: 3 })
    expect(second.attemptUid).not.toBe(first.attemptUid)
    expect(second.target.split("_")[0]).not.toBe(first.target.split("_")[0])
  })

  test("cancel → KILLED and the Slurm job gone", { timeout: 90_000 }, async () => {
    const id = await submit({ command: ["sleep", "300"] })
    const running = await until(
      "the task to run",
      async () => {
        const t = (await job(id)).tasks[0]
        return t.state === "RUNNING" && t
      },
      60_000,
    )
    const name = running.attempts[0].submission.split("#")[0]
    expect((await p.call("POST", `/v1/jobs/${id}/cancel`)).status).toBe(202)
    const done = await finished(id)
    expect(done.status).toBe("CANCELLED")
    expect(done.tasks[0].state).toBe("KILLED")
    const rows = await squeue(name)
    expect(rows.every((r) => !/RUNNING|PENDING/.test(r))).toBe(true)
  })

  test("a job past its time limit is FAILED with reason timeout", { timeout: 180_000 }, async () => {
    const id = await submit({ command: ["sleep", "600"], timeLimitS: 60 })
    const done = await finished(id, 170_000)
    expect(done.status).toBe("FAILED")
    expect(done.tasks[0].attempts[0]).toMatchObject({ state: "FAILED", reason: "timeout" })
  })

  test("a duplicate submit of the same attempts (a crash between submit and persist) adopts instead of submitting twice", {
    timeout: 60_000,
  }, async () => {
    const record = (await p.call("GET", "/v1/backends/hpc")).json
    const backend = createBackend(record, p.plane.runtime)
    const spec = { command: ["sleep", "30"], tasks: 2 }
    const created = await p.plane.runtime.repos.jobs.create(
      "default",
      "job-adopt-test",
      (await import("@swarmplane/core/model/job")).JobSpec.parse(spec),
      "other",
    )
    const tasks = (await p.plane.runtime.repos.jobs.load("default", created.id))!.tasks
    const refs = tasks.map((task) => ({ job: created, task }))
    const plan = await backend.schedule({
      pending: refs,
      live: [],
      mintAttemptUid: () => `a-adopt-${Math.random().toString(36).slice(2, 8)}`,
    })
    const assigned = plan.assignments.map((a) => ({
      job: created,
      task: {
        ...a.ref.task,
        data: {
          ...a.ref.task.data,
          state: "ASSIGNED" as const,
          attempts: [
            {
              attemptUid: a.attemptUid,
              state: "ASSIGNED" as const,
              submission: a.submission!,
              createdAt: created.createdAt,
            },
          ],
        },
      },
    }))
    const first = await backend.launch({ attempts: assigned })
    const again = await backend.launch({ attempts: assigned })
    await backend.close()
    expect(first.launched.map((l) => l.target)).toEqual(again.launched.map((l) => l.target))
    const name = plan.assignments[0]!.submission!.split("#")[0]!
    const rows = await squeue(name)
    expect(new Set(rows.map((r) => r.split("|")[0]!.split("_")[0])).size).toBe(1)
    const s = ssh()
    await s.exec(`scancel --name=${name}`)
    s.close()
  })

  test("a 2-replica echo swarm reaches RUNNING behind its router, answers a chat completion, and DELETE leaves no job", {
    timeout: 180_000,
  }, async () => {
    const res = await p.call("POST", "/v1/swarms", {
      name: "slurm-echo",
      backendId: "hpc",
      model: "echo",
      replicas: 2,
      memoryMiBPerReplica: 256,
      args: ["--host", "0.0.0.0"],
    })
    expect(res.status).toBe(202)
    const swarm = await until(
      "the swarm to be RUNNING",
      async () => {
        const s = (await p.call("GET", "/v1/swarms/slurm-echo?wait=RUNNING&timeoutS=20")).json
        return s.phase === "RUNNING" && s
      },
      150_000,
    )
    const reply = await fetch(`${swarm.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ model: "echo", messages: [{ role: "user", content: "from slurm" }] }),
    }).then((r) => r.json())
    expect(reply.choices[0].message.content).toBe("echo: from slurm")
    const names = [swarm.handle.meta.replicas, swarm.handle.meta.router]
    expect((await p.call("DELETE", "/v1/swarms/slurm-echo")).status).toBe(202)
    const stopped = await until(
      "the swarm to be STOPPED",
      async () => {
        const s = (await p.call("GET", "/v1/swarms/slurm-echo?wait=STOPPED&timeoutS=20")).json
        return s.phase === "STOPPED" && s
      },
      60_000,
    )
    expect(stopped.desired).toBe("deleted")
    for (const name of names)
      expect((await squeue(name)).filter((r) => /RUNNING|PENDING/.test(r))).toEqual([])
  })

  test("a changed host key is refused", async () => {
    const wrong = BackendConfig.parse(
      config({ hostKey: "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" }),
    )
    const backend = createBackend(
      {
        id: "hpc-wrong",
        project: "default",
        kind: "delegated",
        config: wrong,
        status: {},
        createdAt: "",
        updatedAt: "",
      },
      p.plane.runtime,
    )
    await expect(backend.status()).rejects.toMatchObject({
      code: "backend.host_key_changed",
      message: expect.stringContaining(c.hostKeyFingerprint),
    })
    await backend.close()
  })
})
