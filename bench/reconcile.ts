/**
 * What a steady reconcile pass costs: store calls (counted at the StateStore port) and time, for the
 * pass as it is (`control/reconcile.ts`: one snapshot, only touched jobs settled) and the pass before
 * the observe → plan → apply rewrite (`baseline/reconcile-before.ts`: the active work read up to four
 * times, every active job settled every pass), each on its own store with the same work, in this
 * process. A workers backend holds `tasks` running tasks in jobs of 10; before each measured pass, 1%
 * of them fail (as their workers' heartbeats report it) and are due for a retry, or none: the pass
 * recounts those jobs and places the retries again.
 *
 * `npm run bench -- reconcile`.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb"
import { reconcilePass } from "@swarmplane/core/control/reconcile"
import { type Backend, BackendConfig } from "@swarmplane/core/model/backend"
import { JobSpec } from "@swarmplane/core/model/job"
import { MemoryQueue } from "@swarmplane/core/queue/memory"
import { createRuntime, type Runtime } from "@swarmplane/core/runtime"
import { countingStore } from "@swarmplane/core/store/counting"
import { DynamoStore, ensureTable } from "@swarmplane/core/store/dynamo"
import { MemoryStore } from "@swarmplane/core/store/memory"
import type { StateStore } from "@swarmplane/core/store/port"
import { FakeClock } from "@swarmplane/core/util/clock"
import { memoryLogger } from "@swarmplane/core/util/logger"
import { startDynalite } from "../functions/local/servers"
import { reconcilePass as reconcilePassBefore } from "./baseline/reconcile-before"
import { median, table } from "./util"

const TasksPerJob = 10

type Pass = (rt: Runtime, backend: Backend, owner: string) => ReturnType<typeof reconcilePass>

interface Plane {
  rt: Runtime
  clock: FakeClock
  counter: ReturnType<typeof countingStore<StateStore>>
  running: { jobId: string; index: number; attemptUid: string }[]
}

/** A workers backend with `tasks` tasks, all RUNNING, and a pass run until nothing is left to settle. */
export async function plane(base: StateStore, tasks: number, pass: Pass): Promise<Plane> {
  const counter = countingStore(base)
  const clock = new FakeClock()
  const rt = createRuntime({
    store: counter.store,
    queue: MemoryQueue({ clock }),
    clock,
    logger: memoryLogger(),
    pepper: "bench",
    secrets: { get: async () => "" },
  })
  await rt.repos.backends.put("p", "pool", BackendConfig.parse({ type: "workers" }))
  for (let w = 0; w < Math.ceil(tasks / 100); w++)
    await rt.repos.workers.register("p", {
      backendId: "pool",
      resources: { cpu: 1000, memoryMiB: 1_000_000, gpu: 0 },
      attributes: {},
    })
  const spec = JobSpec.parse({
    command: ["true"],
    tasks: TasksPerJob,
    resources: { cpu: 1, memoryMiB: 1 },
    maxRetriesFailure: 100,
  })
  for (let j = 0; j < tasks / TasksPerJob; j++)
    await rt.transitions.jobs.create("p", `job-${j}`, spec, "pool")
  const backend = async () => (await rt.repos.backends.get("p", "pool"))!
  await pass(rt, await backend(), "setup")
  // Every placed task starts, as its worker's first heartbeat says.
  const running: Plane["running"] = []
  for (let j = 0; j < tasks / TasksPerJob; j++) {
    const { job, tasks: items } = (await rt.repos.jobs.load("p", `job-${j}`))!
    const reports = items.map((t) => ({
      index: t.data.index,
      outcome: { kind: "running" as const, attemptUid: t.data.attempts.at(-1)!.attemptUid },
    }))
    await rt.transitions.jobs.applyReports(job.data, reports)
    for (const t of items)
      running.push({
        jobId: job.data.id,
        index: t.data.index,
        attemptUid: t.data.attempts.at(-1)!.attemptUid,
      })
  }
  await pass(rt, await backend(), "setup")
  return { rt, clock, counter, running }
}

/**
 * Fail `n` running tasks, spread over the jobs, as their workers' heartbeats would report it; then
 * let their retry backoff pass (the workers heartbeat meanwhile), so the pass places them again.
 */
export async function failSome(p: Plane, n: number): Promise<void> {
  if (n) {
    const step = Math.max(1, Math.floor(p.running.length / n))
    const picked = p.running.filter((_, i) => i % step === 0).slice(0, n)
    p.running = p.running.filter((t) => !picked.includes(t))
    for (const t of picked) {
      const job = (await p.rt.repos.jobs.get("p", t.jobId))!
      await p.rt.transitions.jobs.applyReports(job, [
        {
          index: t.index,
          outcome: { kind: "failed", attemptUid: t.attemptUid, reason: "exit_code", exitCode: 1 },
        },
      ])
    }
  }
  p.clock.advance(3_000)
  for (const w of await p.rt.repos.workers.list("p", "pool")) await p.rt.repos.workers.heartbeat("p", w.id)
}

/** Median store calls and milliseconds of `runs` passes, each after `changed` tasks ended. */
async function measure(p: Plane, pass: Pass, changed: number, runs: number) {
  const calls: number[] = []
  const ms: number[] = []
  for (let r = 0; r < runs; r++) {
    await failSome(p, changed)
    const backend = (await p.rt.repos.backends.get("p", "pool"))!
    p.counter.reset()
    const t0 = performance.now()
    const report = await pass(p.rt, backend, `bench-${r}`)
    ms.push(performance.now() - t0)
    calls.push(p.counter.total())
    if (report.error) throw new Error(report.error)
  }
  return { calls: median(calls), ms: median(ms) }
}

const variants: [string, Pass][] = [
  ["before: re-reads, settles every job (baseline)", reconcilePassBefore],
  ["observe → plan → apply", reconcilePass],
]

export async function main(): Promise<void> {
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true"
  const rows: string[][] = []
  const add = (store: string, tasks: number, changed: number, results: { calls: number; ms: number }[]) => {
    const base = results[0]!
    for (const [i, r] of results.entries())
      rows.push([
        store,
        String(tasks),
        `${changed} (${((100 * changed) / tasks).toFixed(0)}%)`,
        variants[i]![0],
        String(r.calls),
        r.ms.toFixed(1),
        (base.calls / Math.max(1, r.calls)).toFixed(1),
        (base.ms / r.ms).toFixed(1),
      ])
  }

  for (const changed of [0, 50]) {
    const results = []
    for (const [, pass] of variants)
      results.push(await measure(await plane(MemoryStore(), 5000, pass), pass, changed, 3))
    add("memory", 5000, changed, results)
  }

  const server = await startDynalite(undefined)
  const client = new DynamoDBClient({
    endpoint: server.endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: "b", secretAccessKey: "b" },
  })
  let table_ = 0
  const dynamo = async () => {
    const tableName = `bench-${++table_}`
    await ensureTable(client, tableName)
    return DynamoStore({ client, tableName })
  }
  const results = []
  for (const [, pass] of variants)
    results.push(await measure(await plane(await dynamo(), 1000, pass), pass, 10, 9))
  add("dynalite", 1000, 10, results)
  await server.stop()
  client.destroy()

  console.log(
    "\nA steady reconcile pass on a workers backend (median of runs; ratios against the baseline in this run)\n",
  )
  console.log(
    table(
      [
        "store",
        "active tasks",
        "failed since last pass",
        "pass",
        "store calls",
        "median ms",
        "fewer calls ×",
        "speed-up",
      ],
      rows,
    ),
  )
}

if (import.meta.url === `file://${process.argv[1]}`) await main()
