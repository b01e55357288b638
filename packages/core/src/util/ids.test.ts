import { expect, test } from "vitest"
import { newId, seededFirstId, seededId } from "./ids"

test("ids made in one millisecond still sort in the order they were made", () => {
  const ids = Array.from({ length: 500 }, () => newId("ev", 1_795_953_600_000))
  expect([...ids].sort()).toEqual(ids)
  expect(new Set(ids).size).toBe(500)
})

test("a clock that steps back does not break the order", () => {
  const a = newId("ev", 2_000_000_000_000)
  const b = newId("ev", 1_999_999_999_000)
  expect([a, b].sort()).toEqual([a, b])
})

test("ids are DNS-safe and seeded ids repeat for the same seed", () => {
  expect(newId("job", Date.now())).toMatch(/^job-[0-9a-z]{20}$/)
  expect(seededId("job", 1000, "s")).toBe(seededId("job", 1000, "s"))
  expect(seededId("job", 1000, "s")).not.toBe(seededId("job", 1000, "t"))
})

test("a seeded first id is the same for the same time and seed, and sorts before the ids made later in that millisecond", () => {
  const ms = Date.parse("2026-12-01T12:00:00Z")
  const first = seededFirstId("ev", ms, "p/job-1#created")
  expect(seededFirstId("ev", ms, "p/job-1#created")).toBe(first)
  expect(seededFirstId("ev", ms, "p/job-2#created")).not.toBe(first)
  const later = [newId("ev", ms), newId("ev", ms), newId("ev", ms)]
  expect([...later, first].sort()[0]).toBe(first)
  expect(first < newId("ev", ms + 1)).toBe(true)
  expect(first > `ev-${"0".repeat(9)}`).toBe(true)
})

test("the random part stays random across the refills of its pool", () => {
  const suffixes = Array.from({ length: 3000 }, () => newId("ev", 1_795_953_600_000).slice(-6))
  // 30 bits each: 3,000 draws repeat a value rarely, never most of them (a pool not refilled would).
  expect(new Set(suffixes).size).toBeGreaterThan(2990)
})
