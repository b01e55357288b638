/**
 * `npm run bench`: every benchmark, each printing a table with ratios against a baseline run in the
 * same process. `npm run bench -- scheduler` (or `store`, `reconcile`, `slurm`, `eks`, `batch`) runs one.
 */
import { main as batchBench } from "./batch"
import { main as eksBench } from "./eks"
import { main as reconcileBench } from "./reconcile"
import { main as schedulerBench } from "./scheduler"
import { main as slurmBench } from "./slurm"
import { main as storeBench } from "./store"

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true"

const benches: Record<string, () => Promise<void>> = {
  store: storeBench,
  scheduler: schedulerBench,
  reconcile: reconcileBench,
  slurm: slurmBench,
  eks: eksBench,
  batch: batchBench,
}
const wanted = process.argv.slice(2)
const unknown = wanted.filter((name) => !(name in benches))
if (unknown.length) {
  console.error(`unknown bench ${unknown.join(", ")}: choose from ${Object.keys(benches).join(", ")}`)
  process.exit(2)
}
for (const [name, run] of Object.entries(benches)) if (!wanted.length || wanted.includes(name)) await run()
process.exit(0)
