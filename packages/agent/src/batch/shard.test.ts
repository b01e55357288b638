import { describe, expect, it } from "vitest"
import { fnv1a32, hashShard, rangeOf, type ShardBy, shardFilter } from "./shard"

describe("fnv1a32", () => {
  // Reference values (the FNV test vectors, and Python's reference implementation for the rest). A
  // change here would move rows between shards and break resuming output written by older runners.
  const vectors: Record<string, number> = {
    "": 0x811c9dc5,
    a: 0xe40c292c,
    foobar: 0xbf9cf968,
    é: 0x1e9de8c1,
    "row-0": 0x9270eb16,
    "42": 0x87e38583,
  }
  for (const [text, hash] of Object.entries(vectors))
    it(`hashes ${JSON.stringify(text)} over its UTF-8 bytes`, () => expect(fnv1a32(text)).toBe(hash))

  it("pins the shard of a few ids", () => {
    expect([hashShard("row-0", 4), hashShard("row-1", 4), hashShard("42", 7)]).toEqual([2, 1, 6])
  })
})

const ids = Array.from({ length: 997 }, (_, i) => (i % 3 === 0 ? String(i) : `row-${i}-é`))

/** Shard of each id under a rule, for ids in the given order. */
function assign(by: ShardBy, nshards: number, order: readonly string[]): Map<string, number[]> {
  const found = new Map<string, number[]>()
  for (let shardId = 0; shardId < nshards; shardId++) {
    const keep = shardFilter(by, { shardId, nshards }, order.length)
    order.forEach((id, pos) => {
      if (keep(id, pos)) found.set(id, [...(found.get(id) ?? []), shardId])
    })
  }
  return found
}

describe("shard coverage", () => {
  for (const by of ["hash", "range"] as const)
    for (let nshards = 1; nshards <= 8; nshards++)
      it(`${by}: every row in exactly one of ${nshards} shards`, () => {
        const found = assign(by, nshards, ids)
        expect(found.size).toBe(ids.length)
        for (const shards of found.values()) expect(shards).toHaveLength(1)
      })

  it("hash: the same id lands in the same shard whatever the order of the input", () => {
    const reversed = [...ids].reverse()
    const shuffled = [...ids].sort((a, b) => fnv1a32(`${a}x`) - fnv1a32(`${b}x`))
    for (let nshards = 1; nshards <= 8; nshards++) {
      const first = assign("hash", nshards, ids)
      expect(assign("hash", nshards, reversed)).toEqual(first)
      expect(assign("hash", nshards, shuffled)).toEqual(first)
    }
  })

  it("hash: spreads rows roughly evenly", () => {
    const counts = [0, 0, 0, 0]
    for (const id of ids) counts[hashShard(id, 4)]! += 1
    for (const c of counts) expect(c).toBeGreaterThan(ids.length / 4 - 60)
  })

  it("range: contiguous ranges that tile the rows, also with fewer rows than shards", () => {
    for (const total of [0, 1, 3, 10, 1000])
      for (let nshards = 1; nshards <= 8; nshards++) {
        let next = 0
        for (let shardId = 0; shardId < nshards; shardId++) {
          const { start, end } = rangeOf(total, { shardId, nshards })
          expect(start).toBe(next)
          expect(end - start).toBeLessThanOrEqual(Math.ceil(total / nshards))
          next = end
        }
        expect(next).toBe(total)
      }
  })

  it("range needs the row count", () => {
    expect(() => shardFilter("range", { shardId: 0, nshards: 2 })).toThrow("number of rows")
  })
})
