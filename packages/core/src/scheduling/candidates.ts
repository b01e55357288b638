/**
 * Which workers a job may use, and in which order it tries them. Built once per pass from the
 * snapshot's workers: each attribute a constraint mentions is normalised once into a column, each
 * distinct constraint becomes a worker mask, and jobs with equal hard constraints, device variant
 * and preferences share one candidate list (most jobs of a workload share a handful of them).
 */
import { attrOf, type CompiledConstraint, compileConstraint, type Norm } from "./constraints"
import type { SchedJob, SchedWorker } from "./types"

/** Worker attributes a `deviceVariant` is matched against, in this order. */
export const VariantAttributes = ["accelerator", "device-variant"] as const

/** Within a gang's group, tasks go to workers in this attribute's order (Iris: TPU VM index in its slice). */
const GangOrderAttribute = "tpu-worker-id"

export interface Requirement {
  key: string
  hard: CompiledConstraint[]
  /** Normalised device variant, when the job names one. */
  variant: string | undefined
  /** Worker positions passing every hard constraint and the variant: score descending, then worker order. */
  workers: Int32Array
  /** Soft score per worker position (all zero without preferences). */
  score: Float64Array
}

export interface CandidateIndex {
  requirement(job: SchedJob): Requirement
  /** Candidate workers grouped by the normalised value of `groupBy`, best group first (see `groups`). */
  groups(req: Requirement, groupBy: string): Int32Array[]
  /** How many workers satisfy `c` on its own. */
  matchCount(c: CompiledConstraint): number
  /** How many workers carry `variant` (normalised). */
  variantCount(variant: string): number
}

export function candidateIndex(workers: SchedWorker[]): CandidateIndex {
  const n = workers.length
  const columns = new Map<string, Norm[]>()
  const masks = new Map<string, { mask: Uint8Array; count: number }>()
  const variants = new Map<string, { mask: Uint8Array; count: number }>()
  const requirements = new Map<string, Requirement>()
  const grouped = new Map<string, Int32Array[]>()

  const column = (key: string): Norm[] => {
    let col = columns.get(key)
    if (!col) {
      col = workers.map((w) => attrOf(w.attributes, key))
      columns.set(key, col)
    }
    return col
  }

  const maskOf = (c: CompiledConstraint) => {
    let m = masks.get(c.id)
    if (!m) {
      const col = column(c.key)
      const mask = new Uint8Array(n)
      let count = 0
      for (let w = 0; w < n; w++) {
        if (!c.test(col[w])) continue
        mask[w] = 1
        count++
      }
      m = { mask, count }
      masks.set(c.id, m)
    }
    return m
  }

  const variantOf = (variant: string) => {
    let m = variants.get(variant)
    if (!m) {
      const cols = VariantAttributes.map(column)
      const mask = new Uint8Array(n)
      let count = 0
      for (let w = 0; w < n; w++) {
        if (!cols.some((col) => col[w] !== undefined && String(col[w]) === variant)) continue
        mask[w] = 1
        count++
      }
      m = { mask, count }
      variants.set(variant, m)
    }
    return m
  }

  // Shared by every requirement without preferences; never written.
  const zeros = new Float64Array(n)

  const build = (
    key: string,
    hard: CompiledConstraint[],
    variant: string | undefined,
    prefs: { c: CompiledConstraint; weight: number }[],
  ): Requirement => {
    const ok = new Uint8Array(n).fill(1)
    const hardMasks = hard.map((c) => maskOf(c).mask)
    if (variant !== undefined) hardMasks.push(variantOf(variant).mask)
    for (const m of hardMasks) for (let w = 0; w < n; w++) ok[w] = ok[w]! & m[w]!
    if (prefs.length === 0) {
      const list: number[] = []
      for (let w = 0; w < n; w++) if (ok[w]) list.push(w)
      return { key, hard, variant, workers: Int32Array.from(list), score: zeros }
    }
    const score = new Float64Array(n)
    for (const p of prefs) {
      const m = maskOf(p.c).mask
      for (let w = 0; w < n; w++) if (ok[w] && m[w]) score[w] = score[w]! + p.weight
    }
    // Higher score first, ties in worker order. Usually few distinct scores: one bucket scan each.
    const distinct = new Set<number>()
    for (let w = 0; w < n; w++) if (ok[w]) distinct.add(score[w]!)
    const list: number[] = []
    if (distinct.size > 8) {
      for (let w = 0; w < n; w++) if (ok[w]) list.push(w)
      list.sort((a, b) => score[b]! - score[a]! || a - b)
    } else
      for (const v of [...distinct].sort((a, b) => b - a))
        for (let w = 0; w < n; w++) if (ok[w] && score[w] === v) list.push(w)
    return { key, hard, variant, workers: Int32Array.from(list), score }
  }

  return {
    requirement(job) {
      const hard = job.constraints.map(compileConstraint)
      const prefs = job.preferences.map((p) => ({ c: compileConstraint(p.constraint), weight: p.weight }))
      const variant = job.deviceVariant?.trim().toLowerCase() || undefined
      const key = [
        hard
          .map((c) => c.id)
          .sort()
          .join("\u0001"),
        variant ?? "",
        prefs.map((p) => `${p.c.id}\u0003${p.weight}`).join("\u0001"),
      ].join("\u0002")
      let req = requirements.get(key)
      if (!req) {
        req = build(key, hard, variant, prefs)
        requirements.set(key, req)
      }
      return req
    },

    groups(req, groupBy) {
      const cacheKey = `${req.key}\u0004${groupBy}`
      const cached = grouped.get(cacheKey)
      if (cached) return cached
      const col = column(groupBy)
      const order = column(GangOrderAttribute)
      const byValue = new Map<string, number[]>()
      // Groups are met in worker order so that equal scores keep a deterministic, input-given order.
      const members = Array.from(req.workers).sort((a, b) => a - b)
      for (const w of members) {
        const v = col[w]
        if (v === undefined) continue // a worker without the attribute belongs to no group
        const k = String(v)
        const g = byValue.get(k)
        if (g) g.push(w)
        else byValue.set(k, [w])
      }
      const rank = (w: number) => {
        const o = order[w]
        return typeof o === "number" ? o : Number.POSITIVE_INFINITY
      }
      const total = (g: number[]) => g.reduce((sum, w) => sum + req.score[w]!, 0)
      const groups = [...byValue.values()]
        .map((g) => ({
          g: g.sort((a, b) => req.score[b]! - req.score[a]! || rank(a) - rank(b) || a - b),
          t: total(g),
        }))
        .sort((a, b) => b.t - a.t)
        .map(({ g }) => Int32Array.from(g))
      grouped.set(cacheKey, groups)
      return groups
    },

    matchCount: (c) => maskOf(c).count,
    variantCount: (v) => variantOf(v).count,
  }
}
