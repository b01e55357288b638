import { describe, expect, test } from "vitest"
import { Autoscaling } from "../model/swarm"
import type { RouterSample } from "../model/worker"
import { type AutoscaleInput, autoscale, readLoad } from "./swarm-autoscale"

const t0 = Date.parse("2026-01-01T00:00:00.000Z")
const policy = (extra: object = {}) =>
  Autoscaling.parse({
    minReplicas: 1,
    maxReplicas: 4,
    targetInflightPerReplica: 2,
    scaleDownDelayS: 60,
    ...extra,
  })

/** A router sample at `s` seconds whose in-flight integral is `busy` seconds and `requests` answered. */
function sample(s: number, busy: number, requests: number, extra: Partial<RouterSample> = {}): RouterSample {
  return {
    at: t0 + s * 1000,
    startedAt: t0,
    requests,
    failures: 0,
    answers: {},
    tokens: 0,
    inFlight: 0,
    busySeconds: busy,
    durationBuckets: [],
    firstByteBuckets: [],
    ...extra,
  }
}

/** Step through readings, each a pair of samples 10 s apart ending at `s` with `load` in flight on average. */
function run(p: ReturnType<typeof policy>, loads: [s: number, load: number][], start = 1) {
  let state: AutoscaleInput["state"] = { replicas: start, decisions: [] }
  let busy = 0
  let requests = 0
  const samples: RouterSample[] = [sample(loads[0]![0] - 10, 0, 0)]
  for (const [s, load] of loads) {
    busy += load * 10
    requests += load > 0 ? Math.ceil(load * 10) : 0
    samples.push(sample(s, busy, requests))
    state = autoscale({
      policy: p,
      specReplicas: 1,
      state,
      samples: samples.slice(-2),
      serving: state.replicas,
      now: t0 + s * 1000,
    }).state
  }
  return state!
}

describe("reading the load", () => {
  test("the mean in flight between two samples is their in-flight integral over the time between", () => {
    expect(readLoad([sample(0, 10, 5), sample(10, 40, 20)], t0 + 10_000)).toMatchObject({
      seconds: 10,
      inFlight: 3,
      requests: 15,
    })
  })
  test("a router that restarted in between: what the new one counted", () => {
    const restarted = sample(10, 5, 3, { startedAt: t0 + 5000 })
    expect(readLoad([sample(0, 100, 50), restarted], t0 + 10_000)).toMatchObject({
      inFlight: 0.5,
      requests: 3,
    })
  })
  test("no reading from one sample, or from samples the router stopped sending a minute ago", () => {
    expect(readLoad([sample(0, 0, 0)], t0)).toBeUndefined()
    expect(readLoad([sample(0, 0, 0), sample(10, 1, 1)], t0 + 71_000)).toBeUndefined()
  })
})

describe("deciding", () => {
  test("a burst goes to the count the load asks for at once (no scale-up delay), capped at the max, and says why", () => {
    const state = run(policy(), [[10, 9]])
    expect(state.replicas).toBe(4)
    expect(state.decisions).toHaveLength(1)
    expect(state.decisions[0]).toMatchObject({ from: 1, to: 4 })
    expect(state.decisions[0]!.reason).toBe(
      "9.0 requests in flight on average over 10 s (9.0 per replica), target 2 per replica: 1 → 4 (at maxReplicas 4)",
    )
  })

  test("with a scale-up delay, the load must ask for more that long", () => {
    const p = policy({ scaleUpDelayS: 20 })
    expect(
      run(p, [
        [10, 5],
        [20, 5],
      ]).replicas,
    ).toBe(1)
    expect(
      run(p, [
        [10, 5],
        [20, 5],
        [30, 5],
      ]).replicas,
    ).toBe(3)
    // A lull in between starts the wait again.
    expect(
      run(p, [
        [10, 5],
        [20, 1],
        [30, 5],
        [40, 5],
      ]).replicas,
    ).toBe(1)
  })

  test("after the burst it returns to the min, only once the load has asked for less for the scale-down delay", () => {
    const busy: [number, number][] = [[10, 8]]
    const quiet = (from: number, n: number): [number, number][] =>
      Array.from({ length: n }, (_, i) => [from + i * 10, 0.5])
    expect(run(policy(), [...busy, ...quiet(20, 6)]).replicas).toBe(4)
    const back = run(policy(), [...busy, ...quiet(20, 8)])
    expect(back.replicas).toBe(1)
    expect(back.decisions.at(-1)).toMatchObject({ from: 4, to: 1 })
    expect(back.decisions.at(-1)!.reason).toMatch(/: 4 → 1 \(at minReplicas 1\)$/)
  })

  test("a load within the target keeps the count and holds no pressure", () => {
    const state = run(
      policy(),
      [
        [10, 2],
        [20, 2],
      ],
      1,
    )
    expect(state.replicas).toBe(1)
    expect(state.pressure).toBeUndefined()
    expect(state.reading).toMatchObject({ inFlight: 2, wanted: 1 })
  })

  test("decisions are kept, the last 10", () => {
    const flip: [number, number][] = Array.from({ length: 24 }, (_, i) => [10 + i * 10, i % 2 ? 0 : 8])
    const state = run(policy({ scaleDownDelayS: 0 }), flip)
    expect(state.decisions).toHaveLength(10)
  })
})

describe("a time-to-first-token target", () => {
  /** Bucket counts (`RouterBuckets` then above) with `n` requests whose first byte came within `s` seconds. */
  const firstByte = (n: number, s: number) => {
    const bounds = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120]
    const counts = Array.from({ length: bounds.length + 1 }, () => 0)
    counts[bounds.findIndex((b) => s <= b)] = n
    return counts
  }
  /** One reading: 10 s with `load` in flight on average and 20 requests whose first byte took `ttft` s. */
  const step = (p: ReturnType<typeof policy>, current: number, ttft: number, load = 1) =>
    autoscale({
      policy: p,
      specReplicas: current,
      state: { replicas: current, decisions: [] },
      samples: [
        sample(0, 0, 0, { firstByteBuckets: firstByte(0, 1) }),
        sample(10, load * 10, 20, { firstByteBuckets: firstByte(20, ttft) }),
      ],
      serving: current,
      now: t0 + 10_000,
    })

  test("slow first tokens add a replica though the in-flight target is met, and say so", () => {
    const r = step(policy({ targetFirstTokenP99S: 1 }), 2, 2)
    expect(r.state.replicas).toBe(3)
    expect(r.decision?.reason).toBe(
      "time to first token p99 ≤ 2.5 s over 10 s, above the target 1 s (1.0 requests in flight on average): 2 → 3",
    )
    expect(r.state.reading).toMatchObject({ ttftP99S: 2.5, wanted: 3 })
  })

  test("first tokens within the target leave the in-flight target to decide; above it, no scale-down", () => {
    // Light load asks for 1 replica: with fast first tokens it goes down (no delay), with slow ones not.
    const fast = step(policy({ targetFirstTokenP99S: 1, scaleDownDelayS: 0 }), 3, 0.5)
    expect(fast.state.replicas).toBe(1)
    expect(fast.decision?.reason).toMatch(/target 2 per replica \(time to first token p99 ≤ 0\.5 s\): 3 → 1/)
    const slow = step(policy({ targetFirstTokenP99S: 1, scaleDownDelayS: 0 }), 3, 5)
    expect(slow.state.replicas).toBe(4)
  })

  test("one replica more per reading: the same reading read again, or one that began before the last decision, holds the count", () => {
    const p = policy({ targetFirstTokenP99S: 1 })
    const first = step(p, 2, 5)
    expect(first.state.replicas).toBe(3)
    // The next pass reads the same two samples: no second replica from them, and no scale-down.
    const again = autoscale({
      policy: p,
      specReplicas: 2,
      state: first.state,
      samples: [
        sample(0, 0, 0, { firstByteBuckets: firstByte(0, 1) }),
        sample(10, 10, 20, { firstByteBuckets: firstByte(20, 5) }),
      ],
      serving: 3,
      now: t0 + 11_000,
    })
    expect(again.decision).toBeUndefined()
    expect(again.state.replicas).toBe(3)
    // A reading wholly after the decision that is still slow adds the next one.
    const later = autoscale({
      policy: p,
      specReplicas: 2,
      state: again.state,
      samples: [
        sample(20, 10, 20, { firstByteBuckets: firstByte(20, 5) }),
        sample(30, 20, 40, { firstByteBuckets: firstByte(40, 5) }),
      ],
      serving: 3,
      now: t0 + 30_000,
    })
    expect(later.state.replicas).toBe(4)
  })

  test("at maxReplicas slow first tokens change nothing; without the target they are not read", () => {
    expect(step(policy({ targetFirstTokenP99S: 1 }), 4, 5).decision).toBeUndefined()
    expect(step(policy(), 2, 60).state.replicas).toBe(2)
  })
})

describe("a changed policy", () => {
  test("a count outside a new range moves into it at once, saying why", () => {
    const moved = autoscale({
      policy: policy({ maxReplicas: 2 }),
      specReplicas: 1,
      state: { replicas: 4, decisions: [] },
      samples: [],
      serving: 4,
      now: t0,
    })
    expect(moved.state.replicas).toBe(2)
    expect(moved.decision).toMatchObject({ from: 4, to: 2, reason: "the policy's range is now 1–2: 4 → 2" })
    expect(moved.state.decisions).toEqual([moved.decision])
  })
})

describe("scale to zero and wake", () => {
  const zero = () => policy({ minReplicas: 0, scaleDownDelayS: 30 })

  test("with min 0, the swarm goes to zero only after no request at all for the delay", () => {
    expect(
      run(zero(), [
        [10, 0],
        [20, 0],
      ]).replicas,
    ).toBe(1)
    const idle = run(zero(), [
      [10, 0],
      [20, 0],
      [30, 0],
    ])
    expect(idle.replicas).toBe(0)
    expect(idle.decisions.at(-1)!.reason).toBe("no request for 30 s: scaled to zero")
    // A trickle (a request now and then) keeps one replica.
    expect(
      run(zero(), [
        [10, 0.1],
        [20, 0],
        [30, 0.1],
        [40, 0],
        [50, 0],
      ]).replicas,
    ).toBe(1)
  })

  test("a request held at the router wakes it at once; the wake time is reported once a replica serves", () => {
    const asleep = { replicas: 0, decisions: [] }
    const woken = autoscale({
      policy: zero(),
      specReplicas: 1,
      state: asleep,
      samples: [sample(0, 0, 0), sample(3, 0, 0, { waiting: 1 })],
      wakeRequestedAt: t0 + 3000,
      serving: 0,
      now: t0 + 3500,
    })
    expect(woken.state.replicas).toBe(1)
    expect(woken.decision).toMatchObject({ from: 0, to: 1, reason: "a request arrived while scaled to zero" })
    const served = autoscale({
      policy: zero(),
      specReplicas: 1,
      state: woken.state,
      samples: [sample(0, 0, 0), sample(3, 0, 0, { waiting: 1 })],
      serving: 1,
      now: t0 + 5500,
    })
    expect(served.state.wake).toMatchObject({ seconds: 2.5 })
    expect(served.state.replicas).toBe(1)
  })
})
