/**
 * The `slurm` backend on the real dev cluster, broken on purpose the ways login nodes and clusters
 * break, each asserted through the API as a user sees it: a login node that hangs or refuses, a changed
 * host key, a missing secret, an unknown partition, hostile values in every field, a launch cut off
 * after sbatch, an admin's scancel, a node that goes down and comes back, a replica Slurm requeues,
 * and a FAILED swarm deleted. Runs one file at a time with the other Slurm suites (vitest.config.ts).
 */
import { randomBytes } from "node:crypto"
import { createBackend } from "@swarmplane/core/backends/registry"
import { SshSession } from "@swarmplane/core/backends/slurm/ssh"
import { BackendConfig } from "@swarmplane/core/model/backend"
import { JobSpec } from "@swarmplane/core/model/job"
import { afterAll, beforeAll, describe, expect, onTestFinished, test } from "vitest"
import { until } from "./support/plane"
import { slurmConnection } from "./support/slurm"
import { type SlurmPlane, slurmPlane } from "./support/slurm-plane"
import { type TcpProxy, tcpProxy } from "./support/tcp-proxy"

const connection = slurmConnection()
const suite = connection ? describe : describe.skip
type Attempt = { attemptUid: string; state: string; reason?: string; message?: string; target?: string }

suite("slurm backend under faults", () => {
  const c = connection!
  let s: SlurmPlane
  beforeAll(async () => {
    s = await slurmPlane(c)
    await s.register("hpc")
  })
  afterAll(async () => {
    await s?.login(`scancel -u "$(id -un)"`).catch(() => undefined)
    await s?.stop()
  })
  const backendStatus = async (id: string) => (await s.p.call("GET", `/v1/backends/${id}`)).json.status
  const task0 = async (id: string) => (await s.job(id)).tasks[0]

  describe("a login node that hangs, refuses or drops", () => {
    let proxy: TcpProxy
    beforeAll(async () => {
      proxy = await tcpProxy({ host: c.host, port: c.port }, "hang")
      await s.register("flaky", { port: proxy.port, connectTimeoutS: 2, commandTimeoutS: 20 })
    })
    afterAll(() => proxy?.close())

    test("a port that accepts but never speaks SSH: status says so, and nothing crashes", async () => {
      const res = await s.p.call("GET", "/v1/backends/flaky/status")
      expect(res.status).toBe(200)
      expect(res.json.status.error).toMatch(/did not complete an SSH handshake within 2s/)
      expect(await backendStatus("flaky")).toMatchObject({
        healthy: false,
        message: expect.stringMatching(/handshake/),
      })
      // ssh2 emits a second error when the socket closes after the timeout: the process outlives it.
      await new Promise((r) => setTimeout(r, 3000))
      expect((await s.p.call("GET", "/health")).status).toBe(200)
    })

    test("tasks wait with the reason while it hangs and refuses, then run once when it answers", {
      timeout: 180_000,
    }, async () => {
      const id = await s.submit("flaky", { tasks: 2, command: ["sh", "-c", "echo shard $SHARD_ID"] })
      await until(
        "the tasks to say why they are not submitted",
        async () => /not submitted yet \(try \d+\): .*handshake/.test((await task0(id)).pendingReason ?? ""),
        30_000,
      )
      expect((await task0(id)).state).toBe("ASSIGNED")
      await proxy.set("refuse")
      await until(
        "the reason to become a refused connection",
        async () => /connection refused/.test((await task0(id)).pendingReason ?? ""),
        60_000,
      )
      expect(await backendStatus("flaky")).toMatchObject({ healthy: false })
      await proxy.set("forward")
      const done = await s.finished(id, 90_000)
      expect(done.status).toBe("SUCCEEDED")
      for (const task of done.tasks) {
        expect(task.attempts).toHaveLength(1)
        expect(task.attempts[0].submitFailures).toBeGreaterThanOrEqual(2)
      }
      const name = done.tasks[0].attempts[0].submission.split("#")[0]
      expect(new Set((await s.squeue(name)).map((r) => r.split("_")[0])).size).toBe(1)
      expect(await backendStatus("flaky")).toMatchObject({ healthy: true })
    })

    test("a connection cut mid-run and a hang on reconnect: unhealthy with the reason, then the task finishes", {
      timeout: 120_000,
    }, async () => {
      const id = await s.submit("flaky", { command: ["sleep", "8"] })
      await until("the task to run", async () => (await task0(id)).state === "RUNNING", 60_000)
      await proxy.set("hang")
      proxy.drop()
      await until(
        "the backend to be unhealthy",
        async () => /handshake|closed|timed out/.test((await backendStatus("flaky")).message ?? ""),
        30_000,
      )
      expect((await task0(id)).state).toBe("RUNNING")
      await proxy.set("forward")
      const done = await s.finished(id, 60_000)
      expect(done.status).toBe("SUCCEEDED")
      expect(done.tasks[0].attempts).toHaveLength(1)
      // Health is recorded at the end of the pass whose writes ended the job: at most a pass later.
      await until(
        "the backend to be healthy again",
        async () => (await backendStatus("flaky")).healthy,
        30_000,
      )
    })
  })

  test("a changed host key and a missing secret: unhealthy with the reason; fixed, the waiting task runs", {
    timeout: 120_000,
  }, async () => {
    await s.register("badkey", { hostKey: "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" })
    const status = (await s.p.call("GET", "/v1/backends/badkey/status")).json
    expect(status.status.error).toContain(c.hostKeyFingerprint)
    expect(await backendStatus("badkey")).toMatchObject({
      healthy: false,
      message: expect.stringContaining("not the pinned one"),
    })
    const id = await s.submit("badkey", { command: ["true"] })
    await until(
      "the task to say why it waits",
      async () => /host key/.test((await task0(id)).pendingReason ?? ""),
      30_000,
    )
    await s.register("badkey", { hostKey: c.hostKey })
    expect((await s.finished(id, 90_000)).status).toBe("SUCCEEDED")

    await s.register("nosecret", { sshKeySecret: "absent-key" })
    await s.p.call("GET", "/v1/backends/nosecret/status")
    expect(await backendStatus("nosecret")).toMatchObject({
      healthy: false,
      message: expect.stringContaining("absent-key"),
    })
  })

  test("an unknown partition: the backend says so, and sbatch's words reach the attempt, the events and the job", {
    timeout: 60_000,
  }, async () => {
    await s.register("nopart", { partition: "nosuch", gpuPartition: "nosuch" })
    await s.p.call("GET", "/v1/backends/nopart/status")
    expect(await backendStatus("nopart")).toMatchObject({
      healthy: false,
      message: expect.stringContaining('partition "nosuch" does not exist'),
    })
    const id = await s.submit("nopart", { command: ["true"] })
    const done = await s.finished(id)
    expect(done.status).toBe("FAILED")
    const attempt: Attempt = done.tasks[0].attempts[0]
    expect(attempt).toMatchObject({ state: "FAILED", reason: "submit_failed" })
    expect(attempt.message).toMatch(/sbatch refused the job: .*invalid partition/i)
    const events = (await s.p.call("GET", `/v1/jobs/${id}/events`)).json.items
    expect(events.some((e: { message?: string }) => /invalid partition/i.test(e.message ?? ""))).toBe(true)
  })

  describe("hostile values", () => {
    const marker = `/tmp/swarmplane-pwned-${randomBytes(4).toString("hex")}`
    const hostile = [
      `debug\ntouch ${marker}`,
      `debug; touch ${marker}`,
      `$(touch ${marker})`,
      `\`touch ${marker}\``,
      `debug' ; touch ${marker}; '`,
      `debug" ; touch ${marker}; "`,
      "debug\0x",
      "d".repeat(3000),
    ]
    const nothingRan = async () =>
      expect((await s.login(`test -e ${marker}; echo $?`)).stdout.trim()).toBe("1")

    test("every field that reaches Slurm is refused at the API with its path, and nothing is written", async () => {
      const configFields: Record<string, (v: string) => Record<string, unknown>> = {
        partition: (v) => ({ partition: v }),
        gpuPartition: (v) => ({ gpuPartition: v }),
        account: (v) => ({ account: v }),
        qos: (v) => ({ qos: v }),
        timeLimit: (v) => ({ timeLimit: v }),
        gresGpuName: (v) => ({ gresGpuName: v }),
        outputDir: (v) => ({ outputDir: v }),
        "extraSbatch.0": (v) => ({ extraSbatch: [`--comment=${v.replace(/^debug/, "")}\n--x`] }),
        "setup.0": (v) => ({ setup: [`echo ${v}\ntouch ${marker}`] }),
        loginHost: (v) => ({ loginHost: v }),
        "agentCommand.0": () => ({ agentCommand: ["node\0x"] }),
      }
      for (const [field, place] of Object.entries(configFields))
        for (const value of hostile) {
          const res = await s.p.call("POST", "/v1/backends", {
            id: "hostile",
            config: s.config(place(value)),
          })
          expect(res.status, `${field} = ${JSON.stringify(value)}`).toBe(400)
          expect(
            res.json.error.details.map((d: { path: string }) => d.path),
            `${field} = ${JSON.stringify(value)}`,
          ).toContain(`config.${field}`)
        }
      expect((await s.p.call("GET", "/v1/backends/hostile")).status).toBe(404)

      for (const value of hostile) {
        for (const [path, body] of [
          ["serving.slurm.partition", { serving: { slurm: { partition: value } } }],
          ["serving.slurm.timeLimit", { serving: { slurm: { timeLimit: value } } }],
        ] as const) {
          const res = await s.p.call("POST", "/v1/swarms", {
            name: "hostile",
            backendId: "hpc",
            model: "echo",
            ...body,
          })
          expect(res.status, `${path} = ${JSON.stringify(value)}`).toBe(400)
          expect(res.json.error.details.map((d: { path: string }) => d.path)).toContain(path)
        }
        for (const [path, body] of [
          ["constraints.0.value", { constraints: [{ key: "partition", op: "eq", value }] }],
          ["constraints.0.value", { constraints: [{ key: "feature", op: "eq", value }] }],
          ["env", { env: { [value]: "1" } }],
        ] as const) {
          const res = await s.p.call("POST", "/v1/jobs", { backendId: "hpc", command: ["true"], ...body })
          expect(res.status, `${path} = ${JSON.stringify(value)}`).toBe(400)
          expect(
            res.json.error.details.map((d: { path: string }) =>
              d.path.split(".").slice(0, path.split(".").length).join("."),
            ),
          ).toContain(path)
        }
      }
      const nul = await s.p.call("POST", "/v1/jobs", { backendId: "hpc", command: ["echo", "a\0b"] })
      expect(nul.status).toBe(400)
      expect((await s.p.call("GET", "/v1/swarms/hostile")).status).toBe(404)
      await nothingRan()
    })

    test("past the API (an item written straight to the store): refused where the script is written, nothing runs", {
      timeout: 60_000,
    }, async () => {
      const rt = s.p.plane.runtime
      const spec = JobSpec.parse({
        command: ["true"],
        constraints: [{ key: "partition", op: "eq", value: "debug" }],
      })
      // The schema would refuse the value; a stored item can still hold it (an old version, a direct write).
      spec.constraints[0]!.value = `debug\ntouch ${marker}`
      const job = await rt.transitions.jobs.create("default", "job-hostile-store", spec, "hpc")
      const done = await s.finished(job.id, 30_000)
      expect(done.status).toBe("FAILED")
      const attempt: Attempt = done.tasks[0].attempts[0]
      expect(attempt.message).toMatch(/refused to submit to Slurm: constraint partition "debug\\ntouch/)
      await nothingRan()
    })

    test("values that are data stay data: an argument and an env value reach the task literally", {
      timeout: 60_000,
    }, async () => {
      const value = `$(touch ${marker}) \`touch ${marker}\`; touch ${marker} 'q' "d"`
      const id = await s.submit("hpc", {
        command: ["sh", "-c", 'printf "%s|%s\\n" "$1" "$VALUE"', "sh", value],
        env: { VALUE: value },
      })
      expect((await s.finished(id)).status).toBe("SUCCEEDED")
      const logs = (await s.p.call("GET", `/v1/jobs/${id}/tasks/0/logs`)).json.lines
      expect(logs).toContain(`${value}|${value}`)
      await nothingRan()
    })
  })

  test("a launch cut off after sbatch (the plane crashed before it saved the id) is adopted, even after it ran to the end", {
    timeout: 90_000,
  }, async () => {
    const rt = s.p.plane.runtime
    // The crashed plane's view: a job on backend "crashed", its tasks persisted ASSIGNED with their
    // submission, then sbatch ran, and the plane died before it saved the Slurm id.
    const record = {
      id: "crashed",
      project: "default",
      kind: "delegated" as const,
      config: BackendConfig.parse(s.config()),
      status: {},
      createdAt: "",
      updatedAt: "",
    }
    const job = await rt.transitions.jobs.create(
      "default",
      "job-crashed",
      JobSpec.parse({ command: ["sh", "-c", "echo ran $SHARD_ID"], tasks: 2 }),
      "crashed",
    )
    const tasks = (await rt.repos.jobs.load("default", job.id))!.tasks
    const backend = await createBackend(record, rt)
    let n = 0
    const plan = await backend.schedule({
      pending: tasks.map((task) => ({ job, task })),
      live: [],
      mintAttemptUid: () => `a-crashed-${n++}`,
    })
    await rt.transitions.jobs.applyReports(
      job,
      plan.assignments.map((a) => ({
        index: a.ref.task.data.index,
        outcome: { kind: "assigned" as const, attemptUid: a.attemptUid, submission: a.submission! },
      })),
    )
    const assigned = (await rt.repos.jobs.load("default", job.id))!.tasks.map((task) => ({ job, task }))
    const first = await backend.launch({ attempts: assigned })
    await backend.close()
    const arrayId = first.launched[0]!.target.split("_")[0]
    const name = plan.assignments[0]!.submission!.split("#")[0]!
    await until(
      "the array to run to the end",
      async () => (await s.squeue(name)).every((r) => r.endsWith("|COMPLETED")),
      30_000,
    )
    // The plane comes back (the backend is registered now): it adopts instead of submitting again.
    await s.register("crashed")
    const done = await s.finished(job.id, 60_000)
    expect(done.status).toBe("SUCCEEDED")
    expect(
      done.tasks.map((t: { attempts: Attempt[] }) => t.attempts.map((a) => a.target!.split("_")[0])),
    ).toEqual([[arrayId], [arrayId]])
    expect(new Set((await s.squeue(name)).map((r) => r.split("_")[0])).size).toBe(1)
  })

  test("a job cancelled on the cluster by an admin fails its attempt, says so, and is retried within its budget", {
    timeout: 90_000,
  }, async () => {
    const id = await s.submit("hpc", { command: ["sleep", "300"], maxRetriesFailure: 1 })
    const running = await until(
      "the task to run",
      async () => {
        const t = await task0(id)
        return t.state === "RUNNING" && t
      },
      60_000,
    )
    await s.login(`scancel ${running.attempts[0].target}`)
    const retried = await until(
      "the retry",
      async () => {
        const t = await task0(id)
        return t.attempts.length === 2 && t
      },
      30_000,
    )
    expect(retried.attempts[0]).toMatchObject({
      state: "FAILED",
      reason: "cancelled_on_cluster",
      message: expect.stringMatching(/cancelled.* on the cluster, not through swarmplane/),
    })
    expect(retried.failureCount).toBe(1)
    const events = (await s.p.call("GET", `/v1/jobs/${id}/events`)).json.items
    expect(events.some((e: { message?: string }) => /not through swarmplane/.test(e.message ?? ""))).toBe(
      true,
    )
    await s.p.call("POST", `/v1/jobs/${id}/cancel`)
    expect((await s.finished(id)).status).toBe("CANCELLED")
  })

  const root = process.getuid?.() === 0
  test.skipIf(!root)(
    "a node that fails and comes back: the attempt is a worker failure, the task runs again with its own log",
    {
      timeout: 180_000,
    },
    async () => {
      const { execFileSync } = await import("node:child_process")
      const node = execFileSync("sinfo", ["-h", "-N", "-o", "%N"], { encoding: "utf8" })
        .trim()
        .split("\n")[0]!
      const update = (...args: string[]) => {
        try {
          execFileSync("scontrol", ["update", `nodename=${node}`, ...args], { stdio: "pipe" })
        } catch {} // resuming a node that is already back is refused, and that is fine
      }
      onTestFinished(() => update("state=resume"))
      const id = await s.submit("hpc", { command: ["sh", "-c", "echo run $ATTEMPT_UID; sleep 300"] })
      await until("the task to run", async () => (await task0(id)).state === "RUNNING", 60_000)
      // DOWN kills what runs there (NODE_FAIL); DRAIN keeps the node from coming straight back, as a
      // node under repair does, until it is resumed.
      update("state=down", "reason=swarmplane-test")
      update("state=drain", "reason=swarmplane-test")
      const waiting = await until(
        "a second attempt waiting in Slurm's queue",
        async () => {
          const t = await task0(id)
          return t.attempts.length === 2 && t.state === "ASSIGNED" && t.attempts[1].target && t
        },
        60_000,
      )
      expect(waiting.attempts[0]).toMatchObject({ state: "WORKER_FAILED", reason: "node_fail" })
      expect(waiting.preemptionCount).toBe(1)
      // Never RUNNING while the node is out: it waits, with Slurm's reason.
      await until("Slurm's reason", async () => /^Slurm: /.test((await task0(id)).pendingReason ?? ""))
      expect((await task0(id)).state).toBe("ASSIGNED")
      update("state=resume")
      const again = await until(
        "the second attempt to run",
        async () => {
          const t = await task0(id)
          return t.state === "RUNNING" && t
        },
        90_000,
      )
      const logOf = async (uid: string) =>
        (await s.p.call("GET", `/v1/jobs/${id}/tasks/0/logs?attempt=${uid}`)).json.lines.join("\n")
      expect(await logOf(again.attempts[0].attemptUid)).toContain(`run ${again.attempts[0].attemptUid}`)
      await until("the second run's log", async () =>
        (await logOf(again.attempts[1].attemptUid)).includes(`run ${again.attempts[1].attemptUid}`),
      )
      expect(await logOf(again.attempts[1].attemptUid)).not.toContain(again.attempts[0].attemptUid)
      await s.p.call("POST", `/v1/jobs/${id}/cancel`)
      expect((await s.finished(id)).status).toBe("CANCELLED")
    },
  )

  test("a swarm whose replicas fail is FAILED, and DELETE from FAILED completes", {
    timeout: 120_000,
  }, async () => {
    const res = await s.p.call("POST", "/v1/swarms", {
      name: "broken",
      backendId: "hpc",
      model: "echo",
      replicas: 2,
      memoryMiBPerReplica: 128,
      command: ["sh", "-c", "exit 3"],
    })
    expect(res.status).toBe(202)
    const failed = await until(
      "the swarm to fail",
      async () => {
        const sw = (await s.p.call("GET", "/v1/swarms/broken")).json
        return sw.phase === "FAILED" && sw
      },
      60_000,
    )
    expect(failed.message).toMatch(/^replica \d+ /)
    expect((await s.p.call("DELETE", "/v1/swarms/broken")).status).toBe(202)
    const stopped = await until(
      "the swarm to stop",
      async () => {
        const sw = (await s.p.call("GET", "/v1/swarms/broken")).json
        return sw.phase === "STOPPED" && sw
      },
      30_000,
    )
    expect(stopped.desired).toBe("deleted")
    const left = (await s.login(`squeue -h -u "$(id -un)" -o '%j|%T'`)).stdout
    expect(left.split("\n").filter((r) => /\.broken\./.test(r) && /RUNNING|PENDING/.test(r))).toEqual([])
  })

  test("the cluster's capacity counts its one node once, though it is in two partitions", async () => {
    const status = (await s.p.call("GET", "/v1/backends/hpc/status")).json
    const partitions = status.status.detail.partitions as { name: string; cpus: { total: number } }[]
    expect(partitions.length).toBe(2)
    expect(status.capacity.total.cpu).toBe(partitions[0]!.cpus.total)
  })

  test("a thousand live tasks: each pass is still one command (sent on stdin, past the 128 KiB argument limit), and a job's logs come in one request", {
    timeout: 180_000,
  }, async () => {
    const id = await s.submit("hpc", {
      tasks: 1000,
      command: ["sh", "-c", "echo shard $SHARD_ID; sleep 300"],
      resources: { cpu: 1, memoryMiB: 32 },
    })
    onTestFinished(async () => void (await s.p.call("POST", `/v1/jobs/${id}/cancel`)))
    const seen = await until(
      "every task on the cluster, the first ones running, the rest with Slurm's reason",
      async () => {
        const j = await s.job(id)
        const running = j.tasks.filter((t: { state: string }) => t.state === "RUNNING").length
        const waiting = j.tasks.filter((t: { pendingReason?: string }) =>
          t.pendingReason?.startsWith("Slurm: "),
        ).length
        return running >= 4 && waiting >= 900 && j
      },
      150_000,
    )
    expect(
      new Set(seen.tasks.map((t: { attempts: Attempt[] }) => t.attempts[0]!.target!.split("_")[0])).size,
    ).toBe(1)
    expect(await backendStatus("hpc")).toMatchObject({ healthy: true })
    const logs = (await s.p.call("GET", `/v1/jobs/${id}/logs?tail=5`)).json.items
    expect(logs.map((l: { task: number }) => l.task)).toEqual(Array.from({ length: 256 }, (_, i) => i))
    const running = seen.tasks.find((t: { state: string }) => t.state === "RUNNING")
    await until("a running shard's line", async () =>
      (await s.p.call("GET", `/v1/jobs/${id}/logs?tasks=${running.index}`)).json.items[0].lines.includes(
        `shard ${running.index}`,
      ),
    )
  })

  test("one SSH connection serves many passes", { timeout: 60_000 }, async () => {
    const id = await s.submit("hpc", { command: ["sleep", "6"] })
    await until("the task to run", async () => (await task0(id)).state === "RUNNING", 30_000)
    const before = SshSession.totalConnects
    const commands = SshSession.totalCommands
    await s.finished(id)
    // ~20 passes (300 ms apart) while it ran, each one command on the kept connection.
    expect(SshSession.totalCommands - commands).toBeGreaterThan(5)
    expect(SshSession.totalConnects - before).toBe(0)
  })
})
