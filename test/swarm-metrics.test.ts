/**
 * A swarm's metrics end to end on a local plane: traffic through the swarm's URL is counted by its
 * router, the agent reports the counters with its heartbeats, the control plane samples them, and
 * `GET /v1/swarms/{name}/metrics` says what happened over the last minute.
 */
import { afterAll, beforeAll, expect, test } from "vitest"
import { type Plane, startAgent, startPlane, stopAgents, until } from "./support/plane"

let p: Plane
beforeAll(async () => {
  p = await startPlane()
})
afterAll(async () => {
  await stopAgents()
  await p.stop()
})

test("requests through a swarm's URL show in its metrics: rate, no errors, latency, time to first token, tokens", {
  timeout: 120_000,
}, async () => {
  expect(
    (await p.call("POST", "/v1/backends", { id: "pool", config: { type: "workers", heartbeatIntervalS: 1 } }))
      .status,
  ).toBe(201)
  startAgent(p, "pool", "metrics-agent", { cpu: 4 })
  const created = await p.call("POST", "/v1/swarms", {
    name: "llm",
    model: "echo",
    replicas: 1,
    cpusPerReplica: 0.5,
    memoryMiBPerReplica: 256,
    backendId: "pool",
  })
  expect(created.status).toBe(202)
  const url = await until(
    "the swarm to serve",
    async () => {
      const s = (await p.call("GET", "/v1/swarms/llm")).json
      return s.phase === "RUNNING" && s.url
    },
    60_000,
  )
  // A first sample of the router's counters, before any traffic: no window yet, and no failure.
  const before = await until(
    "a first sample of the router's counters",
    async () => {
      const m = await p.call("GET", "/v1/swarms/llm/metrics")
      return m.status === 200 && m.json.sampledAt && m.json
    },
    30_000,
  )
  expect(before).toMatchObject({ name: "llm", inFlight: 0 })

  const chat = async (stream: boolean) => {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ stream, messages: [{ role: "user", content: "one two three" }] }),
    })
    await res.text()
    return res.status
  }
  const statuses: number[] = []
  for (let i = 0; i < 20; i++) statuses.push(await chat(i % 2 === 0))
  expect(statuses.every((s) => s === 200)).toBe(true)

  // The router's counters are sampled every 10 s at most: the minute's window appears once a sample
  // after the requests joins the one before them.
  const minute = await until(
    "the metrics to count the 20 requests",
    async () => {
      const w = (await p.call("GET", "/v1/swarms/llm/metrics")).json.windows["1m"]
      return w && w.requests >= 20 && w
    },
    60_000,
  )
  expect(minute.requests).toBe(20)
  expect(minute.requestsPerS).toBeGreaterThan(0)
  expect(minute.errorRate).toBe(0)
  expect(minute.latencyP50S).toBeGreaterThan(0)
  expect(minute.ttftP50S).toBeGreaterThan(0)
  // The echo model answers "echo: " and the prompt: 4 completion tokens each.
  expect(minute.tokensPerS * minute.seconds).toBeCloseTo(80, 0)

  // The step-by-step series the dashboard charts: the step with the requests in it shows them.
  const { series } = (await p.call("GET", "/v1/swarms/llm/metrics")).json as {
    series: { at: string; requestsPerS: number; errorRate?: number }[]
  }
  expect(series.length).toBeGreaterThanOrEqual(1)
  expect(series.some((s) => s.requestsPerS > 0 && s.errorRate === 0)).toBe(true)
  expect(series.every((s, i) => i === 0 || Date.parse(s.at) > Date.parse(series[i - 1]!.at))).toBe(true)

  // Per replica, between the last two samples: caught while the last step is the one with the requests.
  const perReplica = await until(
    "the per-replica figures of the step with the requests",
    async () => {
      const m = (await p.call("GET", "/v1/swarms/llm/metrics")).json
      return m.series.at(-1)?.requestsPerS > 0 && m.replicas.length > 0 && m
    },
    60_000,
  )
  const [replica] = perReplica.replicas
  expect(replica).toMatchObject({ slot: 0, generation: 1, inFlight: 0 })
  expect(replica.requestsPerS * replica.seconds).toBeCloseTo(20, 5)
  expect(replica.tokensPerS * replica.seconds).toBeCloseTo(80, 5)
  expect(replica.ttftP50S).toBeGreaterThan(0)
  expect(replica.errorRate).toBe(0)
  // The router reports how long requests waited in it (the hold while a replica wakes is measured on
  // the router's own clock in router.test).
  expect(minute.queueWaitP99S).toBeTypeOf("number")

  expect((await p.call("GET", "/v1/swarms/nope/metrics")).status).toBe(404)
})
