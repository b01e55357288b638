import { expect, test } from "vitest"
import { BackendConfig } from "../model/backend"
import { JobSpec } from "../model/job"
import { SwarmSpec } from "../model/swarm"
import { MemoryStore } from "../store/memory"
import { FencedError } from "../store/port"
import { FakeClock } from "../util/clock"
import { CheckedEveryMs, LeaseTtlMs, reconcilePass } from "./reconcile"
import { memoryRuntime } from "./testing/runtime"

async function setup() {
  const { rt, logger } = memoryRuntime()
  const { backend } = await rt.repos.backends.put("p", "pool", BackendConfig.parse({ type: "workers" }))
  for (let i = 0; i < 3; i++)
    await rt.repos.workers.register("p", {
      backendId: "pool",
      resources: { cpu: 4, memoryMiB: 4096, gpu: 0 },
      attributes: {},
    })
  const job = await rt.transitions.jobs.create(
    "p",
    "job-1",
    JobSpec.parse({ command: ["true"], tasks: 6 }),
    "pool",
  )
  return { rt, backend, job, logger }
}

test("two passes at the same moment place each task once", async () => {
  const { rt, backend, logger } = await setup()
  const [a, b] = await Promise.all([
    reconcilePass(rt, backend, "tick-a"),
    reconcilePass(rt, backend, "tick-b"),
  ])
  expect([a.ran, b.ran].sort()).toEqual([false, true])
  expect(a.placed + b.placed).toBe(6)
  const { tasks } = (await rt.repos.jobs.load("p", "job-1"))!
  expect(tasks.map((t) => t.data.attempts.length)).toEqual([1, 1, 1, 1, 1, 1])
  const events = (await rt.repos.events.list("P#p#JOB#job-1", { limit: 100 })).items
  expect(events.filter((e) => e.from === "PENDING" && e.to === "ASSIGNED")).toHaveLength(6)
  expect(logger.entries.some((e) => / PENDING → ASSIGNED /.test(e.message))).toBe(true)
})

test("a pass whose lease was taken over cannot write: its fence is refused", async () => {
  const { rt, backend, job } = await setup()
  const stale = await rt.repos.leases.acquire("p", "pool", "reconcile", "stalled", LeaseTtlMs)
  ;(rt.clock as FakeClock).advance(LeaseTtlMs + 1)
  // The workers kept heartbeating meanwhile.
  for (const w of await rt.repos.workers.list("p", "pool")) await rt.repos.workers.heartbeat("p", w.id)
  const fresh = await reconcilePass(rt, backend, "fresh")
  expect(fresh.ran).toBe(true)
  expect(fresh.placed).toBe(6)
  // The stalled holder wakes up and applies what it had computed under its old token.
  await expect(
    rt.transitions.jobs.applyReports(job, [{ index: 0, outcome: { kind: "killed", reason: "stale plan" } }], {
      fence: stale!.token,
    }),
  ).rejects.toBeInstanceOf(FencedError)
  const task = (await rt.repos.jobs.load("p", "job-1"))!.tasks[0]!
  expect(task.data.state).toBe("ASSIGNED")
})

test("an idle control plane costs a few one-item queries per backend and writes nothing", async () => {
  const clock = new FakeClock()
  const base = MemoryStore()
  const calls: string[] = []
  const store = new Proxy(base, {
    get(target, name: keyof typeof base) {
      const fn = target[name]
      return typeof fn === "function"
        ? (...args: unknown[]) => {
            calls.push(String(name))
            return (fn as (...a: unknown[]) => unknown).apply(target, args)
          }
        : fn
    },
  })
  const { rt } = memoryRuntime({ store, clock })
  await rt.repos.backends.put("p", "pool", BackendConfig.parse({ type: "workers" }))
  calls.length = 0
  const { reconcileTick, autoscaleTick } = await import("./ticks")
  const report = await reconcileTick(rt)
  await autoscaleTick(rt)
  expect(report.backends[0]?.ran).toBe(false)
  expect(calls.filter((c) => ["create", "createMany", "update", "delete"].includes(c))).toEqual([])
  // Per tick: list the backends, four one-item index queries, the worker listing.
  expect(calls.length).toBeLessThanOrEqual(2 * 6)
})

test("after the control loop was away, workers get a fresh grace period instead of being declared dead", async () => {
  const { rt, backend } = await setup()
  await reconcilePass(rt, backend, "tick")
  ;(rt.clock as FakeClock).advance(10 * 60_000) // ten minutes with no pass and no heartbeat seen
  await reconcilePass(rt, backend, "tick")
  expect((await rt.repos.workers.list("p", "pool")).map((w) => w.health)).toEqual([
    "healthy",
    "healthy",
    "healthy",
  ])
  ;(rt.clock as FakeClock).advance(51_000) // now they really are silent past the 50 s grace
  await reconcilePass(rt, backend, "tick")
  expect((await rt.repos.workers.list("p", "pool")).map((w) => w.health)).toEqual(["dead", "dead", "dead"])
})

test("dead workers are pruned after the retention period", async () => {
  const { rt, backend } = await setup()
  await reconcilePass(rt, backend, "tick")
  ;(rt.clock as FakeClock).advance(51_000)
  await reconcilePass(rt, backend, "tick")
  expect(await rt.repos.workers.list("p", "pool")).toHaveLength(3)
  ;(rt.clock as FakeClock).advance(86_400_000)
  // Retention is measured from the last heartbeat; the pass that notices prunes them.
  const report = await reconcilePass(rt, backend, "tick")
  expect(report.error).toBeUndefined()
  expect(await rt.repos.workers.list("p", "pool")).toHaveLength(0)
})

test("a delegated backend that cannot be reached: unhealthy with the reason, its tasks unchanged, logged once over many passes", async () => {
  const { createServer } = await import("node:net")
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as { port: number }).port
  await new Promise<void>((resolve) => server.close(() => resolve())) // now nothing listens there
  const clock = new FakeClock()
  const key = (await import("node:crypto")).generateKeyPairSync("rsa", { modulusLength: 2048 })
  const { rt, logger } = memoryRuntime({
    clock,
    secrets: { get: async () => key.privateKey.export({ format: "pem", type: "pkcs1" }).toString() },
  })
  await rt.repos.backends.put(
    "p",
    "hpc",
    BackendConfig.parse({
      type: "slurm",
      loginHost: "127.0.0.1",
      port,
      user: "svc",
      sshKeySecret: "k",
      hostKey: "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
      partition: "debug",
    }),
  )
  const job = await rt.transitions.jobs.create("p", "job-1", JobSpec.parse({ command: ["true"] }), "hpc")
  // A task already on the cluster (submitted by an earlier pass): every pass asks Slurm about it.
  await rt.transitions.jobs.applyReports(job, [
    { index: 0, outcome: { kind: "assigned", attemptUid: "a-1", submission: "sp-s-1#0" } },
  ])
  await rt.transitions.jobs.applyReports(job, [{ index: 0, serving: { attemptUid: "a-1", target: "7_0" } }])
  await rt.transitions.swarms.apply("p", {
    ...SwarmSpec.parse({ name: "llm", model: "echo" }),
    backendId: "hpc",
  })
  for (let i = 0; i < 3; i++) {
    const pass = await reconcilePass(rt, (await rt.repos.backends.get("p", "hpc"))!, `t-${i}`)
    expect(pass.error).toMatch(/connection refused/)
    clock.advance(1000)
  }
  expect((await rt.repos.backends.get("p", "hpc"))!.status).toMatchObject({
    healthy: false,
    message: expect.stringContaining("connection refused"),
  })
  expect((await rt.repos.jobs.load("p", "job-1"))!.tasks[0]!.data).toMatchObject({
    state: "ASSIGNED",
    attempts: [{ attemptUid: "a-1", target: "7_0" }],
  })
  expect(
    logger.entries.filter((e) => e.level === "warn" && e.message.startsWith("backend p/hpc")),
  ).toHaveLength(1)
})

test("a backend's checked time stays fresh while passes run, without a write every pass", async () => {
  const { rt, backend } = await setup()
  const checked = async () => (await rt.repos.backends.get("p", "pool"))!.status.checkedAt
  await reconcilePass(rt, backend, "t-1")
  const first = await checked()
  expect(first).toBe(new Date((rt.clock as FakeClock).now()).toISOString())
  ;(rt.clock as FakeClock).advance(10_000)
  await reconcilePass(rt, (await rt.repos.backends.get("p", "pool"))!, "t-2")
  expect(await checked()).toBe(first)
  ;(rt.clock as FakeClock).advance(CheckedEveryMs)
  await reconcilePass(rt, (await rt.repos.backends.get("p", "pool"))!, "t-3")
  expect(await checked()).toBe(new Date((rt.clock as FakeClock).now()).toISOString())
})

test("a steady pass costs the same store calls with 2 running jobs or 40: a job at rest is not read", async () => {
  const costs: number[] = []
  for (const jobs of [2, 40]) {
    const { countingStore } = await import("../store/counting")
    const counter = countingStore(MemoryStore())
    const { rt } = memoryRuntime({ store: counter.store })
    await rt.repos.backends.put("p", "pool", BackendConfig.parse({ type: "workers" }))
    await rt.repos.workers.register("p", {
      backendId: "pool",
      resources: { cpu: 1000, memoryMiB: 100_000, gpu: 0 },
      attributes: {},
    })
    const spec = JobSpec.parse({ command: ["true"], tasks: 3, resources: { cpu: 1, memoryMiB: 1 } })
    for (let j = 0; j < jobs; j++) await rt.transitions.jobs.create("p", `job-${j}`, spec, "pool")
    const backend = async () => (await rt.repos.backends.get("p", "pool"))!
    expect((await reconcilePass(rt, await backend(), "t")).placed).toBe(3 * jobs)
    // The placements are recounted in the pass that made them: the next pass finds nothing to do.
    counter.reset()
    await reconcilePass(rt, await backend(), "t")
    costs.push(counter.total())
  }
  expect(costs[1]).toBe(costs[0])
})

test("a task that a heartbeat failed past its job's tolerance: the pass kills the rest and stops them", async () => {
  const { rt, backend, job } = await setup()
  await reconcilePass(rt, backend, "t")
  const loaded = (await rt.repos.jobs.load("p", job.id))!
  const first = loaded.tasks[0]!.data
  await rt.transitions.jobs.applyReports(loaded.job.data, [
    {
      index: 0,
      outcome: {
        kind: "failed",
        attemptUid: first.attempts[0]!.attemptUid,
        reason: "exit_code",
        exitCode: 1,
      },
    },
  ])
  await reconcilePass(rt, (await rt.repos.backends.get("p", "pool"))!, "t")
  const after = (await rt.repos.jobs.load("p", job.id))!
  expect(after.job.data.status).toBe("FAILED")
  expect(after.tasks.map((t) => t.data.state)).toEqual([
    "FAILED",
    "KILLED",
    "KILLED",
    "KILLED",
    "KILLED",
    "KILLED",
  ])
})

test("a backend of a type this release does not implement (stored by another): its status says so, and the others go on", async () => {
  const { rt, logger } = await setup()
  // Every type of this release's config union is implemented: a newer release's type, as stored.
  const eks = BackendConfig.parse({ type: "eks", clusterName: "c", region: "us-west-2", localQueue: "q" })
  const newer = { ...eks, type: "gke" } as unknown as BackendConfig
  const { backend: old } = await rt.repos.backends.put("p", "old", newer)
  const notAvailable =
    "the gke backend is not available in this release; available types: eks, lepton, slurm, workers"
  const { reconcileTick, autoscaleTick } = await import("./ticks")
  for (let i = 0; i < 2; i++) {
    const report = await reconcileTick(rt)
    expect(report.backends.find((b) => b.backendId === "old")).toMatchObject({
      ran: false,
      error: notAvailable,
    })
    expect((await autoscaleTick(rt)).backends.find((b) => b.backendId === "old")?.error).toBe(notAvailable)
    if (i === 0) expect(report.backends.find((b) => b.backendId === "pool")?.placed).toBe(6)
  }
  expect((await rt.repos.backends.get("p", "old"))!.status).toMatchObject({
    healthy: false,
    message: notAvailable,
  })
  expect(logger.entries.filter((e) => e.message.startsWith("backend p/old"))).toHaveLength(1)
  // A pass asked for directly (a schedule request) reports it the same way.
  const pass = await reconcilePass(rt, old, "schedule")
  expect(pass).toMatchObject({ ran: true, error: notAvailable })
})

test("a gang member's failure: its sibling is placed again only once its worker stopped the old attempt, and the gang goes back whole", async () => {
  const { heartbeat } = await import("../backends/workers/heartbeat")
  const { rt, backend } = await setup()
  const clock = rt.clock as FakeClock
  const gang = await rt.transitions.jobs.create(
    "p",
    "gang",
    JobSpec.parse({ command: ["true"], tasks: 2, coscheduling: {}, maxRetriesFailure: 2 }),
    "pool",
  )
  await rt.transitions.jobs.cancel("p", "job-1")
  const pass = async () => {
    const r = await reconcilePass(rt, backend, "test")
    expect(r.error).toBeUndefined()
    return r
  }
  const tasks = async () => (await rt.repos.jobs.load("p", gang.id))!.tasks.map((t) => t.data)
  await pass()
  const [t0, t1] = await tasks()
  const a0 = t0!.attempts.at(-1)!
  const a1 = t1!.attempts.at(-1)!
  await heartbeat(rt, "p", a0.workerId!, [{ attemptUid: a0.attemptUid, state: "RUNNING" }])
  await heartbeat(rt, "p", a1.workerId!, [{ attemptUid: a1.attemptUid, state: "RUNNING" }])
  // Task 0 fails: the gang goes back, task 1's attempt is ended in the store while its worker runs it.
  await heartbeat(rt, "p", a0.workerId!, [{ attemptUid: a0.attemptUid, state: "FAILED", exitCode: 1 }])
  const after = await tasks()
  expect(after.map((t) => t.state)).toEqual(["PENDING", "PENDING"])
  expect(after[1]!.stopping).toMatchObject({ attemptUid: a1.attemptUid })
  expect(after[1]!.pendingReason).toMatch(/waiting for attempt .* to stop/)

  // Past task 0's backoff, still nothing is placed: task 1's worker has not stopped its attempt.
  clock.advance(10_000)
  expect((await pass()).placed).toBe(0)
  // Its worker still runs it (the heartbeat tells it to stop: its desired set no longer has it).
  const desired = await heartbeat(rt, "p", a1.workerId!, [{ attemptUid: a1.attemptUid, state: "RUNNING" }])
  expect(desired.desired).toEqual([])
  expect((await pass()).placed).toBe(0)
  // It stopped: the next heartbeat says so, and the whole gang is placed again.
  await heartbeat(rt, "p", a1.workerId!, [{ attemptUid: a1.attemptUid, state: "KILLED" }])
  expect((await tasks())[1]!.stopping).toBeUndefined()
  expect((await pass()).placed).toBe(2)
  expect((await tasks()).map((t) => t.attempts.length)).toEqual([2, 2])
})

test("a killed attempt on a worker that died is not waited for: the worker's loss stopped it", async () => {
  const { rt, backend } = await setup()
  const clock = rt.clock as FakeClock
  const pass = async () => {
    const r = await reconcilePass(rt, backend, "test")
    expect(r.error).toBeUndefined()
    return r
  }
  await pass()
  const running = (await rt.repos.jobs.load("p", "job-1"))!.tasks[0]!.data
  await rt.transitions.jobs.cancel("p", "job-1")
  await pass()
  const killed = (await rt.repos.jobs.load("p", "job-1"))!.tasks[0]!.data
  expect(killed).toMatchObject({
    state: "KILLED",
    stopping: { attemptUid: running.attempts.at(-1)!.attemptUid },
  })
  // No worker heartbeats again: once they are dead, nothing is left waiting.
  for (let i = 0; i < 4; i++) {
    clock.advance(60_000)
    await pass()
  }
  const tasks = (await rt.repos.jobs.load("p", "job-1"))!.tasks.map((t) => t.data)
  expect(tasks.filter((t) => t.stopping)).toEqual([])
  expect(await rt.repos.active.any("p", "pool")).toBe(false)
})

test("a scheduling timeout is judged after the pass tried to place: what fits is placed, what cannot says why", async () => {
  const { rt, backend } = await setup()
  const fits = await rt.transitions.jobs.create(
    "p",
    "fits",
    JobSpec.parse({ command: ["true"], tasks: 1, schedulingTimeoutS: 1 }),
    "pool",
  )
  const impossible = await rt.transitions.jobs.create(
    "p",
    "gpus",
    JobSpec.parse({ command: ["true"], tasks: 1, resources: { gpu: 8 }, schedulingTimeoutS: 1 }),
    "pool",
  )
  // The first pass comes after both timeouts ran out (a slow or missed tick): neither was tried before.
  ;(rt.clock as FakeClock).advance(5_000)
  for (const w of await rt.repos.workers.list("p", "pool")) await rt.repos.workers.heartbeat("p", w.id)
  await reconcilePass(rt, backend, "late")
  const placed = (await rt.repos.jobs.load("p", fits.id))!.tasks[0]!.data
  expect(placed.state).toBe("ASSIGNED")
  const given = (await rt.repos.jobs.load("p", impossible.id))!.tasks[0]!.data
  expect(given.state).toBe("UNSCHEDULABLE")
  // This pass's reason (the scheduler's), not a generic one: no earlier pass left the job a reason.
  expect(given.pendingReason).toMatch(/^not placed within 1s: .*gpu/)
})
