/**
 * Pending reasons: why a job's task was not placed, in words that say what to change (`needs 8 gpu,
 * largest free is 4`, `no worker matches constraint accelerator eq h100`). Computed once per job (or
 * once per shared candidate list) after placement, never per task × worker.
 */
import type { CandidateIndex, Requirement } from "./candidates"
import { hasRoom, type Need, type PassState, underCaps } from "./pass-state"

const GiB = 1024 ** 3

/** Up to 2 decimals, without trailing zeros: 0.25, 1.5, 64. */
const num = (x: number) => String(Math.round(x * 100) / 100)

/** Amounts as users write them: cores, GiB, counts. `largest free is 8` reads without repeating the noun. */
const Dims = [
  { key: "cpu", noun: "cpu", amount: (v: number) => num(v / 1000) },
  { key: "mem", noun: "memory", amount: (v: number) => `${num(v / GiB)} GiB` },
  { key: "gpu", noun: "gpu", amount: (v: number) => num(v) },
  { key: "tpu", noun: "tpu", amount: (v: number) => num(v) },
] as const

const show = (d: (typeof Dims)[number], v: number) => `${d.amount(v)} ${d.noun}`

/** The largest value of each free dimension over a set of workers (each dimension on its own). */
type MaxFree = Record<(typeof Dims)[number]["key"], number>

/** Why no worker passes the job's hard constraints and device variant. */
export function explainNoCandidates(ix: CandidateIndex, req: Requirement): string {
  if (req.variant !== undefined && ix.variantCount(req.variant) === 0)
    return `needs device variant ${req.variant}: no such worker`
  for (const c of req.hard) if (ix.matchCount(c) === 0) return `no worker matches constraint ${c.label}`
  const parts = req.hard.map((c) => c.label)
  if (req.variant !== undefined) parts.unshift(`device variant ${req.variant}`)
  return `no worker matches all of: ${parts.join(", ")}`
}

/**
 * Explains unplaced jobs against the current pass state. One explainer per state snapshot: it
 * caches the largest free resources per candidate list, which only holds while the state is still.
 * `revived`: evictions gave workers back room during the pass, so a job that gave up may fit now.
 */
export function explainer(s: PassState, ix: CandidateIndex, revived = false) {
  const maxFree = new Map<string, MaxFree>()

  const maxFreeOf = (req: Requirement): MaxFree => {
    let m = maxFree.get(req.key)
    if (!m) {
      m = { cpu: 0, mem: 0, gpu: 0, tpu: 0 }
      for (const w of req.workers) {
        m.cpu = Math.max(m.cpu, s.cpu[w]!)
        m.mem = Math.max(m.mem, s.mem[w]!)
        m.gpu = Math.max(m.gpu, s.gpu[w]!)
        m.tpu = Math.max(m.tpu, s.tpu[w]!)
      }
      maxFree.set(req.key, m)
    }
    return m
  }

  const capsText = () => {
    const caps: string[] = []
    if (Number.isFinite(s.maxAdded)) caps.push(`${s.maxAdded} new`)
    if (Number.isFinite(s.maxBuilding)) caps.push(`${s.maxBuilding} building`)
    return caps.join(", ")
  }

  /** Why a task needing `need` fits none of `req`'s workers now. */
  const explain = (req: Requirement, need: Need): string => {
    if (req.workers.length === 0) return explainNoCandidates(ix, req)
    const m = maxFreeOf(req)
    const short = Dims.filter((d) => need[d.key] > m[d.key]).map(
      (d) => `needs ${show(d, need[d.key])}, largest free is ${d.amount(Math.max(0, m[d.key]))}`,
    )
    if (short.length > 0) return short.join("; ")
    let capped = false
    // A worker with room is capped (the job was exhausted, and the pass state only shrinks), unless
    // evictions freed room after the job gave up: only then is a full scan worth it.
    for (const w of req.workers) {
      if (!hasRoom(s, w, need)) continue
      if (underCaps(s, w)) return "fits now: will be placed in the next pass"
      if (!revived)
        return `worker caps reached this pass (${capsText()} per worker) on every matching worker with room`
      capped = true
    }
    if (capped)
      return `worker caps reached this pass (${capsText()} per worker) on every matching worker with room`
    const asked = Dims.filter((d) => need[d.key] > 0)
    return (
      `needs ${asked.map((d) => show(d, need[d.key])).join(" + ")} on one worker: ` +
      `no matching worker has all of it free (largest free: ${asked.map((d) => show(d, Math.max(0, m[d.key]))).join(", ")})`
    )
  }

  /** Why a gang of `size` tasks found no group with enough fitting workers. */
  const explainGang = (
    req: Requirement,
    need: Need,
    size: number,
    groupBy: string | undefined,
    groups: Int32Array[],
    bestFitting: number,
  ): string => {
    const head = `gang of ${size}${groupBy === undefined ? "" : ` by ${groupBy}`}`
    if (req.workers.length === 0) return `${head}: ${explainNoCandidates(ix, req)}`
    if (groups.length === 0) return `${head}: no matching worker has attribute ${groupBy}`
    const largest = groups.reduce((max, g) => Math.max(max, g.length), 0)
    if (largest < size)
      return groupBy === undefined
        ? `${head}: only ${largest} matching workers`
        : `${head}: largest group has ${largest} matching workers`
    const what =
      groupBy === undefined
        ? `${head}: only ${bestFitting} fitting workers`
        : `${head}: largest group has ${bestFitting} fitting workers`
    // With no fitting worker at all, the single-task explanation names the missing resource or cap.
    return bestFitting === 0 ? `${what} (${explain(req, need)})` : what
  }

  return { explain, explainGang }
}
