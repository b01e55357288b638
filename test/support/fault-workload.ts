/**
 * What a randomized fault run injects and runs: the fault plan of each profile, and the job mix the
 * simulated users submit (each job's environment tells the simulated workers what its tasks do).
 */
import type { Job } from "@swarmplane/core/model/job"
import type { FaultPlan, FaultRule, Rng } from "./faults"

/**
 * Which faults a run injects. `full`: every kind at every point; `before`: the same without
 * `error-after` (no write lands unseen); `none`: only the overlapping passes and the duplicates that
 * SQS and two tickers make anyway.
 */
export const Profiles = ["full", "before", "none"] as const
export type Profile = (typeof Profiles)[number]

/** The fault plan of a profile, each rate times `scale`. */
export function faultPlan(seed: number, profile: Profile, scale = 1): FaultPlan {
  const r = (rate: number) => Math.min(1, rate * scale)
  const writes = /^store\.(create|createMany|update|delete)$/
  const rules: FaultRule[] = [
    { point: "queue.receive", kind: "duplicate", rate: 0.15 },
    { point: "queue.send", kind: "duplicate", rate: 0.1 },
  ]
  if (profile === "none") return { seed, rules }
  rules.push(
    { point: "store.*", kind: "race", rate: r(0.02) },
    { point: "store.*", kind: "error", rate: r(0.01) },
    { point: "store.*", kind: "hang", rate: r(0.0005), hangMs: [5_000, 90_000] },
    { point: "queue.*", kind: "error", rate: r(0.05) },
    { point: "queue.*", kind: "hang", rate: r(0.005), hangMs: [5_000, 60_000] },
    { point: "backend.*", kind: "error", rate: r(0.03) },
    { point: "backend.*", kind: "hang", rate: r(0.01), hangMs: [5_000, 90_000] },
  )
  if (profile === "full")
    rules.push(
      { point: writes, kind: "error-after", rate: r(0.005) },
      { point: "queue.*", kind: "error-after", rate: r(0.05) },
      { point: "backend.*", kind: "error-after", rate: r(0.03) },
    )
  return { seed, rules }
}

export type Kind = "ok" | "flaky" | "failing" | "cancel" | "gang"

export interface Planned {
  n: number
  kind: Kind
  arrivalMs: number
  body: Record<string, unknown>
  cancelAfterMs?: number
  expect?: Job["status"]
}

/** The job mix: mostly quick single and multi-task jobs, retried failures, cancels and a few gangs. */
export function jobMix(rng: Rng, count: number, arrivalMs: number, preemption: boolean): Planned[] {
  const kinds: [Kind, number][] = [
    ["ok", 0.5],
    ["flaky", 0.2],
    ["failing", 0.1],
    ["cancel", 0.12],
    ["gang", 0.08],
  ]
  return Array.from({ length: count }, (_, n) => {
    let pick = rng.next()
    let kind: Kind = "ok"
    for (const [k, p] of kinds) {
      if (pick < p) {
        kind = k
        break
      }
      pick -= p
    }
    const ms = rng.int(2, 25) * 1000
    const base = {
      backendId: "pool",
      name: `sim-${kind}-${n}`,
      command: ["sim-task"],
      resources: { cpu: 1, memoryMiB: 256, gpu: 0 },
      ...(preemption && rng.chance(0.15) ? { priority: "interactive" } : {}),
    }
    // Every job arrives at its own millisecond: ids made from the same time would sort at random.
    const spacing = Math.max(1, Math.floor(arrivalMs / count))
    const at = n * spacing + rng.int(0, spacing - 1)
    const shape: Record<Kind, () => Pick<Planned, "expect" | "body" | "cancelAfterMs">> = {
      ok: () => ({ expect: "SUCCEEDED", body: { ...base, tasks: rng.int(1, 4), env: env(ms) } }),
      flaky: () => {
        const retries = rng.int(1, 3)
        const body = {
          ...base,
          tasks: rng.int(1, 3),
          maxRetriesFailure: retries,
          env: env(ms, rng.int(1, retries)),
        }
        return { expect: "SUCCEEDED", body }
      },
      failing: () => ({
        expect: "FAILED",
        body: { ...base, tasks: rng.int(1, 2), maxRetriesFailure: rng.int(0, 2), env: env(ms, 1000, 3) },
      }),
      cancel: () => ({
        expect: "CANCELLED",
        cancelAfterMs: rng.int(1, 60) * 1000,
        body: { ...base, tasks: rng.int(1, 3), env: env(rng.int(120, 300) * 1000) },
      }),
      gang: () => ({
        expect: "SUCCEEDED",
        body: {
          ...base,
          tasks: rng.int(2, 3),
          coscheduling: {},
          maxRetriesFailure: 1,
          env: env(ms, rng.chance(0.5) ? 1 : 0),
        },
      }),
    }
    return { n, kind, arrivalMs: at, ...shape[kind]() }
  })
}

/** What a simulated task does, in its environment: run `ms`, fail its first `failRuns` runs with `exit`. */
const env = (ms: number, failRuns = 0, exit = 1) => ({
  SIM_MS: String(ms),
  SIM_FAIL_RUNS: String(failRuns),
  SIM_EXIT: String(exit),
})
