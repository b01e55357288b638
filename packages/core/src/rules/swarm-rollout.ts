/**
 * Rolling a swarm's replicas, for backends where swarmplane runs them one by one behind a router of
 * the swarm's own (the router outlives every generation, so the URL never changes). Pure: the pass
 * observes the router and each replica, this plans the next step, the pass applies it.
 *
 * A spec change (a new generation) starts new replicas beside the old, up to `maxSurge` beyond
 * `replicas`; each joins the router once healthy; an old one leaves the router (draining) only while at
 * least `replicas - maxUnavailable` others serve, and is stopped `drainTimeoutS` later, so what it was
 * answering finishes. New replicas that fail while an older generation still serves are taken down
 * and the older one serves on (a rollback, said in `rolledBack`); with nothing else to serve, the swarm
 * is FAILED. The same steps scale a generation up and down.
 */
import type { SwarmPhase } from "../model/states"
import type { ReplicaSet, ReplicaSlot, Swarm } from "../model/swarm"
import { DefaultRollout } from "../model/swarm-fields"
import { replicaGenerationOf } from "./swarm-phase"

/** What the backend sees of one replica. */
export interface ReplicaObservation {
  /**
   * `pending` (not placed), `starting` (placed, not healthy), `ready` (healthy, at `url`), `failed`
   * (will not come up by itself: `detail` says why), `ended` (its process is gone for good, not by a
   * failure), `missing` (nothing of it exists).
   */
  state: "pending" | "starting" | "ready" | "failed" | "ended" | "missing"
  url?: string
  detail?: string
  /** Nothing of it runs any more (a failure that is final, not one it restarts after). */
  over?: boolean
}

/** What the backend sees of the swarm's router (read as a replica is). */
export type RouterObservation = ReplicaObservation

export interface RolloutInput {
  swarm: Swarm
  /** By replica slot; a slot the swarm keeps and the backend has nothing of is `missing`. */
  replicas: ReadonlyMap<number, ReplicaObservation>
  router: RouterObservation
  now: number
  /** The replica count the autoscaler decided, for a swarm with `autoscaling`; else the spec's. */
  target?: number
}

export interface ReplicaItem {
  index: number
  state: string
  url?: string
  message?: string
}

export interface RolloutPlan {
  replicaSet: ReplicaSet
  /** Replicas whose jobs must exist (new ones, and starting ones the backend has nothing of). */
  start: ReplicaSlot[]
  /** Slots whose replicas must be stopped (drained long enough, failed, or the swarm is going). */
  stop: number[]
  /** Whether the swarm's router must run. */
  router: "run" | "stop"
  phase: SwarmPhase
  url?: string
  detail?: string
  /** The generation that serves in full: set once every replica serves it and no other remains. */
  observedGeneration?: number
  /** Nothing of the swarm runs any more (after a delete, a failure or a scale to 0). */
  gone: boolean
  replicaStatus: { ready: number; total: number; items: ReplicaItem[] }
}

const EmptySet: ReplicaSet = { nextSlot: 0, replicas: [] }

const iso = (ms: number) => new Date(ms).toISOString()

/** The next step for a swarm whose backend runs replicas one by one. */
export function planRollout(input: RolloutInput): RolloutPlan {
  const { swarm, now } = input
  const policy = swarm.rollout ?? DefaultRollout
  const set = swarm.replicaSet ?? EmptySet
  // The replica spec the replicas should run: a scale keeps it, so it adds and removes replicas.
  const G = replicaGenerationOf(swarm)
  const going = swarm.desired === "deleted" || swarm.phase === "FAILED"
  const target = going ? 0 : (input.target ?? swarm.replicas)
  // Scaled to zero by the autoscaler, the router stays: it holds requests and wakes the swarm.
  const stopAll = going || (target === 0 && input.target === undefined)
  const observe = (slot: number): ReplicaObservation => input.replicas.get(slot) ?? { state: "missing" }
  const changes: string[] = []
  let rolledBack = set.rolledBack
  let failure: string | undefined

  // 1. Each replica's state from what the backend sees.
  let slots: ReplicaSlot[] = []
  const stop: number[] = []
  const start: ReplicaSlot[] = []
  // A draining replica keeps its `url` while the router may still be answering through it: it is
  // stopped `drainTimeoutS` later. One never in the router, or failed, is stopped at once.
  const drain = (r: ReplicaSlot, why: string, failed = false): ReplicaSlot => {
    changes.push(
      `replica ${r.slot} (generation ${r.generation}) ${r.state === "serving" ? "leaves the router" : "is stopped"}: ${why}`,
    )
    return {
      slot: r.slot,
      generation: r.generation,
      state: "draining",
      since: iso(now),
      ...(r.state === "serving" && r.url && !failed ? { url: r.url } : {}),
    }
  }
  for (const r of set.replicas) {
    const seen = observe(r.slot)
    if (r.state === "draining") {
      if (seen.state === "ended" || seen.state === "missing" || seen.over) continue
      slots.push(r)
      continue
    }
    if (seen.state === "ended" || (seen.state === "missing" && r.state !== "starting")) {
      // Gone without being asked (cancelled outside, or lost): a new replica takes its place below.
      changes.push(`replica ${r.slot} is gone: ${seen.detail ?? seen.state}`)
      continue
    }
    if (seen.state === "failed") {
      if (r.generation === G && !failure) failure = `replica ${r.slot} ${seen.detail ?? "failed"}`
      slots.push(drain(r, `it failed: ${seen.detail ?? "failed"}`, true))
      continue
    }
    if (seen.state === "ready" && seen.url) {
      if (r.state !== "serving")
        changes.push(`replica ${r.slot} (generation ${r.generation}) joins the router`)
      slots.push({
        ...r,
        state: "serving",
        url: seen.url,
        ...(r.state !== "serving" ? { since: iso(now) } : {}),
      })
      continue
    }
    if (seen.state === "missing") {
      // Saved as starting by a pass whose start did not happen: started now (only the current
      // generation's spec is known; an older one's is dropped and replaced by the steps below).
      if (r.generation !== G) continue
      start.push(r)
    }
    slots.push(
      r.state === "serving"
        ? { slot: r.slot, generation: r.generation, state: "starting", since: iso(now) }
        : { ...r },
    )
  }

  // 2. New replicas that failed: back to the generation that served, or the swarm fails.
  const older = () => slots.filter((r) => r.generation !== G && r.state === "serving")
  if (failure && !stopAll) {
    if (older().length > 0) {
      rolledBack = { generation: G, reason: failure }
      slots = slots.map((r) =>
        r.generation === G && r.state !== "draining" ? drain(r, "its update is rolled back") : r,
      )
      changes.push(`generation ${G} rolled back: ${failure}`)
    }
  }
  const failedOutright = !!failure && !rolledBack && !stopAll
  const holdBack = rolledBack?.generation === G

  let nextSlot = set.nextSlot
  if (stopAll || failedOutright) {
    // The router stops too: nothing is left to drain through, so every replica is stopped at once.
    slots = slots.map((r) =>
      r.state === "draining"
        ? { slot: r.slot, generation: r.generation, state: r.state, since: r.since }
        : drain(r, stopAll ? stoppingWhy(swarm) : "the swarm failed", true),
    )
  } else {
    const live = () => slots.filter((r) => r.state !== "draining")
    const current = () => live().filter((r) => r.generation === G)
    const serving = () => live().filter((r) => r.state === "serving").length
    // The generation that should serve: the new one, or (rolled back) the newest one that served.
    const want = holdBack ? Math.max(...older().map((r) => r.generation), 0) : G
    const wanted = () => live().filter((r) => r.generation === want)
    const others = () => live().filter((r) => r.generation !== want)
    // 3. Scale the wanted generation down: the not yet serving first, then the newest.
    while (wanted().length > target) {
      const pick = [...wanted()].sort(
        (a, b) => Number(a.state === "serving") - Number(b.state === "serving") || b.slot - a.slot,
      )[0]!
      slots = slots.map((r) => (r === pick ? drain(r, `scaled to ${target}`) : r))
    }
    // 4. Take other generations out: those not serving at once, a serving one while enough others serve.
    for (const r of [...others()].sort(
      (a, b) => Number(a.state === "serving") - Number(b.state === "serving"),
    )) {
      if (r.state === "serving" && serving() - 1 < target - policy.maxUnavailable) break
      const newReady = wanted().filter((x) => x.state === "serving").length
      if (r.state === "serving" && newReady === 0 && serving() - 1 < 1) break
      slots = slots.map((x) => (x === r ? drain(r, `replaced by generation ${want}`) : x))
    }
    // 5. Start new ones: up to `replicas`, within the surge beyond it.
    if (!holdBack)
      while (current().length < target && live().length < target + policy.maxSurge) {
        const r: ReplicaSlot = { slot: nextSlot++, generation: G, state: "starting", since: iso(now) }
        slots.push(r)
        start.push(r)
        changes.push(
          `replica ${r.slot} (generation ${G}) started${others().length ? `: surge ${live().length - target}/${policy.maxSurge}` : ""}`,
        )
      }
  }

  // 6. Drained long enough, or never serving: stopped.
  for (const r of slots)
    if (r.state === "draining" && (!r.url || now - Date.parse(r.since) >= policy.drainTimeoutS * 1000))
      stop.push(r.slot)

  const replicaSet: ReplicaSet = {
    nextSlot,
    replicas: slots,
    ...(rolledBack && rolledBack.generation === G ? { rolledBack } : {}),
    ...(changes.length
      ? { lastChange: changes.join("; ") }
      : set.lastChange
        ? { lastChange: set.lastChange }
        : {}),
  }
  const items: ReplicaItem[] = slots
    .filter((r) => r.state !== "draining")
    .map((r) => {
      const seen = observe(r.slot)
      return {
        index: r.slot,
        state: r.state === "serving" ? "READY" : seen.state === "pending" ? "PENDING" : "STARTING",
        ...(r.url ? { url: r.url } : {}),
        ...(r.state !== "serving" && seen.detail ? { message: seen.detail } : {}),
      }
    })
  const ready = items.filter((i) => i.state === "READY").length
  const replicaStatus = { ready, total: target, items }
  const nothingLeft = slots.length === 0
  const routerGone = input.router.state === "missing" || input.router.state === "ended" || !!input.router.over
  const router: RolloutPlan["router"] = stopAll || failedOutright ? "stop" : "run"
  const gone = (stopAll || failedOutright) && nothingLeft && routerGone

  const base = { replicaSet, start, stop, router, replicaStatus, gone }
  if (failedOutright) return { ...base, phase: "FAILED", detail: failure }
  if (stopAll)
    return {
      ...base,
      phase:
        swarm.desired === "deleted" || swarm.phase === "FAILED"
          ? swarm.phase
          : nothingLeft
            ? "STOPPED"
            : swarm.phase,
      detail:
        swarm.replicas === 0 && swarm.desired !== "deleted" && swarm.phase !== "FAILED"
          ? "0 replicas: update `replicas` to serve again"
          : nothingLeft
            ? undefined
            : `stopping ${slots.length} replica(s)${routerGone ? "" : " and the router"}`,
    }
  if (input.router.state === "failed")
    return { ...base, phase: "FAILED", detail: `the router: ${input.router.detail ?? "failed"}` }

  const routerReady = input.router.state === "ready" && !!input.router.url
  const currentServing = slots.filter((r) => r.generation === G && r.state === "serving").length
  const otherLive = slots.filter((r) => r.generation !== G && r.state !== "draining").length
  const complete = !holdBack && currentServing >= target && otherLive === 0
  const servedBefore = swarm.phase === "RUNNING"
  if (
    routerReady &&
    (complete || (servedBefore && ready > 0) || (holdBack && ready > 0) || (servedBefore && target === 0))
  ) {
    const detail =
      target === 0
        ? "scaled to zero: the next request wakes a replica"
        : holdBack
          ? `update to generation ${G} rolled back (${rolledBack!.reason}); generation ${Math.max(...slots.filter((r) => r.state === "serving").map((r) => r.generation))} serves`
          : complete
            ? undefined
            : otherLive > 0 || currentServing < target
              ? `updating to generation ${G}: ${currentServing}/${target} new replicas serving${otherLive ? `, ${otherLive} old` : ""}`
              : undefined
    return {
      ...base,
      phase: "RUNNING",
      url: input.router.url,
      ...(detail ? { detail } : {}),
      ...(complete ? { observedGeneration: swarm.generation } : {}),
    }
  }
  const trouble = slots
    .filter((r) => r.state === "starting")
    .map((r) => ({ r, seen: observe(r.slot) }))
    .find(({ seen }) => seen.detail)
  const said = input.router.detail
  const routerTrouble = !routerReady && said ? `; ${said.startsWith("router") ? said : `router ${said}`}` : ""
  const anyStarted =
    input.router.state === "starting" ||
    input.router.state === "ready" ||
    slots.some((r) => observe(r.slot).state === "starting" || r.state === "serving")
  if (anyStarted)
    return {
      ...base,
      phase: "INITIALIZING",
      detail: `${ready}/${target} replicas ready${routerTrouble}${trouble ? `; replica ${trouble.r.slot} ${trouble.seen.detail}` : ""}`,
    }
  return {
    ...base,
    phase: "PENDING",
    ...(trouble?.seen.detail || input.router.detail
      ? { detail: trouble?.seen.detail ?? input.router.detail }
      : {}),
  }
}

function stoppingWhy(swarm: Swarm): string {
  if (swarm.desired === "deleted") return "the swarm is deleted"
  if (swarm.phase === "FAILED") return "the swarm failed"
  return "scaled to 0"
}
