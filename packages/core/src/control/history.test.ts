/**
 * A reconcile tick costs what the active work costs, whatever lies finished beside it: with twice the
 * finished history it reads (and writes) exactly as much, and with twice the active work at most twice
 * as much. Counted at the StateStore port over the memory store; `npm run bench -- history` measures
 * the same at 100,000 finished tasks, and on DynamoDB Local in capacity units.
 */
import { expect, test } from "vitest"
import { MemoryStore } from "../store/memory"
import {
  type BusyPlane,
  busyPlane,
  failSome,
  finishedJobItems,
  seedHistory,
  TasksPerJob,
} from "./testing/history"
import { reconcileTick } from "./ticks"

const Finished = 2_000
const Active = 100

/** One tick after 1% of the running tasks failed: what it read and wrote, and what it placed. */
async function tick(p: BusyPlane) {
  const failed = Math.max(1, p.running.length / 100)
  await failSome(p, failed)
  p.counter.reset()
  const report = await reconcileTick(p.rt, "history-test")
  expect(report.backends.map((b) => b.error)).toEqual([undefined])
  // The failed tasks are retried in this tick: the pass did its work, it did not skip it.
  expect(report.backends[0]!.placed).toBe(failed)
  return { reads: p.counter.reads(), writes: p.counter.writes(), counts: { ...p.counter.counts } }
}

test("a reconcile tick reads the same with twice the finished history, and at most twice as much with twice the active work", async () => {
  const template = await finishedJobItems()
  const jobs = Finished / TasksPerJob

  const base = MemoryStore()
  const plane = await busyPlane(base, Active)
  expect(await seedHistory(base, template, jobs, "done-a")).toBe(jobs * template.length)
  const once = await tick(plane)
  await seedHistory(base, template, jobs, "done-b")
  const twice = await tick(plane)

  // It read the active work (every running task at least), and the history did not move a count.
  expect(once.reads.items).toBeGreaterThan(Active)
  expect(twice).toEqual(once)

  const wide = MemoryStore()
  const busier = await busyPlane(wide, 2 * Active)
  await seedHistory(wide, template, jobs, "done-a")
  const doubled = await tick(busier)
  expect(doubled.reads.items).toBeGreaterThan(once.reads.items)
  expect(doubled.reads.items).toBeLessThanOrEqual(2 * once.reads.items)
  expect(doubled.reads.calls).toBeLessThanOrEqual(2 * once.reads.calls)
}, 60_000)
