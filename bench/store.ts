/**
 * What creating a job's tasks costs on a DynamoDB-compatible store (dynalite, in
 * this process). The baseline writes each task with its own conditional put; swarmplane's store
 * writes them 25 per BatchWriteItem. Both run here, in the same process, on the same server.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb"
import { newTask } from "@swarmplane/core/rules/task-state"
import { countDynamoCalls } from "@swarmplane/core/store/counting"
import { DynamoStore, ensureTable } from "@swarmplane/core/store/dynamo"
import type { NewItem } from "@swarmplane/core/store/port"
import { startDynalite } from "../functions/local/servers"
import { median, table } from "./util"

export async function main(): Promise<void> {
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true"

  const server = await startDynalite(undefined)
  const client = new DynamoDBClient({
    endpoint: server.endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: "b", secretAccessKey: "b" },
  })
  await ensureTable(client, "bench")
  const store = DynamoStore({ client, tableName: "bench" })
  const calls = countDynamoCalls(client)

  const tasks = (job: string, n: number): NewItem[] =>
    Array.from({ length: n }, (_, i) => ({
      pk: `P#bench#JOB#${job}`,
      sk: `B#TASK#${String(i).padStart(5, "0")}`,
      type: "task",
      data: newTask(i, new Date().toISOString()),
    }))

  const variants = {
    "one put per task (baseline)": async (items: NewItem[]) => {
      for (const item of items) await store.create(item)
    },
    "createMany (25 per batch)": (items: NewItem[]) => store.createMany(items),
  }

  const rows: string[][] = []
  for (const size of [100, 1000]) {
    const results: Record<string, { ms: number; calls: number }> = {}
    for (const [name, run] of Object.entries(variants)) {
      const times: number[] = []
      let perRun = 0
      for (let r = 0; r < 5; r++) {
        const items = tasks(`${name.length}-${size}-${r}`, size)
        calls.reset()
        const t0 = performance.now()
        await run(items)
        times.push(performance.now() - t0)
        perRun = calls.total()
      }
      results[name] = { ms: median(times), calls: perRun }
    }
    const base = results["one put per task (baseline)"]!
    for (const [name, r] of Object.entries(results))
      rows.push([
        String(size),
        name,
        String(r.calls),
        r.ms.toFixed(1),
        (base.ms / r.ms).toFixed(2),
        (base.calls / r.calls).toFixed(1),
      ])
  }

  const header = ["tasks", "variant", "DynamoDB calls", "median ms", "speed-up", "fewer calls ×"]
  console.log(
    "\nCreating a job's tasks on dynalite (median of 5 runs; ratios against the baseline in this run)\n",
  )
  console.log(table(header, rows))
  await server.stop()
  client.destroy()
}
