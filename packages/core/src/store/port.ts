/**
 * The StateStore port: a single-table item store with single-item conditional writes (no
 * transactions), a `version` on every item, a sparse "active work" index and a listing index.
 * Adapters: `MemoryStore()` (tests, in-process) and `DynamoStore()` (DynamoDB, DynamoDB Local,
 * dynalite). One contract suite (`store/contract.ts`) runs against each.
 */

export interface Key {
  pk: string
  sk: string
}

/** An index entry: partition and sort key of the item in that index. */
export interface IndexKey {
  pk: string
  sk: string
}

/** An item as stored. Domain data lives under `data`; the rest is bookkeeping. */
export interface StoredItem<T = unknown> extends Key {
  /** Item type tag, e.g. `job`, `task`, `swarm`. */
  type: string
  /** 1 after create; each successful update adds 1. Lost races are detected with it, never overwritten. */
  version: number
  /** The domain object. */
  data: T
  /** Sparse "active work" index (`gsi1`): present only while the item is non-terminal. */
  active?: IndexKey
  /** Listing index (`gsi2`): by project and type. */
  list?: IndexKey
  /** Epoch seconds after which the item may be removed (idempotency records, old events). */
  ttl?: number
  /**
   * Fencing token of the lease holder that last wrote the item. An update that carries a fence is
   * refused (`FencedError`) when the stored fence is newer: its writer's lease was taken over.
   */
  fence?: number
  /**
   * A token of the write that made this version, when its writer gave one: a writer whose answer was
   * lost tells its own write from another's by it (`settled.ts`).
   */
  writeId?: string
}

/** What `create`/`createMany` take: an item without a version (it becomes 1). */
export type NewItem<T = unknown> = Omit<StoredItem<T>, "version">

export interface Page<T> {
  items: StoredItem<T>[]
  /** Opaque; pass back as `cursor` to get the next page. Absent on the last page. */
  cursor?: string
}

export interface QueryOptions {
  /** Only sort keys that start with this. */
  skPrefix?: string
  /** Only sort keys in [from, to] (inclusive). Not combined with `skPrefix`. */
  skBetween?: [string, string]
  /** Items per call at most (before `filter` is applied, as in DynamoDB). */
  limit?: number
  cursor?: string
  /** Descending sort-key order. */
  reverse?: boolean
  /** Equality filter on fields of `data` (dotted paths reach nested maps: `spec.swarm`), applied after reading. */
  filter?: Record<string, string | number | boolean>
  /** Strongly consistent read (base table only). */
  consistent?: boolean
}

export type IndexName = "active" | "list"

export interface StateStore {
  /** The item, or undefined when absent. */
  get<T>(key: Key, options?: { consistent?: boolean }): Promise<StoredItem<T> | undefined>
  /** Create with version 1. Throws `ItemExistsError` when the key exists; writes nothing then. */
  create<T>(item: NewItem<T>): Promise<StoredItem<T>>
  /**
   * Write many items whose keys the caller knows are fresh (e.g. the tasks of a job whose own item was
   * just created conditionally), 25 per batch call, retrying unprocessed items. Unconditional: an
   * existing item with the same key is replaced (log tails rely on it: one write, no read).
   */
  createMany(items: NewItem[]): Promise<void>
  /**
   * Replace the item if the stored version equals `item.version`; returns it with version + 1.
   * Throws `VersionConflictError` when the version differs or the item is gone, and `FencedError` when
   * `item.fence` is set and older than the stored one.
   */
  update<T>(item: StoredItem<T>): Promise<StoredItem<T>>
  /** Delete. With `expectedVersion`, only that version (else `VersionConflictError`); without, idempotent. */
  delete(key: Key, expectedVersion?: number): Promise<void>
  /** Many items by key (100 per batch call); missing keys are skipped. Order is not kept. */
  getMany<T>(keys: Key[]): Promise<StoredItem<T>[]>
  /** One page of the items of a partition, in sort-key order. */
  query<T>(pk: string, options?: QueryOptions): Promise<Page<T>>
  /** One page of an index partition. Index reads are eventually consistent. */
  queryIndex<T>(index: IndexName, pk: string, options?: QueryOptions): Promise<Page<T>>
}

/** The key exists already (conditional create refused). */
export class ItemExistsError extends Error {
  constructor(readonly key: Key) {
    super(`item ${key.pk} / ${key.sk} already exists`)
    this.name = "ItemExistsError"
  }
}

/** The stored version is not the expected one, or the item is gone. Re-read and retry. */
export class VersionConflictError extends Error {
  constructor(readonly key: Key) {
    super(`item ${key.pk} / ${key.sk} changed or is gone`)
    this.name = "VersionConflictError"
  }
}

/** The write carried an older fencing token than the item's: the writer lost its lease. Do not retry. */
export class FencedError extends Error {
  constructor(
    readonly key: Key,
    readonly fence: number,
  ) {
    super(`item ${key.pk} / ${key.sk} was written under a newer lease than fence ${fence}`)
    this.name = "FencedError"
  }
}

/** The cursor given is not one this store issued for this query. */
export class InvalidCursorError extends Error {
  constructor() {
    super("cursor is not valid for this listing")
    this.name = "InvalidCursorError"
  }
}

/**
 * Read-modify-write with optimistic concurrency: read fresh, apply `change`, write with the read
 * version; on a lost race, repeat from a fresh read. `change` returns undefined to leave the item as it
 * is (nothing written). Returns the stored result, or undefined when the item is absent.
 */
export async function mutate<T>(
  store: StateStore,
  key: Key,
  change: (item: StoredItem<T>) => StoredItem<T> | undefined | Promise<StoredItem<T> | undefined>,
  options: { maxAttempts?: number } = {},
): Promise<StoredItem<T> | undefined> {
  const maxAttempts = options.maxAttempts ?? 50
  for (let attempt = 1; ; attempt++) {
    const current = await store.get<T>(key, { consistent: true })
    if (!current) return undefined
    const next = await change(current)
    if (!next) return current
    try {
      return await store.update({ ...next, version: current.version })
    } catch (error) {
      if (!(error instanceof VersionConflictError) || attempt >= maxAttempts) throw error
    }
  }
}

/** Every item of a partition or index partition, following cursors. For bounded partitions only. */
export async function queryAll<T>(
  page: (cursor: string | undefined) => Promise<Page<T>>,
): Promise<StoredItem<T>[]> {
  const out: StoredItem<T>[] = []
  let cursor: string | undefined
  do {
    const result = await page(cursor)
    out.push(...result.items)
    cursor = result.cursor
  } while (cursor)
  return out
}
