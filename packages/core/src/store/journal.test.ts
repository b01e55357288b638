import { appendFileSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { BackendError } from "../util/errors"
import { storeContract } from "./contract"
import { JournalStore } from "./journal"
import { VersionConflictError } from "./port"

const folder = mkdtempSync(join(tmpdir(), "journal-store-"))
afterAll(() => rmSync(folder, { recursive: true, force: true }))
let files = 0
const freshPath = () => join(folder, `journal-${++files}.jsonl`)

storeContract("journal", async () => {
  // Small compaction threshold: the contract's writes also run through compactions.
  const store = JournalStore({ path: freshPath(), compactMinBytes: 64 * 1024 })
  return { store, cleanup: async () => store.close() }
})

const task = (i: number, extra: object = {}) => ({
  pk: "P#1",
  sk: `T#${String(i).padStart(3, "0")}`,
  type: "task",
  data: { i, note: "x".repeat(50) },
  active: { pk: "A#1", sk: String(i).padStart(3, "0") },
  ...extra,
})

describe("JournalStore", () => {
  it("keeps every acknowledged write across a reopen: creates, updates, deletes, versions, indexes", async () => {
    const path = freshPath()
    const first = JournalStore({ path })
    await first.createMany([task(1), task(2), task(3)])
    const two = (await first.get({ pk: "P#1", sk: "T#002" }))!
    await first.update({ ...two, data: { i: 2, note: "changed" }, active: undefined, fence: 4 })
    await first.delete({ pk: "P#1", sk: "T#003" })
    await first.create({
      pk: "P#2",
      sk: "S",
      type: "swarm",
      data: { name: "llm" },
      list: { pk: "L", sk: "llm" },
    })
    first.close()

    const second = JournalStore({ path })
    expect((await second.query("P#1")).items.map((item) => [item.sk, item.version, item.data])).toEqual([
      ["T#001", 1, { i: 1, note: "x".repeat(50) }],
      ["T#002", 2, { i: 2, note: "changed" }],
    ])
    expect((await second.get({ pk: "P#1", sk: "T#002" }))?.fence).toBe(4)
    expect((await second.queryIndex("active", "A#1")).items.map((item) => item.sk)).toEqual(["T#001"])
    expect((await second.queryIndex("list", "L")).items.map((item) => item.data)).toEqual([{ name: "llm" }])
    // What is replayed is held as written items are: a read's data cannot change what is stored.
    const replayed = (await second.get<{ i: number; note: string }>({ pk: "P#1", sk: "T#001" }))!
    expect(() => {
      replayed.data.note = "mutated"
    }).toThrow(TypeError)
    expect((await second.get({ pk: "P#1", sk: "T#001" }))!.data).toEqual({ i: 1, note: "x".repeat(50) })
    // The versions replayed are the ones conditional writes check.
    await expect(
      second.update({ ...(await second.get({ pk: "P#1", sk: "T#002" }))!, version: 1 }),
    ).rejects.toThrow(VersionConflictError)
    second.close()
  })

  it("writes nothing for a refused write", async () => {
    const path = freshPath()
    const store = JournalStore({ path })
    await store.create(task(1))
    const size = statSync(path).size
    await expect(store.create(task(1))).rejects.toThrow()
    await expect(
      store.update({ ...(await store.get({ pk: "P#1", sk: "T#001" }))!, version: 7 }),
    ).rejects.toThrow()
    await store.delete({ pk: "P#1", sk: "T#999" })
    expect(statSync(path).size).toBe(size)
    store.close()
  })

  it("drops a torn last line (a crash mid-append) and appends after what was whole", async () => {
    const path = freshPath()
    const first = JournalStore({ path })
    await first.createMany([task(1), task(2)])
    first.close()
    const whole = readFileSync(path, "utf8")
    const torn = `{"put":${JSON.stringify({ ...task(3), version: 1 })}}\n`
    appendFileSync(path, torn.slice(0, torn.length / 2))

    const second = JournalStore({ path })
    expect((await second.query("P#1")).items.map((item) => item.sk)).toEqual(["T#001", "T#002"])
    expect(readFileSync(path, "utf8")).toBe(whole)
    await second.create(task(4))
    second.close()

    const third = JournalStore({ path })
    expect((await third.query("P#1")).items.map((item) => item.sk)).toEqual(["T#001", "T#002", "T#004"])
    third.close()
  })

  it("refuses to open a journal damaged before its last line, naming the line", () => {
    const path = freshPath()
    writeFileSync(
      path,
      `{"put":${JSON.stringify({ ...task(1), version: 1 })}}\nnot json\n{"delete":{"pk":"P#1","sk":"T#001"}}\n`,
    )
    expect(() => JournalStore({ path })).toThrow(/damaged at line 2/)
    expect(() => JournalStore({ path })).toThrow(BackendError)
  })

  it("compacts a journal grown past the live data to exactly the live items, and keeps working", async () => {
    const path = freshPath()
    const store = JournalStore({ path, compactMinBytes: 8 * 1024, compactRatio: 2 })
    await store.createMany(Array.from({ length: 20 }, (_, i) => task(i)))
    // Rewrite the same items over and over: the journal grows, the live data does not.
    for (let round = 0; round < 10; round++)
      for (let i = 0; i < 20; i++) {
        const item = (await store.get<{ i: number }>({ pk: "P#1", sk: task(i).sk }))!
        await store.update({ ...item, data: { ...item.data, round } })
      }
    for (let i = 10; i < 20; i++) await store.delete({ pk: "P#1", sk: task(i).sk })
    store.compact()

    const lines = readFileSync(path, "utf8")
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l))
    expect(lines.map((l) => [l.put.sk, l.put.version, l.put.data.round])).toEqual(
      Array.from({ length: 10 }, (_, i) => [task(i).sk, 11, 9]),
    )
    expect(store.sizes()).toEqual({ journalBytes: statSync(path).size, liveBytes: statSync(path).size })
    await store.create(task(50))
    store.close()

    const reopened = JournalStore({ path })
    expect((await reopened.query("P#1")).items.map((item) => item.sk)).toEqual([
      ...Array.from({ length: 10 }, (_, i) => task(i).sk),
      task(50).sk,
    ])
    reopened.close()
  })

  it("compacts on its own once the journal passes the threshold and the ratio", async () => {
    const path = freshPath()
    const store = JournalStore({ path, compactMinBytes: 8 * 1024, compactRatio: 2 })
    await store.create(task(1))
    let largest = 0
    for (let round = 0; round < 200; round++) {
      const item = (await store.get({ pk: "P#1", sk: task(1).sk }))!
      await store.update({ ...item, data: { round } })
      largest = Math.max(largest, statSync(path).size)
    }
    // 200 updates of ~150 bytes would be ~30 KB uncompacted.
    expect(largest).toBeLessThan(8 * 1024 + 1024)
    expect(readFileSync(path, "utf8").trimEnd().split("\n").length).toBeLessThan(70)
    store.close()
    const reopened = JournalStore({ path })
    expect((await reopened.get({ pk: "P#1", sk: task(1).sk }))?.data).toEqual({ round: 199 })
    reopened.close()
  })

  it("refuses writes once closed", async () => {
    const store = JournalStore({ path: freshPath() })
    store.close()
    await expect(store.create(task(1))).rejects.toThrow(/closed/)
    expect(await store.get({ pk: "P#1", sk: task(1).sk })).toBeUndefined()
  })
})
