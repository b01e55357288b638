/**
 * A swarm's replica count from its router's load, for backends where swarmplane rolls the replicas
 * itself. Pure. The load is the mean number of requests in flight between the router's last two
 * samples (its in-flight time integral over the time between: Little's law, not one instant); the
 * count it asks for is that over `targetInflightPerReplica`, rounded up, within `minReplicas` and
 * `maxReplicas`. With `targetFirstTokenP99S`, a time to first token above it (p99 between the same two
 * samples) asks for one replica more than the current count, whatever the in-flight target says, and
 * holds any scale-down; one more per reading that began after the last decision (a change takes a
 * reading to show). A count above the current one is taken once the load has asked for more for
 * `scaleUpDelayS`, a lower one once it has asked for less for `scaleDownDelayS` (so a burst adds
 * replicas at once and a lull does not remove them). With `minReplicas` 0 the swarm goes to zero only
 * after no request at all for `scaleDownDelayS`; a request held by the router wakes it at once.
 */
import type { AutoscaleDecision, AutoscalerState, Swarm } from "../model/swarm"
import type { RouterSample } from "../model/worker"
import { delta, quantile } from "./swarm-metrics"

/** Decisions kept on the swarm. */
export const KeptDecisions = 10
/** A reading older than this is not load any more: the router stopped reporting. */
export const StaleReadingMs = 60_000

type Policy = NonNullable<Swarm["autoscaling"]>

export interface AutoscaleInput {
  policy: Policy
  /** The swarm's spec count, the first count when nothing was decided yet. */
  specReplicas: number
  state: AutoscalerState | undefined
  /** The router's samples, oldest first. */
  samples: readonly RouterSample[]
  /** A request waits at the router for a replica (scaled to zero): when it asked, if it did. */
  wakeRequestedAt?: number
  /** Replicas serving now (to report the wake time once one serves again). */
  serving: number
  now: number
}

export interface AutoscaleResult {
  state: AutoscalerState
  /** The decision of this step, if it moved. */
  decision?: AutoscaleDecision
}

const iso = (ms: number) => new Date(ms).toISOString()
const clamp = (n: number, p: Policy) => Math.min(p.maxReplicas, Math.max(p.minReplicas, n))

export function autoscale(input: AutoscaleInput): AutoscaleResult {
  const { policy, now } = input
  const before = input.state?.replicas
  // A count outside a changed range moves into it at once.
  const current = clamp(before ?? input.specReplicas, policy)
  let state: AutoscalerState = {
    replicas: before ?? current,
    decisions: input.state?.decisions ?? [],
    ...(input.state?.reading ? { reading: input.state.reading } : {}),
    ...(input.state?.pressure ? { pressure: input.state.pressure } : {}),
    ...(input.state?.wake ? { wake: input.state.wake } : {}),
    ...(input.state?.lastRequestAt ? { lastRequestAt: input.state.lastRequestAt } : {}),
  }
  const decide = (to: number, reason: string, from = current): AutoscaleResult => {
    const decision = { at: iso(now), from, to, reason }
    const { pressure: _, ...rest } = state
    return {
      state: { ...rest, replicas: to, decisions: [...state.decisions, decision].slice(-KeptDecisions) },
      decision,
    }
  }

  if (before !== undefined && before !== current) {
    const range = `${policy.minReplicas}–${policy.maxReplicas}`
    return decide(current, `the policy's range is now ${range}: ${before} → ${current}`, before)
  }
  // A wake: a request waits at the router of a swarm at zero. One replica at once, whatever the delays.
  if (input.wakeRequestedAt !== undefined && current === 0) {
    state = { ...state, wake: { requestedAt: iso(input.wakeRequestedAt) } }
    return decide(Math.max(1, policy.minReplicas), "a request arrived while scaled to zero")
  }
  // Report the wake time once a replica serves again.
  if (state.wake && !state.wake.readyAt && input.serving > 0) {
    const seconds = (now - Date.parse(state.wake.requestedAt)) / 1000
    state = { ...state, wake: { ...state.wake, readyAt: iso(now), seconds } }
  }

  const reading = readLoad(input.samples, now)
  if (!reading) return { state }
  const byInFlight = clamp(Math.ceil(reading.inFlight / policy.targetInflightPerReplica - 1e-9), policy)
  const ttftTarget = policy.targetFirstTokenP99S
  const slow = ttftTarget !== undefined && reading.ttftP99S !== undefined && reading.ttftP99S > ttftTarget
  // Slow first tokens add one replica per reading taken wholly after the last decision: the same
  // reading read again by the next pass, or one that began before the last change, holds the count.
  const lastDecision = state.decisions.at(-1)
  const fresh = !lastDecision || Date.parse(lastDecision.at) <= reading.at - reading.seconds * 1000
  const wanted = slow ? clamp(Math.max(byInFlight, fresh ? current + 1 : current), policy) : byInFlight
  // No request at all for the scale-down delay is the only load that may take a swarm to zero.
  const busy = reading.requests > 0 || reading.inFlightNow > 0 || reading.waiting > 0
  // With no request in it, a first reading says the swarm was idle since the reading began.
  const lastRequestAt = busy
    ? reading.at
    : input.state?.lastRequestAt
      ? Date.parse(input.state.lastRequestAt)
      : reading.at - reading.seconds * 1000
  state = { ...state, lastRequestAt: iso(lastRequestAt) }
  const idleFor = now - lastRequestAt
  const floor = wanted === 0 && (busy || idleFor < policy.scaleDownDelayS * 1000) ? 1 : wanted
  state = {
    ...state,
    reading: {
      at: iso(reading.at),
      seconds: Math.round(reading.seconds * 10) / 10,
      inFlight: Math.round(reading.inFlight * 100) / 100,
      requests: reading.requests,
      ...(reading.ttftP99S !== undefined
        ? { ttftP99S: Number.isFinite(reading.ttftP99S) ? reading.ttftP99S : null }
        : {}),
      wanted: floor,
    },
  }
  if (floor === current) {
    const { pressure: _, ...rest } = state
    return { state: rest }
  }
  // Idle for the whole delay: to zero now (the idle time was the wait).
  if (floor === 0) return decide(0, `no request for ${policy.scaleDownDelayS} s: scaled to zero`)
  const direction = floor > current ? "up" : "down"
  const held = state.pressure
  const sameWay = held && held.wanted > current === (direction === "up")
  const since = sameWay ? Date.parse(held.since) : now
  state = { ...state, pressure: { since: iso(since), wanted: floor } }
  const delayS = direction === "up" ? policy.scaleUpDelayS : policy.scaleDownDelayS
  if (now - since < delayS * 1000) return { state }
  const perReplica = current > 0 ? ` (${(reading.inFlight / current).toFixed(1)} per replica)` : ""
  const ttft = reading.ttftP99S !== undefined ? ` (time to first token p99 ≤ ${reading.ttftP99S} s)` : ""
  const load =
    slow && wanted > byInFlight
      ? `time to first token p99 ≤ ${reading.ttftP99S} s over ${Math.round(reading.seconds)} s, above the target ${ttftTarget} s (${reading.inFlight.toFixed(1)} requests in flight on average)`
      : `${reading.inFlight.toFixed(1)} requests in flight on average over ${Math.round(reading.seconds)} s${perReplica}, target ${policy.targetInflightPerReplica} per replica${ttftTarget !== undefined ? ttft : ""}`
  const bound =
    floor === policy.maxReplicas && direction === "up"
      ? ` (at maxReplicas ${policy.maxReplicas})`
      : floor === policy.minReplicas && direction === "down"
        ? ` (at minReplicas ${policy.minReplicas})`
        : ""
  const held_ =
    delayS > 0
      ? `, ${direction === "up" ? "above" : "below"} it for ${Math.round((now - since) / 1000)} s`
      : ""
  return decide(floor, `${load}${held_}: ${current} → ${floor}${bound}`)
}

/** Mean requests in flight, requests answered and the in-flight count now, between the last two samples. */
export function readLoad(
  samples: readonly RouterSample[],
  now: number,
):
  | {
      at: number
      seconds: number
      inFlight: number
      requests: number
      inFlightNow: number
      waiting: number
      ttftP99S?: number
    }
  | undefined {
  const last = samples.at(-1)
  const before = samples.at(-2)
  if (!last || !before || now - last.at > StaleReadingMs) return undefined
  const seconds = (last.at - before.at) / 1000
  if (seconds <= 0) return undefined
  const restarted = last.startedAt !== before.startedAt
  const busy =
    last.busySeconds === undefined
      ? undefined
      : restarted
        ? last.busySeconds
        : Math.max(0, last.busySeconds - (before.busySeconds ?? 0))
  const requests = restarted ? last.requests : Math.max(0, last.requests - before.requests)
  // A router without the integral: the mean of the two instants.
  const inFlight = busy !== undefined ? busy / seconds : (last.inFlight + before.inFlight) / 2
  const ttftP99S = quantile(delta(before, last).firstByteBuckets, 0.99)
  return {
    at: last.at,
    seconds,
    inFlight,
    requests,
    inFlightNow: last.inFlight,
    waiting: last.waiting ?? 0,
    ...(ttftP99S !== undefined ? { ttftP99S } : {}),
  }
}
