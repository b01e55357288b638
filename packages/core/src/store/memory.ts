/**
 * In-memory StateStore for tests and in-process runs. It keeps DynamoDB's semantics where callers
 * could come to depend on them: sort keys in UTF-8 byte order, `limit` counted before `filter`, a
 * cursor whenever a page stops early (even if nothing follows), pages cut near 1 MB, items over
 * 400 KB refused, index entries only while `active`/`list` is set, and copies in and out so a
 * caller can never change stored state by mutating what it passed or got back.
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

export function MemoryStore(): StateStore {
  const items = new Map<string, StoredItem>()
  /** Table pk → ids of the items in that partition, so a query reads only its partition. */
  const partitions = new Map<string, Set<string>>()
  /** Per index, index pk → ids of the items in that index partition. */
  const indexes: Record<IndexName, Map<string, Set<string>>> = { active: new Map(), list: new Map() }

  function put(item: StoredItem): void {
    const id = keyId(item)
    const old = items.get(id)
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
    for (const name of ["active", "list"] as const) {
      if (old[name]) indexes[name].get(old[name].pk)?.delete(id)
    }
    partitions.get(key.pk)?.delete(id)
    items.delete(id)
  }

  return {
    async get<T>(key: Key) {
      const item = items.get(keyId(key))
      return item && (copy(item) as StoredItem<T>)
    },

    async create<T>(item: NewItem<T>) {
      const stored = normalize({ ...item, version: 1 })
      if (items.has(keyId(stored))) throw new ItemExistsError({ pk: stored.pk, sk: stored.sk })
      put(stored)
      return copy(stored) as StoredItem<T>
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
      for (const item of stored) put(item)
    },

    async update<T>(item: StoredItem<T>) {
      const current = items.get(keyId(item))
      if (!current || current.version !== item.version)
        throw new VersionConflictError({ pk: item.pk, sk: item.sk })
      if (item.fence !== undefined && current.fence !== undefined && current.fence > item.fence)
        throw new FencedError({ pk: item.pk, sk: item.sk }, item.fence)
      const stored = normalize({ ...item, version: item.version + 1 })
      put(stored)
      return copy(stored) as StoredItem<T>
    },

    async delete(key: Key, expectedVersion?: number) {
      const current = items.get(keyId(key))
      if (expectedVersion !== undefined && current?.version !== expectedVersion) {
        throw new VersionConflictError({ pk: key.pk, sk: key.sk })
      }
      remove(key)
    },

    async getMany<T>(keys: Key[]) {
      const ids = new Set(keys.map(keyId))
      const out: StoredItem<T>[] = []
      for (const id of ids) {
        const item = items.get(id)
        if (item) out.push(copy(item) as StoredItem<T>)
      }
      return out
    },

    async query<T>(pk: string, options: QueryOptions = {}) {
      const rows = [...(partitions.get(pk) ?? [])].map((id) => {
        const item = items.get(id)!
        return { item, sortKey: item.sk, position: { pk: item.pk, sk: item.sk } }
      })
      return page<T>(rows, pk, options, { pk: "pk", sk: "sk" }, ["pk", "sk"])
    },

    async queryIndex<T>(index: IndexName, pk: string, options: QueryOptions = {}) {
      const attrs = indexAttrs[index]
      const ids = indexes[index].get(pk) ?? new Set<string>()
      const rows = [...ids].map((id) => {
        const item = items.get(id)!
        const at = item[index]!
        return {
          item,
          sortKey: at.sk,
          position: { pk: item.pk, sk: item.sk, [attrs.pk]: at.pk, [attrs.sk]: at.sk },
        }
      })
      return page<T>(rows, pk, { ...options, consistent: false }, attrs, ["pk", "sk", attrs.pk, attrs.sk])
    },
  }
}

interface Row {
  item: StoredItem
  sortKey: string
  /** The key set a cursor records, named as DynamoDB's LastEvaluatedKey names it. */
  position: Record<string, string>
}

/** One page of a partition: order, key condition, cursor, limit and 1 MB cut, then filter. */
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

  // Index entries with equal sort keys are ordered by table key, so pages are stable.
  const rank = (row: Row): Rank => [row.sortKey, row.item.pk, row.item.sk]
  let selected = rows.filter((row) => inRange(row.sortKey)).sort((a, b) => compareRanks(rank(a), rank(b)))
  if (reverse) selected.reverse()

  if (options.cursor !== undefined) {
    const start = decodeCursor(options.cursor, cursorKeys, attrs, pk, inRange)
    const from: Rank = [start[attrs.sk]!, start.pk!, start.sk!]
    selected = selected.filter((row) => compareRanks(rank(row), from) * (reverse ? -1 : 1) > 0)
  }

  // Evaluate like DynamoDB: stop at `limit` items or once 1 MB has been read, then filter.
  const evaluated: Row[] = []
  let bytes = 0
  for (const row of selected) {
    if (evaluated.length === limit || bytes >= PAGE_BYTES) break
    evaluated.push(row)
    bytes += itemBytes(row.item)
  }
  const stoppedEarly = evaluated.length === limit || bytes >= PAGE_BYTES
  const last = evaluated.at(-1)
  const matches = evaluated.filter((row) => matchesFilter(row.item, filter))
  return {
    items: matches.map((row) => copy(row.item) as StoredItem<T>),
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
    data: copy(item.data),
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
 * A copy that drops `undefined` from objects and arrays, as the DynamoDB adapter's marshalling
 * (`removeUndefinedValues`) does; anything that is not plain data is structured-cloned.
 */
function copy<V>(value: V): V {
  if (Array.isArray(value)) return value.filter((v) => v !== undefined).map(copy) as V
  if (value !== null && typeof value === "object") {
    if (Object.getPrototypeOf(value) !== Object.prototype && Object.getPrototypeOf(value) !== null) {
      return structuredClone(value)
    }
    const out: Record<string, unknown> = {}
    for (const [k, v] of Object.entries(value)) if (v !== undefined) out[k] = copy(v)
    return out as V
  }
  return value
}

/** Approximately DynamoDB's item size: attribute names plus values, strings in UTF-8 bytes. */
function itemBytes(item: StoredItem): number {
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
