import { expect, test } from "vitest"
import { mapLimit } from "./concurrency"

test("mapLimit keeps order and never runs more than the limit at once", async () => {
  let running = 0
  let peak = 0
  const out = await mapLimit([5, 4, 3, 2, 1, 0], 2, async (n, i) => {
    running++
    peak = Math.max(peak, running)
    await new Promise((r) => setImmediate(r))
    running--
    return n * 10 + i
  })
  expect(out).toEqual([50, 41, 32, 23, 14, 5])
  expect(peak).toBe(2)
})

test("mapLimit of nothing is nothing", async () => {
  expect(await mapLimit([], 4, async () => 1)).toEqual([])
})
