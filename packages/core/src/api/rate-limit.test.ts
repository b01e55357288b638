/** Rate limits per key: a burst, then 429 with Retry-After and nothing written; heartbeats do not starve. */
import { describe, expect, test } from "vitest"
import { FakeClock } from "../util/clock"
import { createApp } from "./app"
import type { RateLimitOptions } from "./context"
import { TokenBuckets } from "./rate-limit"
import { testApi } from "./testing"

/** A test API whose app has these limits (the same deps, so the same store, clock and keys). */
async function limited(rateLimit: Partial<RateLimitOptions>) {
  const api = await testApi()
  const app = createApp({ ...api.deps, rateLimit })
  const call = async (
    method: string,
    path: string,
    key: string,
    opts: { body?: unknown; headers?: Record<string, string> } = {},
  ) => {
    const headers: Record<string, string> = { Authorization: `Bearer ${key}`, ...opts.headers }
    if (opts.body !== undefined) headers["Content-Type"] = "application/json"
    const res = await app.request(path, {
      method,
      headers,
      ...(opts.body === undefined ? {} : { body: JSON.stringify(opts.body) }),
    })
    const text = await res.text()
    return { status: res.status, headers: res.headers, json: text ? JSON.parse(text) : undefined }
  }
  return { api, call }
}

describe("rate limits per key", () => {
  test("by default a key may send a burst of 100, then 429 rate_limited with Retry-After; nothing is written; then 50 a second", async () => {
    const api = await testApi()
    await api.call("POST", "/v1/backends", { body: { id: "pool", config: { type: "workers" } } })
    for (let i = 0; i < 99; i++) expect((await api.call("GET", "/v1/me")).status).toBe(200)
    const before = api.store.writes()
    const over = await api.call("POST", "/v1/jobs", { body: { command: ["true"] } })
    expect(over.status).toBe(429)
    expect(over.json.error.code).toBe("rate_limited")
    expect(over.json.error.message).toMatch(/at most 50 a second/)
    expect(over.headers.get("Retry-After")).toBe("1")
    expect(api.store.writes()).toBe(before)

    api.clock.advance(1000)
    expect((await api.call("GET", "/v1/jobs")).json.items).toEqual([])
    let passed = 1
    while ((await api.call("GET", "/v1/me")).status === 200) passed++
    expect(passed).toBe(50)
  })

  test("one key's limit is its own: another key of the same project is not held back", async () => {
    const { api, call } = await limited({ perSecond: 1, burst: 2 })
    const other = (await api.call("POST", "/v1/projects/default/keys", { body: { role: "read" } })).json.key
    expect((await call("GET", "/v1/me", api.adminKey)).status).toBe(200)
    expect((await call("GET", "/v1/me", api.adminKey)).status).toBe(200)
    const over = await call("GET", "/v1/me", api.adminKey)
    expect(over.status).toBe(429)
    expect(over.headers.get("Retry-After")).toBe("1")
    expect((await call("GET", "/v1/me", other)).status).toBe(200)
  })

  test("Retry-After is in whole seconds, long enough for a token to come back", async () => {
    const { api, call } = await limited({ perSecond: 0.1, burst: 1 })
    expect((await call("GET", "/v1/me", api.adminKey)).status).toBe(200)
    const over = await call("GET", "/v1/me", api.adminKey)
    expect(over.headers.get("Retry-After")).toBe("10")
    api.clock.advance(9_999)
    expect((await call("GET", "/v1/me", api.adminKey)).status).toBe(429)
    api.clock.advance(10_000)
    expect((await call("GET", "/v1/me", api.adminKey)).status).toBe(200)
  })

  test("an accepted worker's heartbeats draw on its own bucket, not its key's; a made-up credential draws on the key's", async () => {
    const { api, call } = await limited({ perSecond: 1, burst: 5 })
    const admin = api.adminKey
    await call("POST", "/v1/backends", admin, { body: { id: "pool", config: { type: "workers" } } })
    const workerKey = (await call("POST", "/v1/projects/default/keys", admin, { body: { role: "worker" } }))
      .json.key
    const reg = await call("POST", "/v1/workers/register", workerKey, {
      body: { backendId: "pool", resources: { cpu: 1, memoryMiB: 64 } },
    })
    expect(reg.status).toBe(201)
    const beat = (credential: string) =>
      call("POST", `/v1/workers/${reg.json.worker.id}/heartbeat`, workerKey, {
        body: { attempts: [] },
        headers: { "Swarmplane-Worker-Credential": credential },
      })
    expect((await beat(reg.json.credential)).status).toBe(200)
    // Other agents sharing the key use up its bucket...
    while ((await call("GET", "/v1/me", workerKey)).status === 200);
    // ...and this worker still heartbeats, up to its own bucket.
    for (let i = 0; i < 5; i++) expect((await beat(reg.json.credential)).status).toBe(200)
    const runaway = await beat(reg.json.credential)
    expect(runaway.status).toBe(429)
    expect(runaway.json.error.message).toContain("worker credential")
    // A credential never accepted is charged to the key, which is spent.
    expect((await beat("swc_made-up")).status).toBe(429)
  })

  test("rateLimit: false turns the limits off", async () => {
    const api = await testApi()
    const app = createApp({ ...api.deps, rateLimit: false })
    for (let i = 0; i < 150; i++) {
      const res = await app.request("/v1/me", { headers: { Authorization: `Bearer ${api.adminKey}` } })
      expect(res.status).toBe(200)
    }
  })
})

describe("token buckets", () => {
  const options = { perSecond: 1, burst: 2, maxBuckets: 3 }

  test("memory stays bounded: past maxBuckets the least recently used bucket goes", () => {
    const clock = new FakeClock()
    const buckets = TokenBuckets(clock, options)
    for (let i = 0; i < 1000; i++) buckets.take(`key-${i}`)
    expect(buckets.size()).toBe(3)
    expect(buckets.has("key-999")).toBe(true)
    expect(buckets.has("key-0")).toBe(false)
  })

  test("idle buckets (refilled, so no different from new ones) are swept within a minute", () => {
    const clock = new FakeClock()
    const buckets = TokenBuckets(clock, { ...options, maxBuckets: 100 })
    buckets.take("a")
    buckets.take("b")
    clock.advance(61_000)
    buckets.take("c")
    expect([buckets.has("a"), buckets.has("b"), buckets.has("c")]).toEqual([false, false, true])
  })

  test("tokens come back at perSecond; a refused request spends none", () => {
    const clock = new FakeClock()
    const buckets = TokenBuckets(clock, options)
    expect(buckets.take("a")).toEqual({ ok: true })
    expect(buckets.take("a")).toEqual({ ok: true })
    expect(buckets.take("a")).toEqual({ ok: false, retryAfterS: 1 })
    clock.advance(500)
    expect(buckets.take("a")).toEqual({ ok: false, retryAfterS: 1 })
    clock.advance(500)
    expect(buckets.take("a")).toEqual({ ok: true })
    expect(buckets.take("a")).toEqual({ ok: false, retryAfterS: 1 })
  })
})
