import { expect, test } from "vitest"
import { FakeClock } from "../util/clock"
import { Leases } from "./leases"
import { MemoryStore } from "./memory"

test("one holder at a time; an expired lease is taken over with a larger token", async () => {
  const clock = new FakeClock()
  const leases = Leases(MemoryStore(), clock)
  const a = await leases.acquire("p", "b", "reconcile", "tick-a", 30_000)
  expect(a?.token).toBe(1)
  expect(await leases.acquire("p", "b", "reconcile", "tick-b", 30_000)).toBeUndefined()
  clock.advance(30_001)
  const b = await leases.acquire("p", "b", "reconcile", "tick-b", 30_000)
  expect(b?.token).toBe(2)
  await leases.release(a!) // a stale holder's release leaves b's lease alone
  expect(await leases.acquire("p", "b", "reconcile", "tick-c", 30_000)).toBeUndefined()
  await leases.release(b!)
  const c = await leases.acquire("p", "b", "reconcile", "tick-c", 30_000)
  expect(c).toMatchObject({ token: 3, lastPassAt: clock.now() })
})

test("of many concurrent takers exactly one wins", async () => {
  const leases = Leases(MemoryStore(), new FakeClock())
  const results = await Promise.all(
    Array.from({ length: 16 }, (_, i) => leases.acquire("p", "b", "r", `t${i}`, 1000)),
  )
  expect(results.filter(Boolean)).toHaveLength(1)
})

test("the same owner name cannot take a lease it already holds: each pass is its own holder", async () => {
  const leases = Leases(MemoryStore(), new FakeClock())
  expect(await leases.acquire("p", "b", "r", "tick-1", 1000)).toBeDefined()
  expect(await leases.acquire("p", "b", "r", "tick-1", 1000)).toBeUndefined()
})
