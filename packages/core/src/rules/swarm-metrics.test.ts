import { describe, expect, test } from "vitest"
import { RouterBuckets, type RouterSample } from "../model/worker"
import {
  KeepMs,
  quantile,
  replicaFigures,
  SampleEveryMs,
  series,
  windowFigures,
  withSample,
} from "./swarm-metrics"

const zeros = () => Array.from({ length: RouterBuckets.length + 1 }, () => 0)

/** A sample at `at` s with cumulative counts; `fast`/`slow` requests land in the 10 ms and 1 s buckets. */
function sample(
  atS: number,
  c: { fast?: number; slow?: number; failures?: number; e5xx?: number; tokens?: number; startedAt?: number },
): RouterSample {
  const durations = zeros()
  durations[RouterBuckets.indexOf(0.01)] = c.fast ?? 0
  durations[RouterBuckets.indexOf(1)] = c.slow ?? 0
  const firstBytes = zeros()
  firstBytes[RouterBuckets.indexOf(0.005)] = (c.fast ?? 0) + (c.slow ?? 0)
  const requests = (c.fast ?? 0) + (c.slow ?? 0)
  return {
    at: atS * 1000,
    startedAt: c.startedAt ?? 1,
    requests,
    failures: c.failures ?? 0,
    answers: { "2xx": requests - (c.e5xx ?? 0), "5xx": c.e5xx ?? 0 },
    tokens: c.tokens ?? 0,
    inFlight: 2,
    durationBuckets: durations,
    firstByteBuckets: firstBytes,
  }
}

describe("which samples are kept", () => {
  test("one every 10 s at most; a restarted router's first sample is kept at once", () => {
    const first = withSample([], sample(0, {}))!
    expect(first).toHaveLength(1)
    expect(withSample(first, sample(SampleEveryMs / 1000 - 1, { fast: 5 }))).toBeUndefined()
    expect(withSample(first, sample(SampleEveryMs / 1000, { fast: 5 }))).toHaveLength(2)
    expect(withSample(first, sample(3, { startedAt: 2 }))).toHaveLength(2)
  })

  test("samples older than the longest window (and one before it) are dropped", () => {
    let samples: RouterSample[] = []
    for (let t = 0; t <= 3600; t += 10) samples = withSample(samples, sample(t, { fast: t }))!
    expect(samples.at(-1)!.at - samples[0]!.at).toBeLessThanOrEqual(KeepMs)
    expect(samples.length).toBe(KeepMs / SampleEveryMs + 1)
  })
})

describe("window figures", () => {
  test("rates, error share, percentiles and tokens over each window from the counters' changes", () => {
    const samples: RouterSample[] = []
    // 15 minutes of history: 1 request/s; the last minute 10 fast + 90 slow requests, 10 failed, 5 5xx.
    for (let t = 0; t <= 840; t += 10) samples.push(sample(t, { fast: t, tokens: 4 * t }))
    samples.push(sample(900, { fast: 850, slow: 90, failures: 10, e5xx: 5, tokens: 4 * 840 + 600 }))
    const w = windowFigures(samples)
    expect(w["1m"]).toMatchObject({ seconds: 60, requests: 100, latencyP50S: 1, latencyP99S: 1 })
    expect(w["1m"]!.requestsPerS).toBeCloseTo(100 / 60)
    expect(w["1m"]!.errorRate).toBeCloseTo(15 / 110)
    expect(w["1m"]!.tokensPerS).toBeCloseTo(600 / 60)
    expect(w["1m"]!.ttftP99S).toBe(0.005)
    expect(w["15m"]).toMatchObject({ seconds: 900, requests: 940, latencyP50S: 0.01, latencyP99S: 1 })
  })

  test("a router restart in a window counts what the new process counted, not a negative change", () => {
    const w = windowFigures([
      sample(0, { fast: 500 }),
      sample(10, { fast: 600 }),
      sample(20, { fast: 30, startedAt: 2 }),
      sample(30, { fast: 50, startedAt: 2 }),
    ])
    expect(w["1m"]).toMatchObject({ seconds: 30, requests: 100 + 30 + 20 })
  })

  test("nothing to say before two samples; no requests: no percentiles and no error rate", () => {
    expect(windowFigures([])).toEqual({})
    expect(windowFigures([sample(0, {})])).toEqual({})
    const w = windowFigures([sample(0, {}), sample(10, {})])["1m"]!
    expect(w).toEqual({ seconds: 10, requests: 0, requestsPerS: 0, tokensPerS: 0 })
  })

  test("a percentile above the top bucket is unbounded", () => {
    const counts = zeros()
    counts[counts.length - 1] = 3
    expect(quantile(counts, 0.5)).toBe(Number.POSITIVE_INFINITY)
  })
})

test("the series has a point per step between samples, for the chart", () => {
  const points = series([
    sample(0, {}),
    sample(10, { fast: 20, tokens: 80 }),
    sample(20, { fast: 20, slow: 10, failures: 10, tokens: 80, startedAt: 1 }),
  ])
  expect(points).toEqual([
    { at: 10_000, requestsPerS: 2, errorRate: 0, latencyP99S: 0.01, tokensPerS: 8 },
    { at: 20_000, requestsPerS: 1, errorRate: 0.5, latencyP99S: 1, tokensPerS: 0 },
  ])
  expect(series([sample(0, {})])).toEqual([])
})

describe("per replica and queue wait", () => {
  const replica = (
    url: string,
    c: {
      requests: number
      failures?: number
      e5xx?: number
      tokens?: number
      busy?: number
      slowFirst?: number
    },
  ) => {
    const firstByteBuckets = zeros()
    firstByteBuckets[RouterBuckets.indexOf(0.05)] = c.requests - (c.slowFirst ?? 0)
    firstByteBuckets[RouterBuckets.indexOf(2.5)] = c.slowFirst ?? 0
    return {
      url,
      inFlight: 1,
      requests: c.requests,
      failures: c.failures ?? 0,
      answers5xx: c.e5xx ?? 0,
      tokens: c.tokens ?? 0,
      busySeconds: c.busy ?? 0,
      firstByteBuckets,
    }
  }

  test("each replica's rates, errors, first-token percentiles and mean in flight between the last two samples", () => {
    const a = {
      ...sample(0, {}),
      replicas: [replica("http://a:1", { requests: 100, tokens: 1000, busy: 10 })],
    }
    const b = {
      ...sample(10, {}),
      replicas: [
        replica("http://a:1", { requests: 150, tokens: 2000, busy: 30, slowFirst: 1 }),
        // New since the first sample: counted from zero.
        replica("http://b:1", { requests: 20, failures: 5, e5xx: 5, tokens: 100, busy: 5 }),
      ],
    }
    const [ra, rb] = replicaFigures([a, b])
    expect(ra).toMatchObject({
      url: "http://a:1",
      seconds: 10,
      requestsPerS: 5,
      tokensPerS: 100,
      meanInFlight: 2,
      ttftP50S: 0.05,
      ttftP99S: 2.5,
    })
    expect(ra!.errorRate).toBe(0)
    expect(rb).toMatchObject({ requestsPerS: 2, tokensPerS: 10, meanInFlight: 0.5, errorRate: 10 / 25 })
  })

  test("no figures without two samples, or when the last carries no replicas", () => {
    expect(replicaFigures([sample(0, {})])).toEqual([])
    expect(replicaFigures([sample(0, {}), sample(10, {})])).toEqual([])
  })

  test("only the last two samples keep their per-replica counters (the history stays the swarm's size)", () => {
    let samples: RouterSample[] = []
    for (let t = 0; t <= 60; t += 10)
      samples = withSample(samples, { ...sample(t, {}), replicas: [replica("http://a:1", { requests: t })] })!
    expect(samples.map((s) => s.replicas !== undefined)).toEqual([
      false,
      false,
      false,
      false,
      false,
      true,
      true,
    ])
  })

  test("the time requests waited in the router, per window", () => {
    const wait = (n: number) => {
      const q = zeros()
      q[RouterBuckets.indexOf(0.005)] = n
      q[RouterBuckets.indexOf(5)] = n > 0 ? 1 : 0
      return q
    }
    const figures = windowFigures([
      { ...sample(0, {}), queueWaitBuckets: wait(0) },
      { ...sample(60, { fast: 99 }), queueWaitBuckets: wait(99) },
    ])
    expect(figures["1m"]).toMatchObject({ queueWaitP50S: 0.005, queueWaitP99S: 0.005 })
    // One request in a hundred held for a wake: the p99 is still the fast bucket; a second one is not.
    const two = windowFigures([
      { ...sample(0, {}), queueWaitBuckets: zeros() },
      {
        ...sample(60, { fast: 10 }),
        queueWaitBuckets: (() => {
          const q = zeros()
          q[RouterBuckets.indexOf(0.005)] = 8
          q[RouterBuckets.indexOf(5)] = 2
          return q
        })(),
      },
    ])
    expect(two["1m"]).toMatchObject({ queueWaitP50S: 0.005, queueWaitP99S: 5 })
  })
})
