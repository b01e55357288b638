/**
 * Writes whose answer was lost, settled by reading back. A conditional write can take effect and still
 * fail for its caller: the connection dropped after DynamoDB applied it, or the SDK's own retry of an
 * applied write met its own version and was refused as a conflict. Taken at its word, such a write is
 * done twice or, worse, done once with its follow-up (the event that records it) never written: the
 * retry finds nothing left to change. So every write carries a random `writeId`, and every failed
 * `update` or `create` is checked with one consistent read: when the stored item is the version this
 * write made (its `writeId`), the write succeeded and the caller carries on. (Comparing data instead
 * would take another writer's identical change for one's own, and record it twice.) Batch puts are unconditional and are simply
 * tried again. Reads and successful writes cost nothing more.
 */
import { randomToken } from "../util/ids"
import { FencedError, type Key, type NewItem, type StateStore, type StoredItem } from "./port"

/** Tries of a read-back, and of a batch put (each replaces the same items with the same data: safe to repeat). */
const Tries = 3

export function settledWrites(store: StateStore): StateStore {
  /** The stored item when this write (`writeId`) made version `version`, else undefined (or the read failed). */
  const landed = async <T>(
    key: Key,
    version: number,
    writeId: string,
  ): Promise<StoredItem<T> | undefined> => {
    for (let tries = 1; tries <= Tries; tries++) {
      const read = await store.get<T>(key, { consistent: true }).then(
        (stored) => ({ stored }),
        () => undefined,
      )
      if (read)
        return read.stored?.version === version && read.stored.writeId === writeId ? read.stored : undefined
    }
    return undefined
  }
  return {
    get: (key, options) => store.get(key, options),
    getMany: (keys) => store.getMany(keys),
    query: (pk, options) => store.query(pk, options),
    queryIndex: (index, pk, options) => store.queryIndex(index, pk, options),
    delete: (key, expectedVersion) => store.delete(key, expectedVersion),

    async update<T>(given: StoredItem<T>): Promise<StoredItem<T>> {
      const item = { ...given, writeId: randomToken(9) }
      try {
        return await store.update(item)
      } catch (error) {
        if (error instanceof FencedError) throw error
        const stored = await landed<T>(item, item.version + 1, item.writeId)
        if (stored) return stored
        throw error
      }
    },

    async create<T>(given: NewItem<T>): Promise<StoredItem<T>> {
      const item = { ...given, writeId: randomToken(9) }
      try {
        return await store.create(item)
      } catch (error) {
        // An item that existed before is the caller's business (an idempotent retry knows what to do),
        // unless this very write made it.
        const stored = await landed<T>(item, 1, item.writeId)
        if (stored) return stored
        throw error
      }
    },

    async createMany(items: NewItem[]): Promise<void> {
      for (let tries = 1; ; tries++) {
        try {
          return await store.createMany(items)
        } catch (error) {
          if (tries >= Tries) throw error
        }
      }
    },
  }
}
