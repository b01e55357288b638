import { describe, expect, test } from "vitest"
import { MemoryStore } from "./memory"
import { type StateStore, type StoredItem, VersionConflictError } from "./port"
import { settledWrites } from "./settled"

/** A store whose next `n` writes take effect and then fail, as a write whose answer was lost does. */
function losingAnswers(n: number): StateStore & { lose(k: number): void } {
  const inner = MemoryStore()
  let left = n
  const lost = async <T>(write: () => Promise<T>): Promise<T> => {
    const result = await write()
    if (left-- > 0) throw new Error("socket hang up")
    return result
  }
  return {
    ...inner,
    lose: (k: number) => {
      left = k
    },
    update: (item) => lost(() => inner.update(item)),
    create: (item) => lost(() => inner.create(item)),
  }
}

const item = { pk: "p", sk: "s", type: "thing", data: { n: 0 } }

describe("a write whose answer was lost", () => {
  test("an update or create that took effect is known for its own by its writeId, and succeeds", async () => {
    const raw = losingAnswers(1)
    const store = settledWrites(raw)
    const created = await store.create(item)
    expect(created).toMatchObject({ version: 1, data: { n: 0 } })
    raw.lose(1)
    const updated = await store.update({ ...created, data: { n: 1 } })
    expect(updated).toMatchObject({ version: 2, data: { n: 1 } })
  })

  test("another writer's change, even to the same data, is still a lost race", async () => {
    const raw = MemoryStore()
    const store = settledWrites(raw)
    const created = await store.create(item)
    // Someone else writes the very change first; our write of it must not pass for theirs.
    await raw.update({ ...created, data: { n: 1 }, writeId: "theirs" } as StoredItem)
    await expect(store.update({ ...created, data: { n: 1 } })).rejects.toBeInstanceOf(VersionConflictError)
  })

  test("a write that did not take effect fails as it did", async () => {
    const raw = MemoryStore()
    const failing: StateStore = { ...raw, update: async () => Promise.reject(new Error("throttled")) }
    const store = settledWrites(failing)
    const created = await store.create(item)
    await expect(store.update({ ...created, data: { n: 1 } })).rejects.toThrow("throttled")
    expect((await raw.get(created))?.data).toEqual({ n: 0 })
  })
})
