/**
 * Which rows belong to a shard. Two rules, chosen with `--shard-by`:
 *
 * - `hash` (default): shard = FNV-1a 32-bit of the id's UTF-8 bytes, mod NSHARDS. It depends on the id
 *   alone, so a row lands in the same shard whatever its position, the order of the file or its format
 *   (a numeric id is first turned into its decimal text, so `5` in JSONL and `"5"` in CSV agree).
 * - `range`: contiguous rows by position; shard i of n takes rows [⌊i·N/n⌋, ⌊(i+1)·N/n⌋) of N.
 *
 * Either way every row is in exactly one shard.
 */

export const ShardBy = ["hash", "range"] as const
export type ShardBy = (typeof ShardBy)[number]

export interface ShardSpec {
  shardId: number
  nshards: number
}

const encoder = new TextEncoder()

/** FNV-1a, 32 bits (offset basis 2166136261, prime 16777619), over the UTF-8 bytes of `text`. */
export function fnv1a32(text: string): number {
  let hash = 0x811c9dc5
  for (const byte of encoder.encode(text)) {
    hash ^= byte
    hash = Math.imul(hash, 0x01000193) >>> 0
  }
  return hash >>> 0
}

/** The shard of an id under `--shard-by hash`. */
export function hashShard(id: string, nshards: number): number {
  return fnv1a32(id) % nshards
}

/** The half-open row range `[start, end)` of a shard under `--shard-by range`, for `total` rows. */
export function rangeOf(total: number, { shardId, nshards }: ShardSpec): { start: number; end: number } {
  return {
    start: Math.floor((shardId * total) / nshards),
    end: Math.floor(((shardId + 1) * total) / nshards),
  }
}

/**
 * A predicate for rows streamed in input order: `(id, position)` → in this shard? `total` (the number
 * of rows of the input) is needed for `range` only.
 */
export function shardFilter(
  by: ShardBy,
  spec: ShardSpec,
  total?: number,
): (id: string, pos: number) => boolean {
  if (by === "hash") return (id) => hashShard(id, spec.nshards) === spec.shardId
  if (total === undefined) throw new Error("range sharding needs the number of rows")
  const { start, end } = rangeOf(total, spec)
  return (_id, pos) => pos >= start && pos < end
}
