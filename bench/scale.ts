/**
 * Scale on paper: what 1 M tasks a day with 10,000 tasks active at once costs a month in DynamoDB,
 * SQS and Lambda calls at list prices, from per-operation costs measured here, through the real API
 * and reconcile pass, on DynamoDB Local (capacity units as DynamoDB reports them) or, without Java,
 * on the memory store (units estimated from the items: 1 WCU per item written, ½ RCU per item read).
 *
 * Measured: a job of `TasksPerJob` submitted (`POST /v1/jobs`); the pass that places it; the worker's
 * heartbeats that take the attempts, report them RUNNING, keep them running, report them SUCCEEDED;
 * a reconcile tick at `MeasuredActive` active tasks with 1% of them ended since the last one (reads
 * grow linearly with active work, `bench/history.ts`, so the tick at 10,000 is scaled from it).
 * Assumed (each a constant below): the workload's shape, the cadences from the code, the Lambda
 * durations. The README's "Scale on paper" figures are this script's output.
 *
 * `npm run bench -- scale`.
 */
import { randomUUID } from "node:crypto"
import { testApi } from "@swarmplane/core/api/testing"
import { LeaseTtlMs, reconcilePass } from "@swarmplane/core/control/reconcile"
import { busyPlane } from "@swarmplane/core/control/testing/history"
import { type CapacityCounter, countDynamoCapacity, countingStore } from "@swarmplane/core/store/counting"
import { DynamoStore, ensureTable } from "@swarmplane/core/store/dynamo"
import { ActiveShards } from "@swarmplane/core/store/keys"
import { MemoryStore } from "@swarmplane/core/store/memory"
import type { StateStore } from "@swarmplane/core/store/port"
import { dynamoClient, javaAvailable, startDynamoLocal } from "../test/support/dynamo"
import { measurePasses } from "./history"
import { record, table } from "./util"

/** The workload. */
const TasksPerDay = 1_000_000
const ActiveTasks = 10_000
const TasksPerJob = 10
/** Tasks a worker runs at once (10,000 active tasks on 1,000 workers). */
const TasksPerWorker = 10
const MeasuredActive = 1_000

/** Cadences, from the code: the heartbeat's default (`heartbeatIntervalS`), a busy backend's ticks. */
const HeartbeatS = 5
/** A backend's `heartbeatIntervalS` can be up to 300: the same month at 30 s. */
const SlowerHeartbeatS = 30
const TickPauseS = 5
/** A pass at 10,000 active tasks, assumed (reads 4 index partitions side by side, ~3 pages each). */
const PassS = 1

/** Lambda: memory of every function (infra/), and billed duration per invocation, assumed. */
const LambdaGb = 0.5
const ApiRequestS = 0.05
const ScheduleBatchS = PassS

/** List prices, us-east-1, on-demand. */
const Price = { wru: 1.25e-6, rru: 0.25e-6, sqs: 0.4e-6, lambdaRequest: 0.2e-6, gbSecond: 0.0000166667 }

const SecondsPerMonth = 30 * 86_400

interface Cost {
  calls: number
  items: number
  rcu: number
  wcu: number
}

/** A store to measure on, and how to read what it consumed. */
interface Meter {
  store: StateStore
  capacity?: CapacityCounter
}

async function measureOps(meter: Meter) {
  const counter = countingStore(meter.store)
  const api = await testApi({ store: counter.store })
  const cost = async (step: () => Promise<unknown>): Promise<Cost> => {
    counter.reset()
    meter.capacity?.reset()
    await step()
    const r = counter.reads()
    const w = counter.writes()
    return {
      calls: r.calls + w.calls,
      items: r.items + w.items,
      // Without DynamoDB's answer: ½ RCU per item read (eventually consistent, under 4 KB), 1 WCU per item written.
      rcu: meter.capacity ? meter.capacity.read : r.items / 2,
      wcu: meter.capacity ? meter.capacity.write : w.items,
    }
  }
  const ok = <T extends { status: number; text: string }>(res: T) => {
    if (res.status >= 300) throw new Error(`${res.status}: ${res.text}`)
    return res
  }
  ok(await api.call("POST", "/v1/backends", { body: { id: "pool", config: { type: "workers" } } }))
  const reg = ok(
    await api.call("POST", "/v1/workers/register", {
      body: { backendId: "pool", name: "w1", resources: { cpu: 64, memoryMiB: 65_536 } },
    }),
  ).json
  const beat = (attempts: { attemptUid: string; state: string; exitCode?: number }[]) =>
    api
      .call("POST", `/v1/workers/${reg.worker.id}/heartbeat`, {
        body: { attempts },
        headers: { "Swarmplane-Worker-Credential": reg.credential },
      })
      .then(ok)

  const idle = await cost(() => beat([]))
  const submit = await cost(() =>
    api
      .call("POST", "/v1/jobs", {
        body: {
          backendId: "pool",
          command: ["true"],
          tasks: TasksPerJob,
          resources: { cpu: 1, memoryMiB: 1 },
        },
      })
      .then(ok),
  )
  const messages = (await api.queue.receive({ max: 10 })).length
  const backend = (await api.deps.repos.backends.get("default", "pool"))!
  const place = await cost(() => reconcilePass(api.deps, backend, "scale"))
  let uids: string[] = []
  const take = await cost(async () => {
    uids = (await beat([])).json.desired.map((d: { attemptUid: string }) => d.attemptUid)
  })
  if (uids.length !== TasksPerJob) throw new Error(`the worker was given ${uids.length} attempts`)
  const running = await cost(() => beat(uids.map((attemptUid) => ({ attemptUid, state: "RUNNING" }))))
  const steady = await cost(() => beat(uids.map((attemptUid) => ({ attemptUid, state: "RUNNING" }))))
  const succeeded = await cost(() =>
    beat(uids.map((attemptUid) => ({ attemptUid, state: "SUCCEEDED", exitCode: 0 }))),
  )
  const job = (await api.call("GET", "/v1/jobs?limit=1")).json.items?.[0]
  if (job?.status !== "SUCCEEDED") throw new Error(`the job ended ${job?.status}`)
  return { idle, submit, messages, place, take, running, steady, succeeded }
}

/** A tick at `MeasuredActive` active tasks with 1% ended since the last, and one with nothing new. */
async function measureTick(meter: Meter) {
  const plane = await busyPlane(meter.store, MeasuredActive)
  const busy = await measurePasses(plane, 3, meter.capacity)
  const quiet = await measurePasses(plane, 3, meter.capacity, 0)
  return {
    rcu: busy.rcu ?? busy.readItems / 2,
    wcu: busy.wcu ?? busy.writeItems,
    /** What a pass writes whatever it finds (its lease): the rest of its writes are the work's, counted per job. */
    fixedWcu: quiet.wcu ?? quiet.writeItems,
    readItems: busy.readItems,
    readCalls: busy.readCalls,
    ms: busy.ms,
  }
}

const money = (usd: number) => `$${usd < 10 ? usd.toFixed(2) : Math.round(usd).toLocaleString("en-US")}`
const millions = (n: number) => `${(n / 1e6).toFixed(n < 1e7 ? 2 : 0)} M`

export async function main(): Promise<void> {
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true"
  let measured: Awaited<ReturnType<typeof measureOps>>
  let tick: Awaited<ReturnType<typeof measureTick>>
  let on: string
  if (javaAvailable()) {
    const server = await startDynamoLocal()
    const client = dynamoClient(server.endpoint)
    const capacity = countDynamoCapacity(client)
    const meter = async (): Promise<Meter> => {
      const tableName = `scale-${randomUUID().slice(0, 8)}`
      await ensureTable(client, tableName)
      return { store: DynamoStore({ client, tableName }), capacity }
    }
    try {
      measured = await measureOps(await meter())
      tick = await measureTick(await meter())
    } finally {
      capacity.stop()
      client.destroy()
      await server.stop()
    }
    on = "DynamoDB Local (capacity units as reported)"
  } else {
    measured = await measureOps({ store: MemoryStore() })
    tick = await measureTick({ store: MemoryStore() })
    on = "the memory store (capacity units estimated from items)"
  }
  const m = measured

  console.log(`\nMeasured per operation, on ${on}\n`)
  const opRows: [string, Cost][] = [
    [`submit a job of ${TasksPerJob} tasks (POST /v1/jobs)`, m.submit],
    [`the pass that places it (${TasksPerJob} tasks)`, m.place],
    ["heartbeat, idle worker", m.idle],
    [`heartbeat that takes ${TasksPerJob} new attempts`, m.take],
    [`heartbeat reporting ${TasksPerJob} attempts RUNNING`, m.running],
    [`heartbeat, ${TasksPerJob} attempts running, nothing new`, m.steady],
    [`heartbeat reporting ${TasksPerJob} attempts SUCCEEDED (job ends)`, m.succeeded],
  ]
  console.log(
    table(
      ["operation", "store calls", "items", "RCU", "WCU"],
      [
        ...opRows.map(([name, c]) => [
          name,
          String(c.calls),
          String(c.items),
          c.rcu.toFixed(1),
          c.wcu.toFixed(1),
        ]),
        [
          `reconcile tick, ${MeasuredActive} active, 1% ended since the last`,
          String(tick.readCalls),
          String(tick.readItems),
          tick.rcu.toFixed(1),
          tick.wcu.toFixed(1),
        ],
      ],
    ),
  )

  // The month.
  const tasks = TasksPerDay * 30
  const jobs = tasks / TasksPerJob
  const workers = ActiveTasks / TasksPerWorker
  const perActive = (x: number) => (x / MeasuredActive) * ActiveTasks
  /** The month, with workers heartbeating every `heartbeatS`. */
  const month = (heartbeatS: number) => {
    const heartbeats = (workers * SecondsPerMonth) / heartbeatS
    // Of every worker's heartbeats, those that carry news: each job's take, RUNNING and SUCCEEDED.
    const newsBeats = 3 * jobs
    const steadyBeats = Math.max(0, heartbeats - newsBeats)
    // Passes: a tick every TickPauseS (the reconcile cron sends them, the consumer runs them), and one
    // per schedule message (each job's), but never two at once per backend (the lease): at most one a
    // pass-duration.
    const ticks = SecondsPerMonth / TickPauseS
    const scheduleInvocations = jobs * m.messages
    const passes = Math.min(ticks + scheduleInvocations, SecondsPerMonth / PassS)
    const life = {
      rcu: m.submit.rcu + m.take.rcu + m.running.rcu + m.succeeded.rcu,
      wcu: m.submit.wcu + m.place.wcu + m.take.wcu + m.running.wcu + m.succeeded.wcu,
    }
    // A pass's reads are the whole active index; its writes beyond its lease are the work's, in `life`.
    const sources: [string, number, number][] = [
      [
        `jobs' lives (${millions(jobs)} jobs: submit, place, take, RUNNING, SUCCEEDED)`,
        jobs * life.rcu,
        jobs * life.wcu,
      ],
      [
        `heartbeats with nothing new (${millions(steadyBeats)})`,
        steadyBeats * m.steady.rcu,
        steadyBeats * m.steady.wcu,
      ],
      [
        `reconcile passes (${millions(passes)}, each reading the active index)`,
        passes * perActive(tick.rcu),
        passes * tick.fixedWcu,
      ],
    ]
    const dynamo = {
      rru: sources.reduce((n, [, r]) => n + r, 0),
      wru: sources.reduce((n, [, , w]) => n + w, 0),
    }
    // Each job: one message sent by the API, received and deleted by the consumer's poller (batches of
    // up to 10: counted as one each, the upper bound). Each tick: received and deleted, sent 10 a call.
    const sqsRequests = jobs * m.messages * 3 + ticks * (2 + 1 / 10)
    const apiCalls = jobs + heartbeats
    // The reconcile cron fires every minute and only sends the minute's ticks (about a second); each
    // tick is a consumer invocation of one pass.
    const reconcileInvocations = SecondsPerMonth / 60
    const gbSeconds =
      LambdaGb *
      (apiCalls * ApiRequestS + (scheduleInvocations + ticks) * ScheduleBatchS + reconcileInvocations * 1)
    const lambdaRequests = apiCalls + scheduleInvocations + ticks + 2 * reconcileInvocations
    const rows: [string, string, number][] = [
      ...sources.map(([name, rru, wru]): [string, string, number] => [
        `DynamoDB: ${name}`,
        `${millions(rru)} RRU, ${millions(wru)} WRU`,
        rru * Price.rru + wru * Price.wru,
      ]),
      ["SQS", `${millions(sqsRequests)} requests`, sqsRequests * Price.sqs],
      ["Lambda requests", `${millions(lambdaRequests)} invocations`, lambdaRequests * Price.lambdaRequest],
      ["Lambda duration", `${millions(gbSeconds)} GB-s`, gbSeconds * Price.gbSecond],
    ]
    const total = rows.reduce((n, [, , usd]) => n + usd, 0)
    return { rows, total, dynamo, passes, heartbeats }
  }
  const { rows, total, dynamo, passes, heartbeats } = month(HeartbeatS)
  console.log(
    `\n${TasksPerDay.toLocaleString("en-US")} tasks a day in jobs of ${TasksPerJob}, ${ActiveTasks.toLocaleString("en-US")} active on ${workers} workers heartbeating every ${HeartbeatS} s: a month at list prices (us-east-1, on-demand)\n`,
  )
  console.log(
    table(
      ["what", "per month", "cost"],
      [...rows.map(([a, b, usd]) => [a, b, money(usd)]), ["total", "", money(total)]],
    ),
  )
  const slower = month(SlowerHeartbeatS)
  console.log(
    `\nWith heartbeatIntervalS ${SlowerHeartbeatS} (new work then waits up to that long for a worker whose heartbeat is not held open): ${money(slower.total)} a month, of which heartbeats with nothing new ${money(slower.rows[1]![2])}.`,
  )

  // The limits.
  const partitionRcu = perActive(tick.rcu) / ActiveShards / PassS
  const writesPerSecond = (jobs * (m.place.wcu + m.running.wcu + m.succeeded.wcu)) / SecondsPerMonth
  console.log("\nAgainst the limits\n")
  console.log(
    table(
      ["limit", "at this load", "headroom"],
      [
        [
          "3,000 RCU/s per partition: a pass reads each active-index shard",
          `${partitionRcu.toFixed(0)} RCU/s per shard (${ActiveShards} shards, one pass a second at most)`,
          `${(3000 / partitionRcu).toFixed(0)}×`,
        ],
        [
          "1,000 WCU/s per partition: task writes land in the shards",
          `${(writesPerSecond / ActiveShards).toFixed(1)} WCU/s per shard on average`,
          `${(1000 / (writesPerSecond / ActiveShards)).toFixed(0)}×`,
        ],
        [
          "1,000 concurrent Lambdas (account default)",
          `${((heartbeats / SecondsPerMonth) * ApiRequestS + 2).toFixed(0)} at once on average (API + ticks)`,
          `${(1000 / ((heartbeats / SecondsPerMonth) * ApiRequestS + 2)).toFixed(0)}×`,
        ],
        [
          "the same, heartbeats held open (?waitS, up to 20 s)",
          `${workers} at once: one per worker`,
          `${(1000 / workers).toFixed(1)}×`,
        ],
        [
          `pass under its ${LeaseTtlMs / 1000} s lease`,
          `${(perActive(tick.ms) / 1000).toFixed(1)} s at ${ActiveTasks} active, scaled from ${tick.ms.toFixed(0)} ms at ${MeasuredActive} (DynamoDB Local)`,
          `${(LeaseTtlMs / Math.max(1, perActive(tick.ms))).toFixed(0)}×`,
        ],
      ],
    ),
  )
  record({
    measuredOn: on,
    perOperation: Object.fromEntries(opRows),
    tick: { active: MeasuredActive, ...tick },
    passesPerMonth: passes,
    dynamoPerMonth: dynamo,
    month: Object.fromEntries(rows.map(([name, amount, usd]) => [name, { amount, usd }])),
    totalUsd: total,
    totalUsdSlowerHeartbeats: slower.total,
  })
}

if (import.meta.url === `file://${process.argv[1]}`) await main()
