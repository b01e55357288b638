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
  tokensPerS: 37.5,
}
const metrics = {
  name: "demo",
  sampledAt: "2026-12-02T12:00:00.000Z",
  inFlight: 3,
  windows: { "1m": window, "5m": { ...window, seconds: 300 } },
}

test("a row per window: req/s, errors, latency and first-token percentiles, tokens/s", async () => {
  const res = await run(["swarm", "metrics", "demo"], {
    routes: { "GET /v1/swarms/demo/metrics": () => ({ body: metrics }) },
  })
  expect(res.code).toBe(0)
  const lines = res.stdout.split("\n")
  expect(lines.find((l) => l.startsWith("1m"))).toMatch(
    /^1m\s+2\.00\s+2\.5%\s+250 ms \/ 2\.5 s\s+50 ms \/ > 120 s\s+37\.5/,
  )
  expect(lines.some((l) => l.startsWith("5m"))).toBe(true)
  expect(lines.some((l) => l.startsWith("15m"))).toBe(false)
  expect(res.stdout).toContain("in flight 3, sampled at 2026-12-02T12:00:00.000Z")
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
