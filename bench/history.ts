/**
 * What a reconcile tick (its one pass, here) reads as the finished history grows, and as the active work grows: store
 * reads (calls and items, counted at the StateStore port) and, on DynamoDB Local, the read capacity
 * units DynamoDB says they consumed (`ReturnConsumedCapacity`). A workers backend holds `active`
 * running tasks in jobs of 10, and 1% of them fail before each measured pass (the pass places their
 * retries and recounts their jobs); beside them lie `finished` tasks of jobs that ran to the end (the
 * items real finished jobs leave, copied: `control/testing/history.ts`). The pass should read the
 * active index and the jobs it touches: the same with twice the history, twice as much with twice
 * the active work.
 *
 * `npm run bench -- history`. `HISTORY_SCALE=0.1` shrinks every size (a quick look).
 */
import { randomUUID } from "node:crypto"
import {
  type BusyPlane,
  busyPlane,
  failSome,
  finishedJobItems,
  seedHistory,
  TasksPerJob,
} from "@swarmplane/core/control/testing/history"
import { reconcileTick } from "@swarmplane/core/control/ticks"
import { type CapacityCounter, countDynamoCapacity } from "@swarmplane/core/store/counting"
import { DynamoStore, ensureTable } from "@swarmplane/core/store/dynamo"
import { MemoryStore } from "@swarmplane/core/store/memory"
import type { StateStore, StoredItem } from "@swarmplane/core/store/port"
import { dynamoClient, javaAvailable, startDynamoLocal } from "../test/support/dynamo"
import { median, record, table } from "./util"

export interface PassReads {
  readCalls: number
  readItems: number
  writeCalls: number
  writeItems: number
  /** Capacity units, where the store reports them (DynamoDB). */
  rcu?: number
  wcu?: number
  ms: number
}

/**
 * The median of `runs` reconcile ticks (the backends listed, whether each has work, then its pass),
 * each after `churn` (1%) of the running tasks failed.
 */
export async function measurePasses(
  p: BusyPlane,
  runs: number,
  capacity?: CapacityCounter,
  /** Share of the running tasks that fail before each tick. */
  churn = 0.01,
): Promise<PassReads> {
  const samples: PassReads[] = []
  for (let r = 0; r < runs; r++) {
    await failSome(p, Math.round(p.running.length * churn))
    p.counter.reset()
    capacity?.reset()
    const t0 = performance.now()
    const tick = await reconcileTick(p.rt, `history-${r}`)
    const ms = performance.now() - t0
    const failed = tick.backends.find((b) => b.error)
    if (failed) throw new Error(failed.error)
    const reads = p.counter.reads()
    const writes = p.counter.writes()
    samples.push({
      readCalls: reads.calls,
      readItems: reads.items,
      writeCalls: writes.calls,
      writeItems: writes.items,
      ...(capacity ? { rcu: capacity.read, wcu: capacity.write } : {}),
      ms,
    })
  }
  const mid = (pick: (s: PassReads) => number | undefined) => median(samples.map((s) => pick(s) ?? 0))
  return {
    readCalls: mid((s) => s.readCalls),
    readItems: mid((s) => s.readItems),
    writeCalls: mid((s) => s.writeCalls),
    writeItems: mid((s) => s.writeItems),
    ...(capacity ? { rcu: mid((s) => s.rcu), wcu: mid((s) => s.wcu) } : {}),
    ms: mid((s) => s.ms),
  }
}

interface Case {
  label: string
  finished: number
  active: number
  reads: PassReads
}

/**
 * Three cases on fresh stores made by `store`: 1× history and 1× active, the same plane after as much
 * history again (2×), and a plane with twice the active work and 1× history.
 */
async function cases(
  store: () => Promise<{ store: StateStore; capacity?: CapacityCounter }>,
  template: readonly StoredItem[],
  finished: number,
  active: number,
  runs: number,
): Promise<Case[]> {
  const jobs = finished / TasksPerJob
  const out: Case[] = []
  const one = await store()
  const p = await busyPlane(one.store, active)
  await seedHistory(one.store, template, jobs, "done-a")
  out.push({
    label: "1× history, 1× active",
    finished,
    active,
    reads: await measurePasses(p, runs, one.capacity),
  })
  await seedHistory(one.store, template, jobs, "done-b")
  out.push({
    label: "2× history, 1× active",
    finished: 2 * finished,
    active,
    reads: await measurePasses(p, runs, one.capacity),
  })
  const two = await store()
  const q = await busyPlane(two.store, 2 * active)
  await seedHistory(two.store, template, jobs, "done-a")
  out.push({
    label: "1× history, 2× active",
    finished,
    active: 2 * active,
    reads: await measurePasses(q, runs, two.capacity),
  })
  return out
}

const ratio = (a: number | undefined, b: number | undefined) =>
  a === undefined || b === undefined ? "" : (a / Math.max(b, Number.EPSILON)).toFixed(2)

function rows(store: string, measured: Case[]): string[][] {
  const base = measured[0]!.reads
  return measured.map(({ label, finished, active, reads }) => [
    store,
    label,
    String(finished),
    String(active),
    String(reads.readCalls),
    String(reads.readItems),
    reads.rcu === undefined ? "" : reads.rcu.toFixed(1),
    String(reads.writeCalls),
    reads.wcu === undefined ? String(reads.writeItems) : `${reads.writeItems} (${reads.wcu.toFixed(0)} WCU)`,
    `${ratio(reads.readCalls, base.readCalls)} / ${ratio(reads.readItems, base.readItems)}${
      reads.rcu === undefined ? "" : ` / ${ratio(reads.rcu, base.rcu)}`
    }`,
    reads.ms.toFixed(0),
  ])
}

export async function main(): Promise<void> {
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true"
  const scale = Number(process.env.HISTORY_SCALE ?? 1)
  const finished = Math.round((100_000 * scale) / TasksPerJob) * TasksPerJob
  const active = Math.round((5_000 * scale) / TasksPerJob) * TasksPerJob
  const template = await finishedJobItems()
  const all: string[][] = []
  const figures: Record<string, Case[]> = {}

  const memory = await cases(async () => ({ store: MemoryStore() }), template, finished, active, 3)
  all.push(...rows("memory", memory))
  figures.memory = memory

  if (javaAvailable()) {
    const server = await startDynamoLocal()
    const client = dynamoClient(server.endpoint)
    const capacity = countDynamoCapacity(client)
    try {
      const dynamo = async () => {
        const tableName = `history-${randomUUID().slice(0, 8)}`
        await ensureTable(client, tableName)
        return { store: DynamoStore({ client, tableName }), capacity }
      }
      // DynamoDB Local writes a few thousand items a second: a tenth of the sizes keeps the run short.
      const dynamoScale = Number(process.env.HISTORY_DYNAMO_SCALE ?? 0.1)
      const f = Math.round((finished * dynamoScale) / TasksPerJob) * TasksPerJob
      const a = Math.round((active * dynamoScale) / TasksPerJob) * TasksPerJob
      const local = await cases(dynamo, template, f, a, 3)
      all.push(...rows("DynamoDB Local", local))
      figures.dynamoLocal = local
    } finally {
      capacity.stop()
      client.destroy()
      await server.stop()
    }
  }

  console.log(
    `\nWhat one reconcile tick reads against finished history and active work (median of 3 passes, each after 1% of the running tasks failed; ratios against the first row of its store)\n`,
  )
  console.log(
    table(
      [
        "store",
        "case",
        "finished tasks",
        "active tasks",
        "read calls",
        "items read",
        "RCU",
        "write calls",
        "items written",
        "reads × (calls / items / RCU)",
        "median ms",
      ],
      all,
    ),
  )
  record({ passReads: figures })
}

if (import.meta.url === `file://${process.argv[1]}`) await main()
