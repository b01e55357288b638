/** `swarmplane swarm metrics NAME`: the windows as a table, `-o json` as the API answers, and before any traffic. */
import { expect, test } from "vitest"
import { apiError, run } from "../testing"

const window = {
  seconds: 60,
  requests: 120,
  requestsPerS: 2,
  errorRate: 0.025,
  latencyP50S: 0.25,
  latencyP99S: 2.5,
  ttftP50S: 0.05,
  ttftP99S: null,
  queueWaitP50S: 0.005,
  queueWaitP99S: 5,
  tokensPerS: 37.5,
}
const metrics = {
  name: "demo",
  sampledAt: "2026-12-02T12:00:00.000Z",
  inFlight: 3,
  windows: { "1m": window, "5m": { ...window, seconds: 300 } },
  replicas: [
    {
      url: "http://10.0.0.1:5000",
      slot: 3,
      generation: 2,
      seconds: 10,
      inFlight: 2,
      meanInFlight: 1.5,
      requestsPerS: 1.2,
      ttftP50S: 0.05,
      ttftP99S: 0.25,
      tokensPerS: 20,
    },
  ],
}

test("a row per window: req/s, errors, latency, first-token and queue-wait percentiles, tokens/s; a row per replica", async () => {
  const res = await run(["swarm", "metrics", "demo"], {
    routes: { "GET /v1/swarms/demo/metrics": () => ({ body: metrics }) },
  })
  expect(res.code).toBe(0)
  const lines = res.stdout.split("\n")
  expect(lines.find((l) => l.startsWith("1m"))).toMatch(
    /^1m\s+2\.00\s+2\.5%\s+250 ms \/ 2\.5 s\s+50 ms \/ > 120 s\s+5 ms \/ 5\.0 s\s+37\.5/,
  )
  expect(lines.some((l) => l.startsWith("5m"))).toBe(true)
  expect(lines.some((l) => l.startsWith("15m"))).toBe(false)
  expect(res.stdout).toContain("in flight 3, sampled at 2026-12-02T12:00:00.000Z")
  expect(res.stdout).toContain("Per replica, over the last 10 s:")
  expect(lines.find((l) => l.startsWith("3 "))).toMatch(
    /^3\s+2\s+http:\/\/10\.0\.0\.1:5000\s+2\s+1\.5\s+1\.20\s+-\s+50 ms \/ 250 ms\s+20\.0$/,
  )
})

test("-o json prints the API's answer; before any traffic it says when figures will come", async () => {
  const json = await run(["swarm", "metrics", "demo", "-o", "json"], {
    routes: { "GET /v1/swarms/demo/metrics": () => ({ body: metrics }) },
  })
  expect(JSON.parse(json.stdout)).toEqual(metrics)
  const quiet = await run(["swarm", "metrics", "demo"], {
    routes: {
      "GET /v1/swarms/demo/metrics": () => ({
        body: { name: "demo", sampledAt: metrics.sampledAt, inFlight: 0, windows: {} },
      }),
    },
  })
  expect(quiet.stdout).toContain("the next sample (within 10 s) starts the first window")
  const missing = await run(["swarm", "metrics", "nope"], {
    routes: { "GET /v1/swarms/nope/metrics": () => apiError(404, "swarm.not_found", "swarm nope not found") },
  })
  expect(missing.code).not.toBe(0)
  expect(missing.stderr).toContain("swarm nope not found")
})
