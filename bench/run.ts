/**
 * `npm run bench`: every benchmark, each printing a table with ratios against a baseline run in the
 * same process or loop. `npm run bench -- scheduler` (or any name in `benches` below) runs one.
 * The tables and figures also go to `bench/results/<time>.json` (the path is printed), so runs compare.
 */
import { mkdirSync, writeFileSync } from "node:fs"
import { availableParallelism, cpus } from "node:os"
import { join } from "node:path"
import { main as batchBench } from "./batch"
import { main as coldStartBench } from "./cold-start"
import { main as eksBench } from "./eks"
import { main as historyBench } from "./history"
import { main as latencyBench } from "./latency"
import { main as localApiBench } from "./local-api"
import { main as reconcileBench } from "./reconcile"
import { main as routerBench } from "./router"
import { main as scaleBench } from "./scale"
import { main as schedulerBench } from "./scheduler"
import { main as slurmBench } from "./slurm"
import { main as slurmLatencyBench } from "./slurm-latency"
import { main as storeBench } from "./store"
import { recorded, startBench } from "./util"

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true"

const benches: Record<string, () => Promise<void>> = {
  store: storeBench,
  scheduler: schedulerBench,
  reconcile: reconcileBench,
  slurm: slurmBench,
  "slurm-latency": slurmLatencyBench,
  eks: eksBench,
  batch: batchBench,
  router: routerBench,
  "cold-start": coldStartBench,
  "local-api": localApiBench,
  latency: latencyBench,
  history: historyBench,
  scale: scaleBench,
}
const wanted = process.argv.slice(2)
const unknown = wanted.filter((name) => !(name in benches))
if (unknown.length) {
  console.error(`unknown bench ${unknown.join(", ")}: choose from ${Object.keys(benches).join(", ")}`)
  process.exit(2)
}
const startedAt = new Date()
for (const [name, run] of Object.entries(benches))
  if (!wanted.length || wanted.includes(name)) {
    startBench(name)
    await run()
  }
const folder = join(import.meta.dirname, "results")
mkdirSync(folder, { recursive: true })
const file = join(folder, `${startedAt.toISOString().replace(/[:.]/g, "-")}.json`)
const machine = { node: process.version, cores: availableParallelism(), cpu: cpus()[0]?.model ?? "?" }
writeFileSync(
  file,
  `${JSON.stringify({ startedAt: startedAt.toISOString(), machine, results: recorded() }, null, 2)}\n`,
)
console.log(`\nresults: ${file}`)
process.exit(0)
