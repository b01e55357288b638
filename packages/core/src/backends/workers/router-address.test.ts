/**
 * A swarm's address on a `workers` backend, through the control plane's own parts (memory store, fake
 * clock, the real heartbeat and reconcile pass): every attempt of the swarm's router is told the port
 * the first one listened on and is placed on the same host again; while the router is not serving the
 * swarm says why and keeps its URL; an update keeps the router and rolls the replicas behind it.
 */
import { expect, test } from "vitest"
import { reconcilePass } from "../../control/reconcile"
import { BackendConfig } from "../../model/backend"
import type { Job, Task } from "../../model/job"
import { SwarmSpec } from "../../model/swarm"
import type { DesiredAttempt, ObservedAttempt } from "../../model/worker"
import { MemoryQueue } from "../../queue/memory"
import { createRuntime } from "../../runtime"
import { place } from "../../scheduling"
import { MemoryStore } from "../../store/memory"
import { FakeClock } from "../../util/clock"
import { memoryLogger } from "../../util/logger"
import { heartbeat } from "./heartbeat"
import { replicaJobId } from "./serving"
import { buildSnapshot } from "./snapshot"

async function setup() {
  const clock = new FakeClock()
  const rt = createRuntime({
    store: MemoryStore(),
    queue: MemoryQueue({ clock }),
    clock,
    logger: memoryLogger(),
    pepper: "p",
    secrets: { get: async () => "" },
  })
  await rt.repos.backends.put("p", "pool", BackendConfig.parse({ type: "workers" }))
  const workers = []
  for (const address of ["10.0.0.7", "10.0.0.8"])
    workers.push(
      (
        await rt.repos.workers.register("p", {
          backendId: "pool",
          address,
          resources: { cpu: 4, memoryMiB: 4096, gpu: 0 },
          attributes: {},
        })
      ).worker,
    )
  await rt.transitions.swarms.apply("p", {
    ...SwarmSpec.parse({ name: "llm", model: "echo", replicas: 1, memoryMiBPerReplica: 256 }),
    backendId: "pool",
  })
  const pass = async () => {
    const backend = (await rt.repos.backends.get("p", "pool"))!
    const result = await reconcilePass(rt, backend, "test")
    expect(result.error).toBeUndefined()
  }
  const swarm = async () => (await rt.repos.swarms.get("p", "llm"))!
  /** The swarm's first live replica task and its router task, as they are now. */
  const tasks = async (): Promise<Task[]> => {
    const s = await swarm()
    const slot = s.replicaSet!.replicas.find((r) => r.state !== "draining")!.slot
    const replica = (await rt.repos.jobs.load("p", replicaJobId(s, slot)))!.tasks[0]!.data
    const router = (await rt.repos.jobs.load("p", String(s.handle!.meta.router)))!.tasks[0]!.data
    return [replica, router]
  }
  /** One heartbeat of `workerId`, reporting these attempts; its desired set. */
  const beat = async (workerId: string, observed: ObservedAttempt[]): Promise<DesiredAttempt[]> =>
    (await heartbeat(rt, "p", workerId, observed)).desired
  return { rt, clock, workers, pass, swarm, tasks, beat }
}

/** The worker address a task's current attempt runs on. */
const on = (task: Task, workers: { id: string; address?: string }[]) =>
  workers.find((w) => w.id === task.attempts.at(-1)?.workerId)!

test("the router's address is kept: a restart on its agent, a failed attempt and its retry all serve at one URL", async () => {
  const { clock, workers, pass, swarm, tasks, beat } = await setup()
  await pass()
  let [replica, router] = await tasks()
  expect(router!.state).toBe("ASSIGNED")
  // The first router of the swarm is told no port: it picks one.
  const routerWorker = on(router!, workers)
  const first = (await beat(routerWorker.id, [])).find((d) => d.kind === "router")!
  expect(first.port).toBeUndefined()
  const replicaUrl = `http://${on(replica!, workers).address}:9001`
  const url = `http://${routerWorker.address}:21000`
  const uid = (t: Task) => t.attempts.at(-1)!.attemptUid
  await beat(on(replica!, workers).id, [
    { attemptUid: uid(replica!), state: "RUNNING", endpoint: replicaUrl, ready: true },
  ])
  const report = (over: Partial<ObservedAttempt> = {}) => [
    { attemptUid: uid(router!), state: "RUNNING" as const, endpoint: url, ready: true, ...over },
  ]
  await beat(routerWorker.id, report())
  await pass()
  expect(await swarm()).toMatchObject({ phase: "RUNNING", url })

  // 1. The agent restarts the router process: it reports it not ready, saying why; the swarm is not
  // RUNNING meanwhile, says so, and keeps its URL; then it is RUNNING again, the message gone.
  const restarting = "router restarting (restart 1 of 5): the router process was killed by SIGKILL"
  await beat(routerWorker.id, report({ ready: false, message: restarting }))
  await pass()
  expect(await swarm()).toMatchObject({
    phase: "INITIALIZING",
    url,
    message: `1/1 replicas ready; ${restarting}`,
  })
  await beat(routerWorker.id, report())
  await pass()
  const back = await swarm()
  expect(back).toMatchObject({ phase: "RUNNING", url })
  expect(back.message).toBeUndefined()
  expect((await tasks())[1]!.attempts.at(-1)!.message).toBeUndefined()

  // 2. The attempt fails for good on its agent: the control plane retries it, the swarm says so...
  const taken = "port 21000 on 127.0.0.1, the swarm's address, is in use by another process"
  await beat(routerWorker.id, [
    { attemptUid: uid(router!), state: "FAILED", exitCode: 1, message: taken, endpoint: url, ready: false },
  ])
  await pass()
  const retrying = await swarm()
  expect(retrying).toMatchObject({ phase: "INITIALIZING", url })
  expect(retrying.message).toMatch(
    /^1\/1 replicas ready; router restarting \(attempt 2\): retrying after failure 1 of 101: port 21000 on 127.0.0.1, the swarm's address, is in use/,
  )
  // ...and its next attempt is told the same port, on the same host.
  clock.advance(3_000)
  await pass()
  ;[replica, router] = await tasks()
  expect(router!.attempts).toHaveLength(2)
  expect(on(router!, workers).address).toBe(routerWorker.address)
  const again = (await beat(routerWorker.id, [])).find((d) => d.kind === "router")!
  expect(again).toMatchObject({ attemptUid: uid(router!), port: 21000, upstreams: [replicaUrl] })
  await beat(routerWorker.id, report())
  await pass()
  expect(await swarm()).toMatchObject({ phase: "RUNNING", url })
})

test("an update keeps the router and its URL: the new replica joins once healthy, then the old one leaves the router, drains and is stopped", async () => {
  const { rt, clock, workers, pass, swarm, tasks, beat } = await setup()
  await pass()
  const [replica, router] = await tasks()
  const uid = (t: Task) => t.attempts.at(-1)!.attemptUid
  const routerWorker = on(router!, workers)
  const url = `http://${routerWorker.address}:21000`
  const oldUrl = `http://${on(replica!, workers).address}:9001`
  await beat(on(replica!, workers).id, [
    { attemptUid: uid(replica!), state: "RUNNING", endpoint: oldUrl, ready: true },
  ])
  const routerUp = [{ attemptUid: uid(router!), state: "RUNNING" as const, endpoint: url, ready: true }]
  await beat(routerWorker.id, routerUp)
  await pass()
  const before = await swarm()
  expect(before).toMatchObject({ phase: "RUNNING", url, observedGeneration: 1 })
  const routerJob = before.handle!.meta.router

  await rt.transitions.swarms.apply("p", {
    ...SwarmSpec.parse({
      name: "llm",
      model: "echo",
      replicas: 1,
      memoryMiBPerReplica: 256,
      args: ["--delay-ms", "1"],
    }),
    backendId: "pool",
  })
  await pass()
  // A new replica beside the old (surge 1); the old still serves alone; the router is the same job.
  const updating = await swarm()
  expect(updating.handle!.meta.router).toBe(routerJob)
  expect(updating).toMatchObject({ phase: "RUNNING", url, observedGeneration: 1 })
  expect(updating.message).toBe("updating to generation 2: 0/1 new replicas serving, 1 old")
  expect(updating.replicaSet!.replicas.map((r) => [r.slot, r.generation, r.state])).toEqual([
    [0, 1, "serving"],
    [1, 2, "starting"],
  ])
  const upstreams = async () =>
    (await beat(routerWorker.id, routerUp)).find((d) => d.kind === "router")!.upstreams
  expect(await upstreams()).toEqual([oldUrl])

  // The new replica is healthy: it joins the router, the old one leaves it (but still runs).
  const fresh = (await rt.repos.jobs.load("p", replicaJobId(updating, 1)))!.tasks[0]!.data
  const newUrl = `http://${on(fresh, workers).address}:9002`
  await beat(on(fresh, workers).id, [
    { attemptUid: uid(fresh), state: "RUNNING", endpoint: newUrl, ready: true },
  ])
  await pass()
  const rolled = await swarm()
  expect(rolled).toMatchObject({ phase: "RUNNING", url, observedGeneration: 2 })
  expect(rolled.message).toBeUndefined()
  expect(rolled.replicaSet!.replicas.map((r) => [r.slot, r.state])).toEqual([
    [0, "draining"],
    [1, "serving"],
  ])
  expect(rolled.replicaSet!.lastChange).toMatch(
    /replica 0 \(generation 1\) leaves the router: replaced by generation 2/,
  )
  expect(await upstreams()).toEqual([newUrl])
  const oldJob = () => rt.repos.jobs.get("p", replicaJobId(rolled, 0))
  expect((await oldJob())!.cancelRequested).toBe(false)

  // Stopped once its drain time (30 s by default) is over; gone from the set once it has ended.
  clock.advance(29_000)
  await pass()
  expect((await oldJob())!.cancelRequested).toBe(false)
  clock.advance(1_000)
  await pass()
  expect((await oldJob())!.cancelRequested).toBe(true)
  await beat(on(replica!, workers).id, [{ attemptUid: uid(replica!), state: "KILLED" }])
  await pass()
  expect((await swarm()).replicaSet!.replicas.map((r) => r.slot)).toEqual([1])
  expect((await swarm()).url).toBe(url)
})

test("a router is placed again on the host it listened on, before any other worker", () => {
  const at = "2026-01-01T00:00:00.000Z"
  const worker = (id: string, address: string) => ({
    id,
    project: "p",
    backendId: "pool",
    address,
    resources: { cpu: 4, memoryMiB: 4096, gpu: 0 },
    attributes: {},
    health: "healthy" as const,
    lastSeen: at,
    registeredAt: at,
  })
  const job = {
    id: "srv-llm-x-router-g1",
    project: "p",
    spec: { priority: "production", resources: { cpu: 1, memoryMiB: 256, gpu: 0 } },
    serving: { swarm: "llm", generation: 1, replicas: 0, healthPath: "/health" },
    createdAt: at,
  } as unknown as Job
  const router = (endpoint?: string): Task => ({
    index: 0,
    state: "PENDING",
    attempts: endpoint ? [{ attemptUid: "r-1", state: "FAILED", endpoint, createdAt: at }] : [],
    failureCount: 1,
    preemptionCount: 0,
    updatedAt: at,
  })
  const workers = [worker("w-a", "10.0.0.7"), worker("w-b", "10.0.0.8:7000")]
  const placed = (task: Task) =>
    place(buildSnapshot(workers, [], [{ job, task: { data: task } } as never])).assignments[0]?.workerId
  expect(placed(router())).toBe("w-a")
  expect(placed(router("http://10.0.0.8:21000"))).toBe("w-b")
  // A host no worker has any more: anywhere.
  expect(placed(router("http://10.0.0.9:21000"))).toBe("w-a")
})
