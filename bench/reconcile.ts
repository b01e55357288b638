/**
 * What a steady reconcile pass costs: store calls (counted at the StateStore port) and time, for the
 * pass as it is (`control/reconcile.ts`: one snapshot, only touched jobs settled) and the pass before
 * the observe → plan → apply rewrite (`baseline/reconcile-before.ts`: the active work read up to four
 * times, every active job settled every pass), each on its own store with the same work, in this
 * process. A workers backend holds `tasks` running tasks in jobs of 10 (`control/testing/history.ts`); before each measured pass, 1%
 * of them fail (as their workers' heartbeats report it) and are due for a retry, or none: the pass
 * recounts those jobs and places the retries again.
 *
 * `npm run bench -- reconcile`.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb"
import { reconcilePass } from "@swarmplane/core/control/reconcile"
import { type BusyPlane, busyPlane, failSome, type Pass } from "@swarmplane/core/control/testing/history"
import { DynamoStore, ensureTable } from "@swarmplane/core/store/dynamo"
import { MemoryStore } from "@swarmplane/core/store/memory"
import { startDynalite } from "../functions/local/servers"
import { reconcilePass as reconcilePassBefore } from "./baseline/reconcile-before"
import { median, table } from "./util"

/** Median store calls and milliseconds of `runs` passes, each after `changed` tasks ended. */
async function measure(p: BusyPlane, pass: Pass, changed: number, runs: number) {
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
      results.push(await measure(await busyPlane(MemoryStore(), 5000, pass), pass, changed, 3))
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
    results.push(await measure(await busyPlane(await dynamo(), 1000, pass), pass, 10, 9))
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
