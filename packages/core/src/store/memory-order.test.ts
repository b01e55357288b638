/**
 * The MemoryStore keeps each partition it has read in sort order as writes land (rather than sorting
 * again on each query): after any sequence of writes, every query answers as a store that sorts from
 * scratch does.
 */
import fc from "fast-check"
import { expect, test } from "vitest"
import { MemoryStore } from "./memory"
import type { IndexName, StateStore } from "./port"

type Op = { kind: "put"; sk: string; active?: string; list?: string } | { kind: "delete"; sk: string }

const sk = fc.constantFrom("a", "b", "c", "ab", "é", "z", "a\u{1F600}", "b2")
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    kind: fc.constant("put" as const),
    sk,
    active: fc.option(sk, { nil: undefined }),
    list: fc.option(sk, { nil: undefined }),
  }),
  fc.record({ kind: fc.constant("delete" as const), sk }),
)

async function apply(store: StateStore, o: Op): Promise<void> {
  const key = { pk: "P", sk: o.sk }
  if (o.kind === "delete") return store.delete(key)
  const item = {
    ...key,
    type: "thing",
    data: { sk: o.sk },
    ...(o.active ? { active: { pk: "A", sk: o.active } } : {}),
    ...(o.list ? { list: { pk: "L", sk: o.list } } : {}),
  }
  const current = await store.get(key)
  if (current) await store.update({ ...current, ...item, active: item.active, list: item.list })
  else await store.create(item)
}

/** Every listing the test compares: the table partition and both index partitions, both ways, paged. */
async function listings(store: StateStore) {
  const all = async (read: (cursor?: string) => ReturnType<StateStore["query"]>) => {
    const out: string[] = []
    let cursor: string | undefined
    do {
      // A listing out of order can page forever: fail instead.
      if (out.length > 100) throw new Error(`a listing did not end: ${out.join(" ")}`)
      const page = await read(cursor)
      out.push(...page.items.map((item) => `${item.sk}@${item.version}`))
      cursor = page.cursor
    } while (cursor)
    return out
  }
  const views: Record<string, string[]> = {}
  for (const reverse of [false, true]) {
    views[`table ${reverse}`] = await all((cursor) => store.query("P", { limit: 2, reverse, cursor }))
    for (const index of ["active", "list"] as IndexName[])
      views[`${index} ${reverse}`] = await all((cursor) =>
        store.queryIndex(index, index === "active" ? "A" : "L", { limit: 2, reverse, cursor }),
      )
  }
  return views
}

test("partitions kept in order across writes answer as a store sorted from scratch", async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(op, { maxLength: 40 }), async (ops) => {
      const store = MemoryStore()
      for (const o of ops) {
        await apply(store, o)
        // Reading after each write keeps the sorted partitions, so the next write must maintain them.
        const kept = await listings(store)
        const fresh = await listings(MemoryStore({ initial: [...store.items()] }))
        expect(kept).toEqual(fresh)
      }
    }),
    { numRuns: 100 },
  )
})
