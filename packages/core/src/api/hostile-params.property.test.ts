/**
 * Hostile path and query parameters, generated, on every route of the OpenAPI document that has either:
 * ids with NUL, lone surrogates, `..` and malformed percent-encoding, queries with unknown, repeated and
 * out-of-range values. Never a 5xx; a refusal has the error shape and writes nothing; a read never writes.
 */
import fc from "fast-check"
import { describe, expect, test } from "vitest"
import { urlWord } from "./testing/hostile-json"
import { expectSafe, operations, runs, world } from "./testing/hostile-world"

describe("every route's path and query parameters", async () => {
  const all = await operations()
  const withParams = all.filter((o) => o.path.includes("{") || o.query.length)

  test("there are routes to try", () => expect(withParams.length).toBeGreaterThan(10))

  // One world for all: reads write nothing, and what a refused write leaves is checked after each call.
  const w = await world()
  const known = (name: string) => {
    if (name === "id") return fc.constantFrom(w.jobId, w.workerId, "local", "hpc")
    if (name === "name") return fc.constant("s")
    if (name === "project") return fc.constant("default")
    if (name === "index") return fc.constantFrom("0", "1")
    return fc.constant("x")
  }

  for (const op of withParams) {
    test(`${op.method} ${op.path}: hostile parameters are refused cleanly`, async () => {
      const names = [...op.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!)
      const params = fc.record(
        Object.fromEntries(names.map((n) => [n, fc.oneof(known(n), urlWord)])),
      ) as fc.Arbitrary<Record<string, string>>
      const query = fc.array(
        fc.tuple(
          fc.oneof(fc.constantFrom(...op.query, "limit"), urlWord),
          fc.oneof(urlWord, fc.constant("")),
        ),
        {
          maxLength: 4,
        },
      )
      await fc.assert(
        fc.asyncProperty(params, query, async (p, q) => {
          // A Slurm backend would be reached over SSH: its status and logs are another suite's.
          if (p.id === "hpc") return
          const path = op.path.replace(/\{(\w+)\}/g, (_, n: string) => p[n]!)
          const qs = q.map(([k, v]) => `${k}=${v}`).join("&")
          const body = op.method === "POST" ? "{}" : undefined
          const writes = w.store.writes()
          const { what } = await expectSafe(w, op.method, `${path}${qs ? `?${qs}` : ""}`, { text: body })
          if (op.method === "GET") expect(w.store.writes(), `${what}: a read wrote`).toBe(writes)
        }),
        runs(40),
      )
    }, 120_000)
  }
})
