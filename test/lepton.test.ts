/**
 * The `lepton` backend end to end: a local control plane (fast ticks) in this process, a fake DGX Cloud
 * Lepton workspace whose jobs and replicas are real local processes, and the backend registered through
 * swarmplane's API. Jobs run and retry, a swarm serves and scales with one PATCH, a refused token is the
 * backend's health, a cancel stops the Lepton job, and a restarted plane adopts what is on Lepton.
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { LostAfterMs } from "@swarmplane/core/backends/lepton/backend"
import { jobName } from "@swarmplane/core/backends/lepton/spec"
import { createBackend } from "@swarmplane/core/backends/registry"
import { JobSpec } from "@swarmplane/core/model/job"
import { afterAll, beforeAll, describe, expect, test } from "vitest"
import { assignedRefs } from "./support/assigned"
import { type LeptonPlane, leptonPlane } from "./support/lepton-plane"
import { until } from "./support/plane"

let l: LeptonPlane

beforeAll(async () => {
  // Lepton caps list pages (at some size the contract does not give): 100 here, so 250 jobs take 3 pages.
  l = await leptonPlane({ maxPageSize: 100 })
  await l.register("lep")
}, 60_000)

afterAll(async () => {
  await l?.stop()
})

const count = (method: string, path: string | RegExp) =>
  l.fake.requests.filter(
    (r) => r.method === method && (typeof path === "string" ? r.path === path : path.test(r.path)),
  ).length

describe("jobs", () => {
  test("a 4-task job runs as four Lepton jobs and SUCCEEDS; a task that fails once is retried within its budget", {
    timeout: 60_000,
  }, async () => {
    const mark = join(mkdtempSync(join(tmpdir(), "lepton-mark-")), "failed-once")
    const createsBefore = count("POST", "/jobs")
    const id = await l.submit("lep", {
      tasks: 4,
      maxRetriesFailure: 1,
      env: { MARK: mark },
      command: [
        "sh",
        "-c",
        'echo "shard $SHARD_ID of $NSHARDS ($ATTEMPT_UID)"; if [ "$SHARD_ID" = 2 ] && mkdir "$MARK" 2>/dev/null; then echo "failing once" >&2; exit 1; fi',
      ],
    })
    const done = await l.finished(id)
    expect(done.status).toBe("SUCCEEDED")
    expect(done.tasks.map((t: { state: string }) => t.state)).toEqual([
      "SUCCEEDED",
      "SUCCEEDED",
      "SUCCEEDED",
      "SUCCEEDED",
    ])
    const retried = done.tasks[2].attempts
    expect(retried).toHaveLength(2)
    expect(retried[0]).toMatchObject({ state: "FAILED", reason: "job_failed" })
    expect(retried[0].message).toMatch(/last output: .*failing once/)
    expect(retried[1].state).toBe("SUCCEEDED")
    expect(retried[1].attemptUid).not.toBe(retried[0].attemptUid)
    // Each attempt is its own Lepton job, made once, under the name persisted before it was sent.
    const attempts = done.tasks.flatMap((t: { attempts: unknown[] }) => t.attempts)
    expect(attempts).toHaveLength(5)
    for (const a of attempts as { submission: string; target: string }[])
      expect(a.target.startsWith(`${a.submission}-`)).toBe(true)
    expect(new Set(attempts.map((a: { target: string }) => a.target)).size).toBe(5)
    expect(count("POST", "/jobs") - createsBefore).toBe(5)
    // The task's output, read from its Lepton job's replica log.
    const logs = (await l.p.call("GET", `/v1/jobs/${id}/tasks/1/logs`)).json
    expect(logs.lines.join("\n")).toMatch(/shard 1 of 4 \(/)
  })

  test("cancel of a running job: KILLED, and the Lepton job Stopped with its processes gone", {
    timeout: 60_000,
  }, async () => {
    const pidsBefore = new Set(l.fake.livePids())
    const id = await l.submit("lep", { command: ["sleep", "300"] })
    const running = await until(
      "the task to run",
      async () => {
        const t = (await l.job(id)).tasks[0]
        return t.state === "RUNNING" && t
      },
      30_000,
    )
    const target: string = running.attempts[0].target
    const started = l.fake.livePids().filter((pid) => !pidsBefore.has(pid))
    expect(started.length).toBeGreaterThan(0)
    expect((await l.p.call("POST", `/v1/jobs/${id}/cancel`)).status).toBe(202)
    const done = await l.finished(id)
    expect(done.status).toBe("CANCELLED")
    expect(done.tasks[0].state).toBe("KILLED")
    await until(
      "the Lepton job to be Stopped",
      async () => {
        const job = await l.lepton("GET", `/jobs/${target}?job_query_mode=alive_and_archive`)
        return job.body?.status?.state === "Stopped"
      },
      20_000,
    )
    const left = new Set(l.fake.livePids())
    expect(started.filter((pid) => left.has(pid))).toEqual([])
  })
})

describe("swarms", () => {
  test("a 2-replica echo swarm comes up RUNNING and answers at its URL; 2 → 3 replicas, by a restarted plane, is one PATCH of the same deployment; DELETE removes it", {
    timeout: 90_000,
  }, async () => {
    await l.applySwarm("lep", { name: "lep-echo", model: "echo", replicas: 2 })
    const serving = await l.running("lep-echo")
    expect(serving.replicaStatus.ready).toBe(2)
    const name: string = serving.handle.meta.deployment
    const reply = await fetch(`${serving.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ model: "echo", messages: [{ role: "user", content: "from lepton" }] }),
    }).then((r) => r.json())
    expect(reply.choices[0].message.content).toBe("echo: from lepton")

    // The update is carried out by a plane started afresh on the same state: it finds the deployment
    // from the swarm's saved handle, as another Lambda invocation would.
    await l.restart()
    await l.applySwarm("lep", { name: "lep-echo", model: "echo", replicas: 3 })
    const three = await until(
      "three replicas ready on the new generation",
      async () => {
        const s = (await l.p.call("GET", "/v1/swarms/lep-echo")).json
        return (
          s.phase === "RUNNING" &&
          s.observedGeneration === s.generation &&
          s.generation > serving.generation &&
          s.replicaStatus.ready === 3 &&
          s
        )
      },
      45_000,
    )
    expect(three.url).toBe(serving.url)
    expect(count("POST", "/deployments")).toBe(1)
    expect(count("PATCH", `/deployments/${name}`)).toBe(1)
    const deployments = (await l.lepton("GET", "/deployments")).body
    expect(deployments.map((d: { metadata: { id: string } }) => d.metadata.id)).toEqual([name])
    expect(deployments[0].spec.resource_requirement).toMatchObject({ min_replicas: 3, max_replicas: 3 })

    expect((await l.p.call("DELETE", "/v1/swarms/lep-echo")).status).toBe(202)
    const stopped = await until(
      "the swarm to be STOPPED",
      async () => {
        const s = (await l.p.call("GET", "/v1/swarms/lep-echo?wait=STOPPED&timeoutS=10")).json
        return s.phase === "STOPPED" && s
      },
      30_000,
    )
    expect(stopped.desired).toBe("deleted")
    // Stopped, it serves nothing: not the 3 ready replicas the last read before the delete showed.
    expect(stopped.replicaStatus).toEqual({ ready: 0, total: 0, items: [] })
    expect(count("DELETE", `/deployments/${name}`)).toBeGreaterThan(0)
    expect((await l.lepton("GET", `/deployments/${name}`)).status).toBe(404)
  })
})

describe("swarm endpoint token", () => {
  test("with endpointTokenSecret the endpoint needs the token; the health check sends it, so the swarm is RUNNING", {
    timeout: 60_000,
  }, async () => {
    const token = "endpoint-token-value-42"
    l.fake.setSecret("swarm-endpoint-token", token)
    l.secret("swarm-endpoint-token", token)
    await l.register("lep-tok", { endpointTokenSecret: "swarm-endpoint-token" })
    await l.applySwarm("lep-tok", { name: "lep-private", model: "echo", replicas: 1 })
    const serving = await l.running("lep-private")
    const chat = (headers: Record<string, string>) =>
      fetch(`${serving.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "Content-Type": "application/json", ...headers },
        body: JSON.stringify({ model: "echo", messages: [{ role: "user", content: "private" }] }),
      })
    expect((await chat({})).status).toBe(401)
    const reply = await chat({ Authorization: `Bearer ${token}` })
    expect(reply.status).toBe(200)
    expect((await reply.json()).choices[0].message.content).toBe("echo: private")
    // The token is a reference in the deployment, never its value.
    const deployment = (await l.lepton("GET", `/deployments/${serving.handle.meta.deployment}`)).body
    expect(deployment.spec.api_tokens).toEqual([{ value_from: { token_name_ref: "swarm-endpoint-token" } }])
    expect(JSON.stringify(serving)).not.toContain(token)
    expect((await l.p.call("DELETE", "/v1/swarms/lep-private")).status).toBe(202)
    await until(
      "the private swarm to be STOPPED",
      async () => (await l.p.call("GET", "/v1/swarms/lep-private")).json.phase === "STOPPED",
      30_000,
    )
  })
})

describe("faults", () => {
  test("a refused token is the backend's error and its swarm's reason, without the token; the other backend goes on, and fixing the secret is enough", {
    timeout: 120_000,
  }, async () => {
    const wrong = "not-the-workspace-token-0123456789"
    l.secret("wrong-token", wrong)
    await l.register("lep-bad", { tokenSecret: "wrong-token" })
    const stuck = await l.submit("lep-bad", { command: ["true"] })
    const fine = await l.submit("lep", { command: ["true"] })
    const swarm = await l.p.call("POST", "/v1/swarms", {
      name: "lep-bad-swarm",
      backendId: "lep-bad",
      model: "echo",
    })
    expect(swarm.status, JSON.stringify(swarm.json)).toBe(202)
    const unknown = await until(
      "the swarm to say why it cannot be deployed",
      async () => {
        const s = (await l.p.call("GET", "/v1/swarms/lep-bad-swarm")).json
        return s.phase === "UNKNOWN" && s
      },
      30_000,
    )
    expect(unknown.message).toMatch(/401/)
    expect(JSON.stringify(unknown)).not.toContain(wrong)
    const backend = await until(
      "the refused token to show on the backend",
      async () => {
        const b = (await l.p.call("GET", "/v1/backends/lep-bad")).json
        return b.status?.healthy === false && b
      },
      30_000,
    )
    expect(backend.status.message).toMatch(/401/)
    expect(backend.status.message).toMatch(/tokenSecret/)
    expect(JSON.stringify(backend)).not.toContain(wrong)
    const live = (await l.p.call("GET", "/v1/backends/lep-bad/status")).json
    expect(live.status).toMatchObject({ healthy: false })
    expect(JSON.stringify(live)).not.toContain(wrong)
    expect((await l.finished(fine)).status).toBe("SUCCEEDED")
    const waiting = await l.job(stuck)
    expect(waiting.tasks[0].state).not.toBe("SUCCEEDED")
    expect((await l.p.call("GET", "/v1/backends/lep")).json.status.healthy).toBe(true)
    const good = (await l.p.call("GET", "/v1/backends/lep/status")).json
    expect(good.status).toMatchObject({ healthy: true, detail: { state: "normal", shapes: ["cpu.small"] } })
    // The secret is fixed: the waiting job runs and the swarm comes up, with nothing to redo by hand.
    l.secret("wrong-token", l.fake.token)
    expect((await l.finished(stuck)).status).toBe("SUCCEEDED")
    await until(
      "the swarm to recover",
      async () => (await l.p.call("GET", "/v1/swarms/lep-bad-swarm")).json.phase === "RUNNING",
      45_000,
    )
    await l.p.call("DELETE", "/v1/swarms/lep-bad-swarm")
  })

  test("a job Lepton refuses (a secret the workspace lacks) FAILS with Lepton's words, and the backend stays healthy", {
    timeout: 60_000,
  }, async () => {
    await l.register("lep-env", { envSecrets: { HF_TOKEN: "no-such-workspace-secret" } })
    const id = await l.submit("lep-env", { command: ["true"] })
    const done = await l.finished(id)
    expect(done.status).toBe("FAILED")
    expect(done.tasks[0].attempts[0].message).toMatch(/400.*no-such-workspace-secret not found/)
    // The pass that failed the job records the backend's health at its end, after the job's status:
    // a backend registered for this test has none before, so wait for the record, then read it.
    const checked = await until(
      "the backend's health to be recorded",
      async () => {
        const b = (await l.p.call("GET", "/v1/backends/lep-env")).json
        return b.status?.checkedAt !== undefined && b
      },
      30_000,
    )
    expect(checked.status.healthy).toBe(true)
  })

  test("a 500 from the job list is retried within the pass, and the job succeeds", {
    timeout: 60_000,
  }, async () => {
    const lists = count("GET", "/jobs")
    l.fake.injectFault({ status: 500, method: "GET", path: /^\/jobs$/, count: 1 })
    const id = await l.submit("lep", { command: ["sh", "-c", "echo after a 500"] })
    expect((await l.finished(id)).status).toBe("SUCCEEDED")
    expect(count("GET", "/jobs") - lists).toBeGreaterThan(1)
    expect((await l.p.call("GET", "/v1/backends/lep")).json.status.healthy).toBe(true)
  })

  test("a create answered 503 is deferred and tried again, making exactly one Lepton job", {
    timeout: 60_000,
  }, async () => {
    const creates = count("POST", "/jobs")
    l.fake.injectFault({ status: 503, method: "POST", path: /^\/jobs$/, count: 1 })
    const id = await l.submit("lep", { command: ["sh", "-c", "echo after a 503"] })
    const done = await l.finished(id)
    expect(done.status).toBe("SUCCEEDED")
    expect(done.tasks[0].attempts).toHaveLength(1)
    // The refused create and the one that made the job.
    expect(count("POST", "/jobs") - creates).toBe(2)
  })
})

describe("adoption and batching", () => {
  test("a second launch of the same attempts (a create whose answer was lost) adopts the job instead of making another", {
    timeout: 60_000,
  }, async () => {
    const record = (await l.p.call("GET", "/v1/backends/lep")).json
    const runtime = l.p.plane.runtime
    const backend = await createBackend(record, runtime)
    const created = await runtime.transitions.jobs.create(
      "default",
      "job-adopt-test",
      JobSpec.parse({ command: ["sleep", "30"], tasks: 2 }),
      "other",
    )
    const tasks = (await runtime.repos.jobs.load("default", created.id))!.tasks
    const refs = tasks.map((task) => ({ job: created, task }))
    let minted = 0
    const plan = await backend.schedule({
      pending: refs,
      live: [],
      mintAttemptUid: () => `a-adopt-${minted++}`,
    })
    expect(plan.assignments.map((a) => a.submission)).toEqual([jobName("a-adopt-0"), jobName("a-adopt-1")])
    const assigned = assignedRefs(plan, created.createdAt)
    const creates = count("POST", "/jobs")
    const first = await backend.launch({ attempts: assigned })
    const again = await backend.launch({ attempts: assigned })
    await backend.close()
    expect(first.failed).toEqual([])
    expect(first.launched.map((x) => x.target)).toHaveLength(2)
    expect(again.launched.map((x) => x.target)).toEqual(first.launched.map((x) => x.target))
    expect(count("POST", "/jobs") - creates).toBe(2)
    for (const { target } of first.launched)
      await l.lepton("PATCH", `/jobs/${target}`, { spec: { stopped: true } })
  })

  test("250 tasks are launched and observed with one paged job list per pass (3 pages of 100), never a read per task", {
    timeout: 90_000,
  }, async () => {
    const singleReads = count("GET", /^\/jobs\/[^/]+$/)
    const lists = count("GET", "/jobs")
    const id = await l.submit("lep", { tasks: 250, command: ["true"] })
    const done = await l.finished(id, 75_000)
    expect(done.status).toBe("SUCCEEDED")
    expect(count("GET", /^\/jobs\/[^/]+$/)).toBe(singleReads)
    // Far fewer list requests than tasks: each pass's list is a few pages, never a read per task.
    expect(count("GET", "/jobs") - lists).toBeLessThan(100)
    // Read completely: the fake's pages hold at most 100 jobs, so a pass that read only the first page
    // would never see the other 150 end (they would be lost after LostAfterMs, not SUCCEEDED).
  })
})

describe("a workspace that archives jobs the moment they end", () => {
  let a: LeptonPlane
  beforeAll(async () => {
    a = await leptonPlane({ archiveAfterMs: 0 })
    await a.register("lep-archive")
  }, 60_000)
  afterAll(async () => {
    await a?.stop()
  })

  test("a pass lists only live jobs, and reads each attempt's job that left the list by its id: every task SUCCEEDS", {
    timeout: 60_000,
  }, async () => {
    const id = await a.submit("lep-archive", { tasks: 6, command: ["true"] })
    const done = await a.finished(id, 45_000)
    // Were archived jobs not read, the live list would never show these end: lost after LostAfterMs.
    expect(done.status).toBe("SUCCEEDED")
    const lists = a.fake.requests.filter((r) => r.method === "GET" && r.path === "/jobs")
    expect(lists.length).toBeGreaterThan(0)
    // The whole history is never listed: what a pass costs follows live work.
    for (const r of lists) expect(new URLSearchParams(r.query).get("job_query_mode")).toBe("alive_only")
    const reads = a.fake.requests.filter((r) => r.method === "GET" && /^\/jobs\/[^/]+$/.test(r.path))
    expect(reads.length).toBeGreaterThanOrEqual(6)
    for (const r of reads)
      expect(new URLSearchParams(r.query).get("job_query_mode")).toBe("alive_and_archive")
  })

  test("an archived job whose read keeps failing waits for a later pass; the other attempts of the pass go on", {
    timeout: 90_000,
  }, async () => {
    // Every read of the first job read by id fails (500) until the test lifts it.
    let blocked: string | undefined
    let lifted = false
    a.fake.injectFault({
      method: "GET",
      path: /^\/jobs\/[^/]+$/,
      status: 500,
      count: Number.POSITIVE_INFINITY,
      when: (request) => {
        if (lifted) return false
        blocked ??= request.path
        return request.path === blocked
      },
    })
    const id = await a.submit("lep-archive", { tasks: 2, command: ["true"] })
    const oneDone = await until(
      "the task whose job reads fine to SUCCEED while the other's read fails",
      async () => {
        const job = (await a.p.call("GET", `/v1/jobs/${id}`)).json
        const states = job.tasks.map((t: { state: string }) => t.state).sort()
        return blocked && ["ASSIGNED", "RUNNING"].includes(states[0]) && states[1] === "SUCCEEDED" && job
      },
      45_000,
    )
    expect(oneDone.status).toBe("RUNNING")
    lifted = true
    expect((await a.finished(id, 45_000)).status).toBe("SUCCEEDED")
  })

  test("an attempt whose create answer was lost, and whose job has ended and been archived since, is adopted from the archive, not made again", {
    timeout: 60_000,
  }, async () => {
    const record = (await a.p.call("GET", "/v1/backends/lep-archive")).json
    const runtime = a.p.plane.runtime
    const backend = await createBackend(record, runtime)
    const created = await runtime.transitions.jobs.create(
      "default",
      "job-archived-adopt",
      JobSpec.parse({ command: ["true"], tasks: 1 }),
      "other",
    )
    const tasks = (await runtime.repos.jobs.load("default", created.id))!.tasks
    const plan = await backend.schedule({
      pending: tasks.map((task) => ({ job: created, task })),
      live: [],
      mintAttemptUid: () => "a-archived-0",
    })
    const assigned = assignedRefs(plan, created.createdAt)
    const posts = () => a.fake.requests.filter((r) => r.method === "POST" && r.path === "/jobs").length
    const before = posts()
    const first = await backend.launch({ attempts: assigned, firstTry: new Set(["a-archived-0"]) })
    expect(first.launched).toHaveLength(1)
    await until(
      "the job to end and move to the archive",
      async () =>
        (await a.lepton("GET", "/jobs?job_query_mode=archive_only&page=1&page_size=100")).body.jobs.some(
          (j: { metadata: { id: string } }) => j.metadata.id === first.launched[0]!.target,
        ),
      30_000,
    )
    // The answer was lost: the attempt has no target, and a later pass launches it again.
    const again = await backend.launch({ attempts: assigned })
    await backend.close()
    expect(again.launched.map((x) => x.target)).toEqual(first.launched.map((x) => x.target))
    expect(posts() - before).toBe(1)
  })
})

describe("reconcile, read directly", () => {
  test("an attempt Lepton stopped listing is lost after LostAfterMs; a stopping attempt is stopped once its job ends, unstopped while it runs", {
    timeout: 60_000,
  }, async () => {
    const record = (await l.p.call("GET", "/v1/backends/lep")).json
    const runtime = l.p.plane.runtime
    // Two minutes and more later, by the backend's clock.
    const later = { now: () => Date.now() + LostAfterMs + 1000, sleep: runtime.clock.sleep }
    const backend = await createBackend(record, { ...runtime, clock: later })
    const created = await runtime.transitions.jobs.create(
      "default",
      "job-reconcile-test",
      JobSpec.parse({ command: ["true"], tasks: 3 }),
      "other",
    )
    const tasks = (await runtime.repos.jobs.load("default", created.id))!.tasks
    const made = await l.lepton("POST", "/jobs", {
      metadata: { id: "sp-running-one", name: "sp-running-one" },
      spec: { container: { command: ["sleep", "60"] } },
    })
    expect(made.status).toBe(200)
    const running: string = made.body.metadata.id
    await until(
      "the job to run",
      async () =>
        (await l.lepton("GET", `/jobs/${running}?job_query_mode=alive_and_archive`)).body.status?.state ===
        "Running",
      20_000,
    )
    const at = (index: number, target: string, submission: string, stopping: boolean) => ({
      job: created,
      task: {
        ...tasks[index]!,
        data: {
          ...tasks[index]!.data,
          state: stopping ? ("KILLED" as const) : ("RUNNING" as const),
          attempts: [
            {
              attemptUid: `a-rec-${index}`,
              state: stopping ? ("KILLED" as const) : ("RUNNING" as const),
              submission,
              target,
              createdAt: created.createdAt,
            },
          ],
          ...(stopping ? { stopping: { attemptUid: `a-rec-${index}`, since: created.createdAt } } : {}),
        },
      },
    })
    const gone = at(0, "sp-never-made-12345", "sp-never-made", false)
    const stoppedGone = at(1, "sp-also-never-made-1", "sp-also-never-made", true)
    const stillRunning = at(2, running, "sp-running-one", true)
    const result = await backend.reconcile({ live: [gone], stopping: [stoppedGone, stillRunning] })
    await backend.close()
    expect(result.transitions).toEqual([
      {
        ref: gone,
        outcome: expect.objectContaining({ kind: "worker_failed", attemptUid: "a-rec-0", reason: "lost" }),
      },
      { ref: stoppedGone, outcome: { kind: "stopped", attemptUid: "a-rec-1" } },
    ])
    expect(result.unstopped).toEqual([{ ref: stillRunning, target: running }])
    await l.lepton("PATCH", `/jobs/${running}`, { spec: { stopped: true } })
  })
})

describe("restart", () => {
  test("a plane restarted mid-job adopts the Lepton job it had made: no second job, and the task SUCCEEDS", {
    timeout: 90_000,
  }, async () => {
    const mark = join(mkdtempSync(join(tmpdir(), "lepton-go-")), "go")
    const id = await l.submit("lep", {
      env: { GO: mark },
      command: ["sh", "-c", 'while [ ! -e "$GO" ]; do sleep 0.1; done; echo released'],
    })
    const running = await until(
      "the task to run",
      async () => {
        const t = (await l.job(id)).tasks[0]
        return t.state === "RUNNING" && t
      },
      30_000,
    )
    const creates = count("POST", "/jobs")
    await l.restart()
    const { writeFileSync } = await import("node:fs")
    writeFileSync(mark, "")
    const done = await l.finished(id)
    expect(done.status).toBe("SUCCEEDED")
    expect(done.tasks[0].attempts).toHaveLength(1)
    expect(done.tasks[0].attempts[0].target).toBe(running.attempts[0].target)
    expect(count("POST", "/jobs")).toBe(creates)
  })
})
