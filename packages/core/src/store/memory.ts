/**
 * In-memory StateStore for tests and in-process runs. It keeps DynamoDB's semantics where callers
 * could come to depend on them: sort keys in UTF-8 byte order, `limit` counted before `filter`, a
 * cursor whenever a page stops early (even if nothing follows), pages cut near 1 MB, items over
 * 400 KB refused, index entries only while `active`/`list` is set, and a copy in and frozen data
 * out, so a caller can never change stored state by mutating what it passed or got back (changing a
 * result's data throws; its own fields are the caller's to change, as for a spread into an update).
 *
 * A durable store builds on it (`journal.ts`): it passes the items to start with, and is told of each
 * write's changes before they are applied, so it can record them first.
 */
import { BackendError } from "../util/errors"
import { compareUtf8, decodeCursor, encodeCursor } from "./cursor"
import {
  FencedError,
  type IndexName,
  ItemExistsError,
  type Key,
  type NewItem,
  type Page,
  type QueryOptions,
  type StateStore,
  type StoredItem,
  VersionConflictError,
} from "./port"

/** DynamoDB's item size limit and query page size, in bytes. */
const MAX_ITEM_BYTES = 400 * 1024
const PAGE_BYTES = 1024 * 1024

/** Attribute names of each index, as the DynamoDB adapter stores them (so cursors look the same). */
const indexAttrs = {
  active: { pk: "gsi1pk", sk: "gsi1sk" },
  list: { pk: "gsi2pk", sk: "gsi2sk" },
} as const satisfies Record<IndexName, { pk: string; sk: string }>

/** One change a write makes: an item stored (created or replaced) or removed. */
export type Change = { put: StoredItem } | { delete: Key }

export interface MemoryStoreOptions {
  /** Items the store starts with, as stored (versions kept). */
  initial?: Iterable<StoredItem>
  /**
   * Told of each write's changes before any is applied (a delete of an absent item tells nothing).
   * When it throws, nothing is applied and the write fails with its error.
   */
  beforeWrite?: (changes: Change[]) => void
}

export interface MemoryStore extends StateStore {
  /** Every stored item, as stored: read them, never change them. */
  items(): IterableIterator<StoredItem>
}

export function MemoryStore(options: MemoryStoreOptions = {}): MemoryStore {
  const items = new Map<string, StoredItem>()
  /** Table pk → ids of the items in that partition, so a query reads only its partition. */
  const partitions = new Map<string, Set<string>>()
  /** Per index, index pk → ids of the items in that index partition. */
  const indexes: Record<IndexName, Map<string, Set<string>>> = { active: new Map(), list: new Map() }
  /**
   * Rows of a partition or index partition in sort order, by `table|pk` or `<index>|pk`, once a query
   * read it; writes then keep them in order (a binary search and a splice), so no query sorts twice.
   */
  const sorted = new Map<string, Row[]>()

  /** The partitions `item` is in, each with the row it has there (made only when that one is kept). */
  function* placesOf(item: StoredItem): Generator<[scope: string, row: () => Row]> {
    yield [`table|${item.pk}`, () => tableRow(item)]
    if (item.active) yield [`active|${item.active.pk}`, () => indexRow("active", item)]
    if (item.list) yield [`list|${item.list.pk}`, () => indexRow("list", item)]
  }

  /** Take `item`'s rows out of the sorted partitions kept. */
  function unlink(item: StoredItem): void {
    for (const [scope, row] of placesOf(item)) {
      const rows = sorted.get(scope)
      if (!rows) continue
      const at = lowerBound(rows, row().rank)
      if (rows[at]?.item === item) rows.splice(at, 1)
      else sorted.delete(scope)
    }
  }

  /** Put `item`'s rows into the sorted partitions kept, in order. */
  function link(item: StoredItem): void {
    for (const [scope, row] of placesOf(item)) {
      const rows = sorted.get(scope)
      if (!rows) continue
      const made = row()
      rows.splice(lowerBound(rows, made.rank), 0, made)
    }
  }

  /** The rows of a partition in sort order, sorted now if no query read it before. */
  function rowsOf(scope: string, ids: Iterable<string>, row: (item: StoredItem) => Row): Row[] {
    let rows = sorted.get(scope)
    if (!rows) {
      rows = [...ids].map((id) => row(items.get(id)!)).sort((a, b) => compareRanks(a.rank, b.rank))
      sorted.set(scope, rows)
    }
    return rows
  }

  function put(item: StoredItem): void {
    const id = keyId(item)
    const old = items.get(id)
    if (old) unlink(old)
    link(item)
    for (const name of ["active", "list"] as const) {
      const before = old?.[name]?.pk
      if (before !== undefined) indexes[name].get(before)?.delete(id)
      const after = item[name]?.pk
      if (after !== undefined) {
        const ids = indexes[name].get(after) ?? new Set()
        indexes[name].set(after, ids.add(id))
      }
    }
    if (!old) partitions.set(item.pk, (partitions.get(item.pk) ?? new Set()).add(id))
    items.set(id, item)
  }

  function remove(key: Key): void {
    const id = keyId(key)
    const old = items.get(id)
    if (!old) return
    unlink(old)
    for (const name of ["active", "list"] as const) {
      if (old[name]) indexes[name].get(old[name].pk)?.delete(id)
    }
    partitions.get(key.pk)?.delete(id)
    items.delete(id)
  }

  const record = options.beforeWrite ?? (() => undefined)
  // Items to start with (a journal's replay) are held as written ones are: their data frozen.
  for (const item of options.initial ?? []) put({ ...item, data: frozen(item.data) })

  return {
    items: () => items.values(),

    async get<T>(key: Key) {
      const item = items.get(keyId(key))
      return item && (out(item) as StoredItem<T>)
    },

    async create<T>(item: NewItem<T>) {
      const stored = normalize({ ...item, version: 1 })
      if (items.has(keyId(stored))) throw new ItemExistsError({ pk: stored.pk, sk: stored.sk })
      record([{ put: stored }])
      put(stored)
      return out(stored) as StoredItem<T>
    },

    async createMany(batch: NewItem[]) {
      // Validate everything first: DynamoDB refuses a batch with duplicate keys, and writing half
      // of a bad input would leave the caller unsure what exists.
      const stored = batch.map((item) => normalize({ ...item, version: 1 }))
      const seen = new Set<string>()
      for (const item of stored) {
        if (seen.has(keyId(item))) {
          throw new BackendError(`createMany: duplicate key ${item.pk} / ${item.sk} in one call`, false)
        }
        seen.add(keyId(item))
      }
      record(stored.map((item) => ({ put: item })))
      for (const item of stored) put(item)
    },

    async update<T>(item: StoredItem<T>) {
      const current = items.get(keyId(item))
      if (!current || current.version !== item.version)
        throw new VersionConflictError({ pk: item.pk, sk: item.sk })
      if (item.fence !== undefined && current.fence !== undefined && current.fence > item.fence)
        throw new FencedError({ pk: item.pk, sk: item.sk }, item.fence)
      const stored = normalize({ ...item, version: item.version + 1 })
      record([{ put: stored }])
      put(stored)
      return out(stored) as StoredItem<T>
    },

    async delete(key: Key, expectedVersion?: number) {
      const current = items.get(keyId(key))
      if (expectedVersion !== undefined && current?.version !== expectedVersion) {
        throw new VersionConflictError({ pk: key.pk, sk: key.sk })
      }
      if (!current) return
      record([{ delete: { pk: key.pk, sk: key.sk } }])
      remove(key)
    },

    async getMany<T>(keys: Key[]) {
      const ids = new Set(keys.map(keyId))
      const found: StoredItem<T>[] = []
      for (const id of ids) {
        const item = items.get(id)
        if (item) found.push(out(item) as StoredItem<T>)
      }
      return found
    },

    async query<T>(pk: string, options: QueryOptions = {}) {
      const rows = rowsOf(`table|${pk}`, partitions.get(pk) ?? [], tableRow)
      return page<T>(rows, pk, options, { pk: "pk", sk: "sk" }, ["pk", "sk"])
    },

    async queryIndex<T>(index: IndexName, pk: string, options: QueryOptions = {}) {
      const attrs = indexAttrs[index]
      const rows = rowsOf(`${index}|${pk}`, indexes[index].get(pk) ?? [], (item) => indexRow(index, item))
      return page<T>(rows, pk, { ...options, consistent: false }, attrs, ["pk", "sk", attrs.pk, attrs.sk])
    },
  }
}

function tableRow(item: StoredItem): Row {
  return { item, rank: [item.sk, item.pk, item.sk], position: { pk: item.pk, sk: item.sk } }
}

function indexRow(index: IndexName, item: StoredItem): Row {
  const attrs = indexAttrs[index]
  const at = item[index]!
  return {
    item,
    rank: [at.sk, item.pk, item.sk],
    position: { pk: item.pk, sk: item.sk, [attrs.pk]: at.pk, [attrs.sk]: at.sk },
  }
}

/** The first of `rows` (in sort order) ranked at or after `rank`. */
function lowerBound(rows: Row[], rank: Rank): number {
  let lo = 0
  let hi = rows.length
  while (lo < hi) {
    const mid = (lo + hi) >> 1
    if (compareRanks(rows[mid]!.rank, rank) < 0) lo = mid + 1
    else hi = mid
  }
  return lo
}

interface Row {
  item: StoredItem
  /**
   * Where the row sorts: by its sort key, then (index entries with equal sort keys) by table key, so
   * pages are stable.
   */
  rank: Rank
  /** The key set a cursor records, named as DynamoDB's LastEvaluatedKey names it. */
  position: Record<string, string>
}

/**
 * One page of a partition whose rows are in sort order: key condition, direction, cursor, limit and
 * 1 MB cut, then filter.
 */
function page<T>(
  rows: Row[],
  pk: string,
  options: QueryOptions,
  attrs: { pk: string; sk: string },
  cursorKeys: string[],
): Page<T> {
  const { skPrefix, skBetween, limit, filter, reverse } = options
  if (skPrefix && skBetween) throw new BackendError("query: skPrefix and skBetween cannot be combined", false)
  if (skBetween && compareUtf8(skBetween[0], skBetween[1]) > 0) {
    throw new BackendError(
      "query: skBetween needs from <= to (DynamoDB rejects BETWEEN with bounds reversed)",
      false,
    )
  }
  if (limit !== undefined && !(Number.isInteger(limit) && limit >= 1)) {
    throw new BackendError(`query: limit must be a positive integer, got ${limit}`, false)
  }
  const inRange = (sk: string) =>
    skPrefix
      ? sk.startsWith(skPrefix)
      : skBetween
        ? compareUtf8(sk, skBetween[0]) >= 0 && compareUtf8(sk, skBetween[1]) <= 0
        : true

  // The first row to read: the first (last, in reverse) of all, or the first past the cursor.
  const step = reverse ? -1 : 1
  let at = reverse ? rows.length - 1 : 0
  if (options.cursor !== undefined) {
    const start = decodeCursor(options.cursor, cursorKeys, attrs, pk, inRange)
    const from: Rank = [start[attrs.sk]!, start.pk!, start.sk!]
    // Rows ranked after `from`: those from `after` on. In reverse, those before it.
    let lo = 0
    let hi = rows.length
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (compareRanks(rows[mid]!.rank, from) > 0) hi = mid
      else lo = mid + 1
    }
    at = reverse ? lo - 1 - (lo > 0 && compareRanks(rows[lo - 1]!.rank, from) === 0 ? 1 : 0) : lo
  }

  // Evaluate like DynamoDB: stop at `limit` items or once 1 MB has been read, then filter. The rows
  // in range are contiguous (prefixes and ranges are, in byte order): stop at the first past them.
  const evaluated: Row[] = []
  let bytes = 0
  let entered = false
  for (; at >= 0 && at < rows.length; at += step) {
    const row = rows[at]!
    if (!inRange(row.rank[0])) {
      if (entered) break
      continue
    }
    entered = true
    if (evaluated.length === limit || bytes >= PAGE_BYTES) break
    evaluated.push(row)
    bytes += itemBytes(row.item)
  }
  const stoppedEarly = evaluated.length === limit || bytes >= PAGE_BYTES
  const last = evaluated.at(-1)
  const matches = evaluated.filter((row) => matchesFilter(row.item, filter))
  return {
    items: matches.map((row) => out(row.item) as StoredItem<T>),
    ...(stoppedEarly && last ? { cursor: encodeCursor(last.position) } : {}),
  }
}

type Rank = [sortKey: string, pk: string, sk: string]

function compareRanks(a: Rank, b: Rank): number {
  return compareUtf8(a[0], b[0]) || compareUtf8(a[1], b[1]) || compareUtf8(a[2], b[2])
}

function matchesFilter(item: StoredItem, filter: QueryOptions["filter"]): boolean {
  if (!filter) return true
  const data = item.data
  if (typeof data !== "object" || data === null || Array.isArray(data))
    return Object.keys(filter).length === 0
  const at = (path: string): unknown =>
    path
      .split(".")
      .reduce<unknown>(
        (v, part) => (v && typeof v === "object" ? (v as Record<string, unknown>)[part] : undefined),
        data,
      )
  return Object.entries(filter).every(([field, value]) => at(field) === value)
}

function keyId(key: Key): string {
  return JSON.stringify([key.pk, key.sk])
}

/** Keep only the stored fields, copied, and refuse what DynamoDB would refuse. */
function normalize(item: StoredItem): StoredItem {
  const out: StoredItem = {
    pk: item.pk,
    sk: item.sk,
    type: item.type,
    version: item.version,
    data: frozen(copy(item.data)),
  }
  if (item.active) out.active = { pk: item.active.pk, sk: item.active.sk }
  if (item.list) out.list = { pk: item.list.pk, sk: item.list.sk }
  if (item.ttl !== undefined) out.ttl = item.ttl
  if (item.fence !== undefined) out.fence = item.fence
  if (item.writeId !== undefined) out.writeId = item.writeId
  const keyParts = [out.pk, out.sk, out.active?.pk, out.active?.sk, out.list?.pk, out.list?.sk]
  if (keyParts.some((part) => part === "")) {
    throw new BackendError(
      `item ${out.pk} / ${out.sk}: key and index key attributes cannot be empty strings`,
      false,
    )
  }
  const bytes = itemBytes(out)
  if (bytes > MAX_ITEM_BYTES) {
    throw new BackendError(
      `item ${out.pk} / ${out.sk} is ${bytes} bytes; the limit is ${MAX_ITEM_BYTES}`,
      false,
    )
  }
  return out
}

/**
 * What a read hands out: the stored item's own fields in a new object, its `data` the stored one, which
 * is frozen (deep) when stored, so no caller can change what the store holds through it, and reads copy
 * nothing (a pass reads every active item: copying each was the local API's largest cost).
 */
function out(item: StoredItem): StoredItem {
  const o: StoredItem = { ...item }
  if (item.active) o.active = { ...item.active }
  if (item.list) o.list = { ...item.list }
  return o
}

/** Freeze plain data all the way down (what `copy` made: plain objects and arrays). */
function frozen<V>(value: V): V {
  if (value === null || typeof value !== "object" || Object.isFrozen(value)) return value
  for (const v of Object.values(value as object)) frozen(v)
  return Object.freeze(value)
}

/**
 * A copy that drops `undefined` from objects and arrays, as the DynamoDB adapter's marshalling
 * (`removeUndefinedValues`) does; anything that is not plain data is structured-cloned.
 */
function copy<V>(value: V): V {
  if (value === null || typeof value !== "object") return value
  // Loops rather than entries/map/filter: every read copies what it returns, so this is hot.
  if (Array.isArray(value)) {
    const out: unknown[] = []
    for (const v of value) if (v !== undefined) out.push(copy(v))
    return out as V
  }
  const proto = Object.getPrototypeOf(value)
  if (proto !== Object.prototype && proto !== null) return structuredClone(value)
  const out: Record<string, unknown> = {}
  for (const k of Object.keys(value)) {
    const v = (value as Record<string, unknown>)[k]
    if (v !== undefined) out[k] = copy(v)
  }
  return out as V
}

/** Sizes of stored items: each is measured once (stored items are never changed in place). */
const sizes = new WeakMap<StoredItem, number>()

/** Approximately DynamoDB's item size: attribute names plus values, strings in UTF-8 bytes. */
function itemBytes(item: StoredItem): number {
  const known = sizes.get(item)
  if (known !== undefined) return known
  const bytes = measure(item)
  sizes.set(item, bytes)
  return bytes
}

function measure(item: StoredItem): number {
  let bytes = 0
  const attrs: Record<string, unknown> = {
    pk: item.pk,
    sk: item.sk,
    type: item.type,
    version: item.version,
    data: item.data,
    gsi1pk: item.active?.pk,
    gsi1sk: item.active?.sk,
    gsi2pk: item.list?.pk,
    gsi2sk: item.list?.sk,
    ttl: item.ttl,
  }
  for (const [name, value] of Object.entries(attrs)) {
    if (value !== undefined) bytes += name.length + valueBytes(value)
  }
  return bytes
}

function valueBytes(value: unknown): number {
  if (typeof value === "string") return Buffer.byteLength(value, "utf8")
  if (typeof value === "number") return 1 + Math.ceil(String(Math.abs(value)).replace(/\D/g, "").length / 2)
  if (Array.isArray(value)) return 3 + value.reduce((sum: number, v) => sum + 1 + valueBytes(v), 0)
  if (value !== null && typeof value === "object") {
    return (
      3 +
      Object.entries(value).reduce((sum, [k, v]) => sum + 1 + Buffer.byteLength(k, "utf8") + valueBytes(v), 0)
    )
  }
  return 1
}
