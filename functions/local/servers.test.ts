/**
 * The embedded dynalite gives memory back: a query that stops before the end of its range (a `Limit`,
 * a 1 MB page) leaves its LevelDB iterator open, holding a snapshot of the database; those left idle
 * are closed, and the store works on.
 */
import { afterAll, expect, test } from "vitest"
import { DynamoStore, ensureTable } from "../../packages/core/src/store/dynamo"
import {
  closeIdleIterators,
  dynamoClient,
  type Embedded,
  IteratorIdleMs,
  openIteratorCount,
  startDynalite,
} from "./servers"

let server: Embedded | undefined
afterAll(async () => server?.stop())

test("iterators that paged queries leave open are closed once idle, and the store works on", async () => {
  server = await startDynalite(undefined)
  const client = dynamoClient(server.endpoint)
  await ensureTable(client, "iterators")
  const store = DynamoStore({ client, tableName: "iterators" })
  await store.createMany(
    Array.from({ length: 50 }, (_, i) => ({
      pk: "P#1",
      sk: `T#${String(i).padStart(3, "0")}`,
      type: "task",
      data: { i },
      active: { pk: "A#1", sk: String(i).padStart(3, "0") },
    })),
  )
  closeIdleIterators(0)
  // Pages of 10: each stops before the end of its range.
  const pages = 20
  for (let i = 0; i < pages; i++) {
    const page = await store.queryIndex("active", "A#1", { limit: 10 })
    expect(page.items).toHaveLength(10)
  }
  // Each page left its iterator open (the sweeper closes those idle for IteratorIdleMs meanwhile).
  const left = openIteratorCount()
  expect(left).toBeGreaterThan(0)

  // None is closed while it may still be read; once idle past the limit, all are.
  expect(closeIdleIterators(60_000)).toBe(0)
  expect(closeIdleIterators(IteratorIdleMs, Date.now() + IteratorIdleMs + 1)).toBe(left)
  expect(openIteratorCount()).toBe(0)

  const all = await store.query("P#1", { consistent: true })
  expect(all.items).toHaveLength(50)
  const page = await store.queryIndex("active", "A#1", { limit: 10 })
  expect(page.items.map((item) => (item.data as { i: number }).i)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
  client.destroy()
})
