/**
 * The StateStore contract: one vitest suite every adapter runs (memory, dynalite, DynamoDB Local).
 * It pins the semantics callers rely on: conditional create and versioned update, no lost update
 * under concurrency, the sparse active index, limit-before-filter, cursors (1 MB pages included)
 * that never cross partitions, batch reads and writes. Every test writes to partitions of its own,
 * so adapters may share one table across tests and runs.
 */
import { randomUUID } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { BackendError } from "../util/errors"
import {
  FencedError,
  InvalidCursorError,
  ItemExistsError,
  type Key,
  mutate,
  type NewItem,
  type Page,
  type QueryOptions,
  queryAll,
  type StateStore,
  type StoredItem,
  VersionConflictError,
} from "./port"

export function storeContract(
  name: string,
  makeStore: () => Promise<{ store: StateStore; cleanup?: () => Promise<void> }>,
): void {
  describe(`StateStore contract: ${name}`, () => {
    let store: StateStore
    let cleanup: (() => Promise<void>) | undefined
    const run = randomUUID().slice(0, 8)
    let partitions = 0
    /** A partition key no other test, suite or run uses. */
    const fresh = (label: string) => `contract#${run}#${++partitions}#${label}`
    const thing = <T>(pk: string, sk: string, data: T, extra: Partial<NewItem<T>> = {}): NewItem<T> => ({
      pk,
      sk,
      type: "thing",
      data,
      ...extra,
    })
    const read = <T>(key: Key) => store.get<T>(key, { consistent: true })
    /** Every page of a listing, following cursors. */
    async function pages<T>(query: (options: QueryOptions) => Promise<Page<T>>, options: QueryOptions = {}) {
      const out: Page<T>[] = []
      let cursor: string | undefined
      do {
        const page = await query({ ...options, cursor })
        out.push(page)
        cursor = page.cursor
      } while (cursor)
      return out
    }
    const pad = (i: number) => String(i).padStart(3, "0")

    beforeAll(async () => {
      ;({ store, cleanup } = await makeStore())
    })
    afterAll(async () => {
      await cleanup?.()
    })

    it("round-trips nested maps, arrays, numbers, booleans, null and empty strings; absent is undefined", async () => {
      const pk = fresh("roundtrip")
      const data = {
        name: "x",
        empty: "",
        int: 42,
        negative: -3.5,
        big: 2 ** 40,
        zero: 0,
        yes: true,
        no: false,
        nothing: null,
        list: [1, "two", false, { three: 3 }, [], ""],
        nested: { a: { b: { c: "deep", arr: ["", 0] } }, emptyMap: {} },
      }
      const created = await store.create(thing(pk, "item", data, { ttl: 2_000_000_000 }))
      expect(created).toEqual({ pk, sk: "item", type: "thing", version: 1, data, ttl: 2_000_000_000 })
      expect(await read({ pk, sk: "item" })).toEqual(created)
      expect(await store.get({ pk, sk: "item" })).toEqual(created)
      expect(await read({ pk, sk: "other" })).toBeUndefined()
    })

    it("copies on write, and no result can change what is stored: mutating inputs or results changes nothing", async () => {
      const pk = fresh("copies")
      const input = thing(pk, "item", { tags: ["a"] })
      const created = await store.create(input)
      input.data.tags.push("input")
      expect(created.data.tags).toEqual(["a"])
      // A result's data is a fresh copy (DynamoDB) or the stored data frozen (memory and journal, which
      // copy nothing on reads): changing it either changes only the copy or throws.
      const tryPush = (tags: string[], tag: string) => {
        try {
          tags.push(tag)
        } catch (error) {
          expect(error).toBeInstanceOf(TypeError)
        }
      }
      tryPush(created.data.tags, "created")
      tryPush((await read<{ tags: string[] }>({ pk, sk: "item" }))!.data.tags, "got")
      const got = (await read<{ tags: string[] }>({ pk, sk: "item" }))!
      expect(got.data).toEqual({ tags: ["a"] })
      // The item's own fields are the caller's to change: a result spread into an update is the usual way.
      got.version = 99
      expect((await read({ pk, sk: "item" }))!.version).toBe(1)
    })

    it("refuses a duplicate create with ItemExistsError and keeps the first item", async () => {
      const pk = fresh("duplicate")
      await store.create(thing(pk, "item", { who: "first" }))
      const error = await store.create(thing(pk, "item", { who: "second" })).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(ItemExistsError)
      expect((error as ItemExistsError).key).toEqual({ pk, sk: "item" })
      expect(await read({ pk, sk: "item" })).toMatchObject({ version: 1, data: { who: "first" } })
    })

    it("updates with the expected version, and refuses a stale one without changing anything", async () => {
      const pk = fresh("stale")
      const v1 = await store.create(thing(pk, "item", { step: 1, dropped: "yes" }))
      const v2 = await store.update({ ...v1, type: "other", data: { step: 2 } })
      expect(v2).toEqual({ pk, sk: "item", type: "other", version: 2, data: { step: 2 } })
      await expect(store.update({ ...v1, data: { step: 99 } })).rejects.toBeInstanceOf(VersionConflictError)
      expect(await read({ pk, sk: "item" })).toEqual(v2)
    })

    it("refuses to update a deleted item and does not bring it back", async () => {
      const pk = fresh("deleted")
      const item = await store.create(thing(pk, "item", { n: 1 }))
      await store.delete({ pk, sk: "item" })
      await expect(store.update(item)).rejects.toBeInstanceOf(VersionConflictError)
      expect(await read({ pk, sk: "item" })).toBeUndefined()
    })

    it("loses no update under 32 concurrent mutate() calls", async () => {
      const key = { pk: fresh("race"), sk: "counter" }
      await store.create(thing(key.pk, key.sk, { counter: 0 }))
      let changes = 0
      await Promise.all(
        Array.from({ length: 32 }, () =>
          mutate<{ counter: number }>(store, key, (item) => {
            changes++
            return { ...item, data: { counter: item.data.counter + 1 } }
          }),
        ),
      )
      const final = await read<{ counter: number }>(key)
      expect(final?.data.counter).toBe(32)
      expect(final?.version).toBe(33)
      expect(changes).toBeGreaterThanOrEqual(32)
    })

    it("mutate() writes nothing when the change returns undefined, and returns undefined for an absent item", async () => {
      const key = { pk: fresh("noop"), sk: "item" }
      await store.create(thing(key.pk, key.sk, { n: 1 }))
      expect(await mutate(store, key, () => undefined)).toMatchObject({ version: 1 })
      expect(await read(key)).toMatchObject({ version: 1 })
      expect(await mutate(store, { pk: key.pk, sk: "absent" }, (item) => item)).toBeUndefined()
    })

    it("keeps exactly the non-terminal items in the active index", async () => {
      const pk = fresh("jobs")
      const activePk = fresh("active")
      const created: StoredItem<{ state: string }>[] = []
      for (let i = 0; i < 30; i++) {
        created.push(
          await store.create(
            thing(pk, `t#${pad(i)}`, { state: "RUNNING" }, { active: { pk: activePk, sk: `t#${pad(i)}` } }),
          ),
        )
      }
      const finished = created.filter((_, i) => i % 5 < 2)
      expect(finished).toHaveLength(12)
      for (const item of finished)
        await store.update({ ...item, active: undefined, data: { state: "SUCCEEDED" } })

      const listed = await queryAll((cursor) =>
        store.queryIndex<{ state: string }>("active", activePk, { limit: 7, cursor }),
      )
      const expected = created.filter((_, i) => i % 5 >= 2).map((item) => item.sk)
      expect(listed.map((item) => item.sk)).toEqual(expected)
      expect(listed.every((item) => item.data.state === "RUNNING" && item.active?.pk === activePk)).toBe(true)
      const done = await read({ pk, sk: finished[0]!.sk })
      expect(done).toMatchObject({ version: 2, data: { state: "SUCCEEDED" } })
      expect(done?.active).toBeUndefined()
    })

    it("lists by partition in the list index with begins_with, between and reverse order", async () => {
      const listA = fresh("list-a")
      const listB = fresh("list-b")
      const items = [
        ...Array.from({ length: 10 }, (_, i) =>
          thing(fresh("job"), "job", { i }, { list: { pk: listA, sk: `job#${pad(i)}` } }),
        ),
        ...Array.from({ length: 4 }, (_, i) =>
          thing(fresh("swarm"), "swarm", { i }, { list: { pk: listA, sk: `swarm#${pad(i)}` } }),
        ),
        thing(fresh("job"), "job", { i: 0 }, { list: { pk: listB, sk: "job#000" } }),
        thing(fresh("job"), "job", { i: 1 }), // not listed at all
      ]
      for (const item of items) await store.create(item)
      const sks = (listed: StoredItem[]) => listed.map((item) => item.list?.sk)
      const jobs = Array.from({ length: 10 }, (_, i) => `job#${pad(i)}`)

      const forward = await queryAll((cursor) =>
        store.queryIndex("list", listA, { skPrefix: "job#", limit: 3, cursor }),
      )
      expect(sks(forward)).toEqual(jobs)
      const backward = await queryAll((cursor) =>
        store.queryIndex("list", listA, { skPrefix: "job#", reverse: true, limit: 3, cursor }),
      )
      expect(sks(backward)).toEqual([...jobs].reverse())
      const between = await store.queryIndex("list", listA, { skBetween: ["job#003", "job#006"] })
      expect(sks(between.items)).toEqual(["job#003", "job#004", "job#005", "job#006"])
      expect(sks((await store.queryIndex("list", listA, { skPrefix: "swarm#" })).items)).toHaveLength(4)
      expect(sks((await store.queryIndex("list", listB)).items)).toEqual(["job#000"])
    })

    it("orders sort keys by UTF-8 bytes, as DynamoDB does", async () => {
      const pk = fresh("utf8")
      // UTF-16 order would put the astral emoji before U+FF5E; UTF-8 (code point) order puts it last.
      const sorted = ["B", "a", "b", "é", "\uFF5E", "\u{1F600}"]
      for (const sk of [...sorted].reverse()) await store.create(thing(pk, sk, {}))
      expect((await store.query(pk)).items.map((item) => item.sk)).toEqual(sorted)
      expect((await store.query(pk, { reverse: true })).items.map((item) => item.sk)).toEqual(
        [...sorted].reverse(),
      )
      const between = await store.query(pk, { skBetween: ["b", "\uFF5E"] })
      expect(between.items.map((item) => item.sk)).toEqual(["b", "é", "\uFF5E"])
    })

    it("applies limit before filter and finds every match by following cursors", async () => {
      const pk = fresh("filter")
      for (let i = 0; i < 20; i++) {
        // `status` is a DynamoDB reserved word: the filter must go through attribute names.
        await store.create(
          thing(pk, `i#${pad(i)}`, { status: i % 3 === 0 ? "red" : "blue", n: i, odd: i % 2 === 1 }),
        )
      }
      const red = await pages((o) => store.query(pk, o), { filter: { status: "red" }, limit: 3 })
      expect(red).toHaveLength(7) // ceil(20 / 3) pages: limit counts items read, not items matched
      expect(red.every((page) => page.items.length <= 3)).toBe(true)
      expect(red.flatMap((page) => page.items.map((item) => item.sk))).toEqual(
        [0, 3, 6, 9, 12, 15, 18].map((i) => `i#${pad(i)}`),
      )
      const first = await store.query(pk, { filter: { n: 5 }, limit: 2 })
      expect(first.items).toEqual([])
      expect(first.cursor).toBeDefined()
      const redOdd = await queryAll((cursor) =>
        store.query(pk, { filter: { status: "red", odd: true }, limit: 4, cursor }),
      )
      expect(redOdd.map((item) => item.sk)).toEqual(["i#003", "i#009", "i#015"])
    })

    it("filters on a nested field by its dotted path", async () => {
      const pk = fresh("nested")
      for (let i = 0; i < 6; i++)
        await store.create(
          thing(pk, `i#${pad(i)}`, { spec: { swarm: i % 2 ? "a" : "b", name: "x" }, status: "ok" }),
        )
      const a = await queryAll((cursor) =>
        store.query(pk, { filter: { "spec.swarm": "a", status: "ok" }, limit: 2, cursor }),
      )
      expect(a.map((item) => item.sk)).toEqual(["i#001", "i#003", "i#005"])
    })

    it("refuses a write under an older fence, whatever its version", async () => {
      const pk = fresh("fence")
      const created = await store.create(thing(pk, "item", { n: 0 }))
      const newer = await store.update({ ...created, data: { n: 1 }, fence: 7 })
      expect(newer.fence).toBe(7)
      await expect(store.update({ ...newer, data: { n: 2 }, fence: 6 })).rejects.toBeInstanceOf(FencedError)
      expect((await store.get(created))?.data).toEqual({ n: 1 })
      const same = await store.update({ ...newer, data: { n: 3 }, fence: 7 })
      expect(same.data).toEqual({ n: 3 })
      await expect(store.update({ ...newer, data: { n: 4 }, fence: 8 })).rejects.toBeInstanceOf(
        VersionConflictError,
      )
    })

    it("keeps the token of the write that made each version, so a writer whose answer was lost knows its own write", async () => {
      const pk = fresh("write-id")
      const created = await store.create({ ...thing(pk, "item", { n: 0 }), writeId: "w-1" })
      expect((await store.get(created, { consistent: true }))?.writeId).toBe("w-1")
      const updated = await store.update({ ...created, data: { n: 1 }, writeId: "w-2" })
      expect(updated.writeId).toBe("w-2")
      expect((await store.get(created, { consistent: true }))?.writeId).toBe("w-2")
      // A write without one leaves none behind.
      await store.update({ ...updated, writeId: undefined })
      expect((await store.get(created, { consistent: true }))?.writeId).toBeUndefined()
    })

    it("pages past 1 MB: a 3 MB partition comes back in several pages, each item once, in order", async () => {
      const pk = fresh("big")
      const blob = "x".repeat(100_000)
      await store.createMany(Array.from({ length: 30 }, (_, i) => thing(pk, `b#${pad(i)}`, { i, blob })))
      const all = await pages((o) => store.query(pk, o))
      expect(all.filter((page) => page.items.length > 0).length).toBeGreaterThan(1)
      const items = all.flatMap((page) => page.items)
      expect(items.map((item) => item.sk)).toEqual(Array.from({ length: 30 }, (_, i) => `b#${pad(i)}`))
      expect(
        items.every(
          (item, i) =>
            (item.data as { i: number; blob: string }).blob === blob && (item.data as { i: number }).i === i,
        ),
      ).toBe(true)
    })

    it("createMany writes 60 items (indexed too); getMany returns them and skips missing keys", async () => {
      const pk = fresh("batch")
      const listPk = fresh("batch-list")
      const batch = Array.from({ length: 60 }, (_, i) =>
        thing(pk, `m#${pad(i)}`, { i }, { list: { pk: listPk, sk: `m#${pad(i)}` } }),
      )
      await store.createMany(batch)
      const keys = [
        ...batch.map(({ pk, sk }) => ({ pk, sk })),
        ...Array.from({ length: 5 }, (_, i) => ({ pk, sk: `missing#${i}` })),
      ]
      const got = await store.getMany<{ i: number }>(keys)
      expect(got).toHaveLength(60)
      expect(got.map((item) => item.sk).sort()).toEqual(batch.map((item) => item.sk))
      expect(got.every((item) => item.version === 1 && item.sk === `m#${pad(item.data.i)}`)).toBe(true)
      expect(await store.getMany([...keys.slice(0, 3), ...keys.slice(0, 3)])).toHaveLength(3)
      expect(await store.getMany([])).toEqual([])
      const listed = await queryAll((cursor) => store.queryIndex("list", listPk, { limit: 25, cursor }))
      expect(listed).toHaveLength(60)
    })

    it("createMany refuses duplicate keys before writing anything", async () => {
      const pk = fresh("batch-dup")
      const error = await store
        .createMany([thing(pk, "a", {}), thing(pk, "b", {}), thing(pk, "a", {})])
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(BackendError)
      expect((error as BackendError).retryable).toBe(false)
      expect(
        await store.getMany([
          { pk, sk: "a" },
          { pk, sk: "b" },
        ]),
      ).toEqual([])
    })

    it("delete with a wrong expected version throws and keeps the item; with the right one removes it", async () => {
      const key = { pk: fresh("delete"), sk: "item" }
      await store.create(thing(key.pk, key.sk, { n: 1 }))
      await expect(store.delete(key, 2)).rejects.toBeInstanceOf(VersionConflictError)
      expect(await read(key)).toMatchObject({ version: 1 })
      await store.delete(key, 1)
      expect(await read(key)).toBeUndefined()
      await expect(store.delete(key, 1)).rejects.toBeInstanceOf(VersionConflictError)
    })

    it("delete without a version is idempotent and removes index entries", async () => {
      const key = { pk: fresh("delete-idem"), sk: "item" }
      const activePk = fresh("delete-active")
      await store.create(thing(key.pk, key.sk, {}, { active: { pk: activePk, sk: "x" } }))
      await store.delete(key)
      await store.delete(key)
      await store.delete({ pk: fresh("never"), sk: "never" })
      expect(await read(key)).toBeUndefined()
      expect((await store.queryIndex("active", activePk)).items).toEqual([])
    })

    it("refuses a cursor from another partition, index, key range, or made up", async () => {
      const [a, b] = [fresh("cursor-a"), fresh("cursor-b")]
      const [activeA, activeB] = [fresh("cursor-active-a"), fresh("cursor-active-b")]
      for (const pk of [a, b]) {
        for (let i = 0; i < 5; i++) {
          const active = { pk: pk === a ? activeA : activeB, sk: `k#${i}` }
          await store.create(thing(pk, `k#${i}`, { i }, { active, list: active }))
        }
      }
      const fromA = (await store.query(a, { limit: 2 })).cursor!
      const fromActiveA = (await store.queryIndex("active", activeA, { limit: 2 })).cursor!
      expect((await store.query(a, { cursor: fromA })).items.map((item) => item.sk)).toEqual([
        "k#2",
        "k#3",
        "k#4",
      ])
      expect((await store.queryIndex("active", activeA, { cursor: fromActiveA })).items).toHaveLength(3)

      const forged = (key: object) => Buffer.from(JSON.stringify(key)).toString("base64url")
      const refused: [string, () => Promise<unknown>][] = [
        ["table cursor on another partition", () => store.query(b, { cursor: fromA })],
        [
          "index cursor on another index partition",
          () => store.queryIndex("active", activeB, { cursor: fromActiveA }),
        ],
        ["index cursor on another index", () => store.queryIndex("list", activeA, { cursor: fromActiveA })],
        ["table cursor on an index", () => store.queryIndex("active", activeA, { cursor: fromA })],
        ["index cursor on the table", () => store.query(a, { cursor: fromActiveA })],
        ["cursor outside the key range", () => store.query(a, { cursor: fromA, skPrefix: "z" })],
        [
          "forged cursor for another partition",
          () => store.query(a, { cursor: forged({ pk: b, sk: "k#1" }) }),
        ],
        [
          "forged cursor with extra keys",
          () => store.query(a, { cursor: forged({ pk: a, sk: "k#1", x: "y" }) }),
        ],
        ["forged non-string key", () => store.query(a, { cursor: forged({ pk: a, sk: 1 }) })],
        ["JSON array", () => store.query(a, { cursor: forged([a, "k#1"]) })],
        ["not base64url", () => store.query(a, { cursor: "not a cursor!" })],
        ["not JSON", () => store.query(a, { cursor: Buffer.from("{pk").toString("base64url") })],
        ["empty", () => store.query(a, { cursor: "" })],
      ]
      for (const [label, call] of refused) {
        await expect(call(), label).rejects.toBeInstanceOf(InvalidCursorError)
      }
    })

    it("round-trips ttl, and an update without ttl removes it", async () => {
      const key = { pk: fresh("ttl"), sk: "item" }
      const created = await store.create(thing(key.pk, key.sk, {}, { ttl: 1_900_000_000 }))
      expect((await read(key))?.ttl).toBe(1_900_000_000)
      const updated = await store.update({ ...created, ttl: 1_900_000_100 })
      expect((await read(key))?.ttl).toBe(1_900_000_100)
      await store.update({ ...updated, ttl: undefined })
      expect(await read(key)).not.toHaveProperty("ttl")
    })

    it("rejects skPrefix combined with skBetween", async () => {
      const pk = fresh("combined")
      await expect(store.query(pk, { skPrefix: "a", skBetween: ["a", "b"] })).rejects.toBeInstanceOf(
        BackendError,
      )
    })
  })
}
