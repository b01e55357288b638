/**
 * The `slurm` backend against a real one-node Slurm (scripts/slurm-dev-cluster.sh), through the API
 * of a local control plane: array jobs, exit codes and retries, cancel, time limits, adoption of a
 * duplicate submit, a swarm behind a router, and a changed host key.
 */
import { chmodSync, mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createBackend } from "@swarmplane/core/backends/registry"
import { BackendConfig } from "@swarmplane/core/model/backend"
import { afterAll, beforeAll, describe, expect, onTestFinished, test } from "vitest"
import { assignedRefs } from "./support/assigned"
import { type Plane, until } from "./support/plane"
import { slurmConnection } from "./support/slurm"
import { type SlurmPlane, slurmPlane } from "./support/slurm-plane"
import { phaseTable, steadyLoad } from "./support/steady-load"

const connection = slurmConnection()
const suite = connection ? describe : describe.skip

suite("slurm backend on a real cluster", () => {
  const c = connection!
  let s: SlurmPlane
  let p: Plane
  let timeLimited: Promise<string>
  // The cluster's user cannot read this checkout (it may sit in a private folder): the agent goes to
  // the cluster as one file, as it would to a real one (`npm run build:agent`).
  const agentDir = mkdtempSync(join(tmpdir(), "swarmplane-agent-"))
  chmodSync(agentDir, 0o755)
  const agent = join(agentDir, "swarmplane-agent.mjs")
  const config = (extra: Record<string, unknown> = {}) =>
    s.config({ agentCommand: [process.execPath, agent], ...extra })
  /** A command on the login node, as the cluster user (the shared session; close() is a no-op). */
  const ssh = () => ({ exec: (command: string, stdin?: string) => s.login(command, stdin), close() {} })

  beforeAll(async () => {
    const { buildAgent } = await import("../scripts/build-agent.mjs")
    await buildAgent(agent)
    s = await slurmPlane(c)
    p = s.p
    expect((await p.call("POST", "/v1/backends", { id: "hpc", config: config() })).status).toBe(201)
  })
  afterAll(async () => {
    await s?.login(`scancel -u "$(id -un)"`).catch(() => undefined)
    await s?.stop()
  })

  const job = (id: string) => s.job(id)
  const submit = (spec: Record<string, unknown>) => s.submit("hpc", spec)
  const finished = (id: string, timeoutMs?: number) => s.finished(id, timeoutMs)
  const squeue = (name: string) => s.squeue(name)
  /** A 2-replica echo swarm on the cluster (listening on every address, so the router reaches it). */
  const createEchoSwarm = async (name: string) => {
    const res = await p.call("POST", "/v1/swarms", {
      name,
      backendId: "hpc",
      model: "echo",
      replicas: 2,
      memoryMiBPerReplica: 256,
      args: ["--host", "0.0.0.0"],
    })
    expect(res.status, JSON.stringify(res.json)).toBe(202)
  }
  const serving = (name: string) =>
    until(
      `swarm ${name} to be RUNNING`,
      async () => {
        const s = (await p.call("GET", `/v1/swarms/${name}?wait=RUNNING&timeoutS=20`)).json
        return s.phase === "RUNNING" && s
      },
      150_000,
    )

  test("a task queued behind a full cluster shows Slurm's reason until it starts", {
    timeout: 120_000,
  }, async () => {
    const blocker = await submit({ command: ["sleep", "300"], resources: { cpu: 8, memoryMiB: 256 } })
    onTestFinished(async () => void (await p.call("POST", `/v1/jobs/${blocker}/cancel`)))
    await until("the blocker to run", async () => (await job(blocker)).tasks[0].state === "RUNNING", 60_000)
    const waiter = await submit({ command: ["true"], resources: { cpu: 1, memoryMiB: 64 } })
    onTestFinished(async () => void (await p.call("POST", `/v1/jobs/${waiter}/cancel`)))
    const queued = await until(
      "the waiter's reason",
      async () => {
        // First "submitted; the scheduler has not looked at it yet", then Slurm's verdict.
        const t = (await job(waiter)).tasks[0]
        return t.state === "ASSIGNED" && t.pendingReason === "Slurm: waiting for resources" && t
      },
      60_000,
    )
    expect(queued.attempts).toHaveLength(1)
    // With jobs in the queue, the backend's status reads it (one running, one waiting for resources).
    const status = (await p.call("GET", "/v1/backends/hpc/status")).json.status
    expect(status.error).toBeUndefined()
    const queue: { partition: string; state: string; reason: string; count: number }[] = status.detail.queue
    expect(queue).toEqual(
      expect.arrayContaining([
        { count: 1, partition: "debug", state: "RUNNING", reason: "None" },
        { count: 1, partition: "debug", state: "PENDING", reason: "Resources" },
      ]),
    )
    expect((await p.call("POST", `/v1/jobs/${blocker}/cancel`)).status).toBe(202)
    const done = await finished(waiter)
    expect(done.status).toBe("SUCCEEDED")
    expect(done.tasks[0].pendingReason).toBeUndefined()
    // Slurm's time limits are whole minutes and checked about once a minute: the job that runs past
    // one starts now (the cluster is free again) and is checked near the end of the file, so its
    // minute or two overlaps the tests between instead of adding to the file's time.
    timeLimited = submit({ command: ["sleep", "600"], timeLimitS: 60 })
    timeLimited.catch(() => undefined)
  })

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
    const id = await submit({
      command: ["sh", "-c", "echo 'model weights not found' >&2; exit 3"],
      maxRetriesFailure: 1,
    })
    const done = await finished(id)
    expect(done.status).toBe("FAILED")
    const [first, second] = done.tasks[0].attempts
    expect(first).toMatchObject({ state: "FAILED", exitCode: 3, reason: "exit_code" })
    // Why, in the task's own words: what it printed last.
    expect(first.message).toMatch(/exited with code 3; last output: model weights not found/)
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

  test("a duplicate submit of the same attempts (a crash between submit and persist) adopts instead of submitting twice", {
    timeout: 60_000,
  }, async () => {
    const record = (await p.call("GET", "/v1/backends/hpc")).json
    const backend = await createBackend(record, p.plane.runtime)
    const spec = { command: ["sleep", "30"], tasks: 2 }
    const created = await p.plane.runtime.transitions.jobs.create(
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
    const assigned = assignedRefs(plan, created.createdAt)
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

  test("a 2-replica echo swarm reaches RUNNING behind its router, answers, keeps answering while Slurm requeues a replica, and DELETE leaves no job", {
    timeout: 240_000,
  }, async () => {
    await createEchoSwarm("slurm-echo")
    const swarm = await serving("slurm-echo")
    const reply = await fetch(`${swarm.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ model: "echo", messages: [{ role: "user", content: "from slurm" }] }),
    }).then((r) => r.json())
    expect(reply.choices[0].message.content).toBe("echo: from slurm")

    // Slurm requeues replica 1 (as after a node failure; StartTime=now skips the requeue's 2-minute
    // hold). Clients of the swarm's URL see no failed request, and the router follows the replica's
    // new address.
    const chat = () =>
      fetch(`${swarm.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ model: "echo", messages: [{ role: "user", content: "through a requeue" }] }),
      }).then((r) => r.status)
    const oldUrl: string = swarm.replicaStatus.items[1].url
    let stop = false
    const statuses: number[] = []
    const load = (async () => {
      while (!stop) statuses.push(await chat().catch(() => 0))
    })()
    // Each replica is a Slurm job of its own, named after its slot.
    const slot = swarm.replicaSet.replicas[1].slot
    const s = ssh()
    await s.exec(
      `replica=$(squeue -h -u "$(id -un)" -o '%i|%j' | awk -F'|' '$2 ~ /slurm-echo.*-r${slot}$/ {print $1}') && scontrol requeue $replica && sleep 1 && scontrol update jobid=$replica StartTime=now`,
    )
    s.close()
    const moved = await until(
      "the requeued replica to serve at a new address behind the same URL",
      async () => {
        const now = (await p.call("GET", "/v1/swarms/slurm-echo")).json
        const item = now.replicaStatus.items[1]
        if (item.state !== "READY" || item.url === oldUrl) return false
        const router = await fetch(`${swarm.url}/_swarmplane/router`).then((r) => r.json())
        return router.upstreams.includes(item.url) && !router.upstreams.includes(oldUrl) && now
      },
      90_000,
    )
    stop = true
    await load
    expect(moved.url).toBe(swarm.url)
    expect(moved.phase).toBe("RUNNING")
    expect(statuses.length).toBeGreaterThan(10)
    expect(statuses.filter((code) => code !== 200)).toEqual([])
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
    const left = (await ssh().exec(`squeue -h -u "$(id -un)" -o '%j|%T'`)).stdout
    expect(left.split("\n").filter((r: string) => /slurm-echo/.test(r) && /RUNNING|PENDING/.test(r))).toEqual(
      [],
    )
  })

  test("a steady request rate through two rolling updates and a scale 2 → 4 → 2 on Slurm: zero failed requests, one URL", {
    timeout: 400_000,
  }, async () => {
    const spec = (replicas: number, delayMs: number) => ({
      name: "slurm-roll",
      backendId: "hpc",
      model: "echo",
      replicas,
      cpusPerReplica: 1,
      memoryMiBPerReplica: 256,
      args: ["--host", "0.0.0.0", "--delay-ms", String(delayMs)],
      // The router re-reads its routing file every second: 3 s of drain covers it and every request.
      rollout: { maxSurge: 1, maxUnavailable: 0, drainTimeoutS: 3 },
    })
    const settled = (what: string, replicas: number) =>
      until(
        what,
        async () => {
          const sw = (await p.call("GET", "/v1/swarms/slurm-roll")).json
          const set = sw.replicaSet?.replicas ?? []
          return (
            sw.phase === "RUNNING" &&
            sw.observedGeneration === sw.generation &&
            set.length === replicas &&
            set.every((r: { state: string }) => r.state === "serving") &&
            sw
          )
        },
        180_000,
      )
    expect((await p.call("POST", "/v1/swarms", spec(2, 20))).status).toBe(202)
    const first = await settled("the swarm to serve with 2 replicas", 2)
    const url: string = first.url
    const load = steadyLoad(url, { ratePerS: 10, stream: true })
    await new Promise((r) => setTimeout(r, 3_000))
    const step = async (phase: string, replicas: number, delayMs: number) => {
      load.mark(phase)
      expect((await p.call("POST", "/v1/swarms", spec(replicas, delayMs))).status).toBe(202)
      const after = await settled(`the swarm to settle after ${phase}`, replicas)
      expect(after.url).toBe(url)
      expect(after.handle.meta.router).toBe(first.handle.meta.router)
    }
    await step("update 1", 2, 21)
    await step("update 2", 2, 20)
    await step("scale 2 → 4", 4, 20)
    await step("scale 4 → 2", 2, 20)
    load.mark("after")
    await new Promise((r) => setTimeout(r, 2_000))
    // The router's counters reach the plane through its file on the cluster, per replica too.
    const perReplica = await until(
      "per-replica figures from the router's counters file",
      async () => {
        const m = (await p.call("GET", "/v1/swarms/slurm-roll/metrics")).json
        return (
          m.replicas?.some(
            (r: { slot?: number; requestsPerS: number }) => r.slot !== undefined && r.requestsPerS > 0,
          ) && m
        )
      },
      30_000,
    )
    expect(perReplica.windows["1m"].requests).toBeGreaterThan(50)
    const { phases, failures } = await load.stop()
    console.log(
      `steady load on Slurm, 10 req/s of streamed chat completions, 20 ms service time\n${phaseTable(phases)}`,
    )
    expect(failures).toEqual([])
    expect((await p.call("DELETE", "/v1/swarms/slurm-roll")).status).toBe(202)
  })

  test("on Slurm an idle swarm with minReplicas 0 sleeps at zero replicas, and a request wakes it and is answered", {
    timeout: 300_000,
  }, async () => {
    expect(
      (
        await p.call("POST", "/v1/swarms", {
          name: "slurm-sleepy",
          backendId: "hpc",
          model: "echo",
          replicas: 1,
          memoryMiBPerReplica: 256,
          args: ["--host", "0.0.0.0"],
          autoscaling: { minReplicas: 0, maxReplicas: 2, scaleDownDelayS: 10, wakeTimeoutS: 120 },
          rollout: { maxSurge: 1, maxUnavailable: 0, drainTimeoutS: 2 },
        })
      ).status,
    ).toBe(202)
    const up = await serving("slurm-sleepy")
    const chat = async (text: string) => {
      const res = await fetch(`${up.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ model: "echo", messages: [{ role: "user", content: text }] }),
      })
      return { status: res.status, body: await res.text() }
    }
    expect((await chat("before sleeping")).status).toBe(200)
    // The router's counters come through its file, read each pass: the swarm's metrics have them.
    await until(
      "the router's counters to reach the swarm's metrics",
      async () => (await p.call("GET", "/v1/swarms/slurm-sleepy/metrics")).json.sampledAt,
      60_000,
    )
    const asleep = await until(
      "the idle swarm to reach zero replicas",
      async () => {
        const sw = (await p.call("GET", "/v1/swarms/slurm-sleepy")).json
        return sw.autoscaler?.replicas === 0 && sw.replicaSet?.replicas.length === 0 && sw
      },
      150_000,
    )
    expect(asleep).toMatchObject({ phase: "RUNNING", url: up.url })
    const started = Date.now()
    const answer = await chat("wake up")
    expect(answer.status).toBe(200)
    expect(answer.body).toContain("wake up")
    console.log(
      `Slurm scale to zero: the sleeping swarm's first request was answered after ${((Date.now() - started) / 1000).toFixed(1)} s`,
    )
    expect((await p.call("DELETE", "/v1/swarms/slurm-sleepy")).status).toBe(202)
  })

  test("batch inference with the swarm and the job on Slurm: 1,000 rows over 4 shards, each once; a crashed shard resumes", {
    timeout: 300_000,
  }, async () => {
    await createEchoSwarm("slurm-batch")
    // Input and output live on the cluster, where the tasks read and write them.
    const s = ssh()
    const dir = (await s.exec("mktemp -d /tmp/swarmplane-batch-XXXXXX")).stdout.trim()
    const rows = Array.from({ length: 1000 }, (_, i) => ({ id: `s-${i}`, prompt: `slurm prompt ${i}` }))
    await s.exec(`cat > ${dir}/rows.jsonl`, rows.map((r) => `${JSON.stringify(r)}\n`).join(""))
    // Submitted while the swarm still starts: the tasks wait for it rather than run without an endpoint.
    const id = await submit({
      swarm: "slurm-batch",
      tasks: 4,
      batch: { input: `${dir}/rows.jsonl`, output: `${dir}/out`, concurrency: 8, checkpointEvery: 50 },
    })
    const waiting = await until(
      "the tasks to wait for the swarm",
      async () => {
        const j = await job(id)
        return j.tasks[0].pendingReason && j
      },
      30_000,
    )
    expect(waiting.tasks[0]).toMatchObject({
      state: "PENDING",
      pendingReason: "waiting for swarm slurm-batch to be RUNNING",
    })
    const swarm = await serving("slurm-batch")
    const readLines = async (path: string) =>
      (await s.exec(`cat ${path}`)).stdout
        .split("\n")
        .filter(Boolean)
        .map(
          (l) =>
            JSON.parse(l) as {
              id: string
              error: unknown
              response: { choices: { message: { content: string } }[] }
            },
        )
    const expectEveryRowOnce = (lines: Awaited<ReturnType<typeof readLines>>) => {
      expect(lines.map((l) => l.id).sort()).toEqual(rows.map((r) => r.id).sort())
      const prompt = new Map(rows.map((r) => [r.id, r.prompt]))
      expect(
        lines.filter(
          (l) => l.error !== null || l.response.choices[0]?.message.content !== `echo: ${prompt.get(l.id)}`,
        ),
      ).toEqual([])
    }
    try {
      const done = await finished(id, 150_000)
      expect(done.status).toBe("SUCCEEDED")
      expect(
        new Set(
          done.tasks.map((t: { attempts: { target: string }[] }) => t.attempts[0]!.target.split("_")[0]),
        ).size,
      ).toBe(1)
      const shards = [0, 1, 2, 3].map((i) => `${dir}/out/shard-${i}.jsonl`)
      expectEveryRowOnce((await Promise.all(shards.map(readLines))).flat())
      // Status reads each shard's progress file on the cluster.
      const progress = done.tasks.map(
        (t: { attempts: { progress?: { done: number; total: number } }[] }) => t.attempts[0]!.progress,
      )
      expect(
        progress.reduce((sum: number, pr: { done: number } | undefined) => sum + (pr?.done ?? 0), 0),
      ).toBe(1000)

      // Resume: 2 shards that crash after 300 rows, retried once, against the same swarm.
      const asked = async () => {
        const counts = new Map<string, number>()
        for (const r of swarm.replicaStatus.items as { url: string }[])
          for (const q of (await fetch(`${r.url}/requests`).then((x) => x.json())) as string[])
            counts.set(q, (counts.get(q) ?? 0) + 1)
        return counts
      }
      const before = await asked()
      const resumed = await finished(
        await submit({
          swarm: "slurm-batch",
          tasks: 2,
          maxRetriesFailure: 1,
          env: { SWARMPLANE_BATCH_FAIL_AFTER: "300" },
          batch: { input: `${dir}/rows.jsonl`, output: `${dir}/resume`, concurrency: 8, checkpointEvery: 50 },
        }),
        200_000,
      )
      expect(resumed.status).toBe("SUCCEEDED")
      for (const task of resumed.tasks as {
        attempts: { state: string; exitCode: number; attemptUid: string }[]
      }[])
        expect(task.attempts.map((a) => [a.state, a.exitCode])).toEqual([
          ["FAILED", 3],
          ["SUCCEEDED", 0],
        ])
      expectEveryRowOnce(
        (await Promise.all([0, 1].map((i) => readLines(`${dir}/resume/shard-${i}.jsonl`)))).flat(),
      )
      // Rows the first attempts checkpointed were asked once by this job: never redone.
      const firstUids = resumed.tasks.map(
        (t: { attempts: { attemptUid: string }[] }) => t.attempts[0]!.attemptUid,
      )
      const checkpointed = (
        await Promise.all(
          [0, 1].map((i) => readLines(`${dir}/resume/shard-${i}/part-${firstUids[i]}-*.jsonl`)),
        )
      ).flat()
      expect(checkpointed.length).toBeGreaterThanOrEqual(600)
      const after = await asked()
      const prompt = new Map(rows.map((r) => [r.id, r.prompt]))
      const twice = checkpointed.filter((l) => {
        const q = prompt.get(l.id) ?? ""
        return (after.get(q) ?? 0) - (before.get(q) ?? 0) !== 1
      })
      expect(twice).toEqual([])
    } finally {
      await s.exec(`rm -rf ${dir}`)
      s.close()
      await p.call("DELETE", "/v1/swarms/slurm-batch")
    }
  })

  test("a job past its time limit is FAILED with reason timeout", { timeout: 180_000 }, async () => {
    const done = await finished(await timeLimited, 170_000)
    expect(done.status).toBe("FAILED")
    expect(done.tasks[0].attempts[0]).toMatchObject({ state: "FAILED", reason: "timeout" })
  })

  test("a changed host key is refused", async () => {
    const wrong = BackendConfig.parse(
      config({ hostKey: "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" }),
    )
    const backend = await createBackend(
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
