/**
 * `place()` against the rules written plainly: on random snapshots, its ordinary-task assignments
 * equal a direct first-fit (every task scans its job's whole candidate list), so the cursors, skip
 * lists and shared candidate lists change nothing but speed; with gangs and preemption, every
 * placement obeys the invariants validate.py checks.
 */
import { describe, expect, test } from "vitest"
import { holds } from "./constraints"
import { place } from "./place"
import type { Band, Constraint, Op, PlaceOptions, Res, SchedJob, SchedWorker, Snapshot } from "./types"

/** mulberry32: a small seeded generator, so a failure names its seed. */
function rng(seed: number) {
  let a = seed >>> 0
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1))
  const pick = <T>(xs: readonly T[]): T => xs[int(0, xs.length - 1)]!
  return { next, int, pick }
}

const Zones = ["a", "b", "c"] as const
const Ops: Op[] = ["eq", "ne", "exists", "not_exists", "in", "gt", "ge", "lt", "le"]

function randomSnapshot(seed: number, withGangs: boolean): Snapshot {
  const r = rng(seed)
  const res = (cpu: number, memGiB: number, gpu: number): Res => ({
    cpuMillis: cpu * 250,
    memoryBytes: memGiB * 2 ** 30,
    gpu,
    tpu: 0,
  })
  const workers: SchedWorker[] = Array.from({ length: r.int(1, 12) }, (_, i) => {
    const attributes: Record<string, string | number> = { cores: r.pick([4, 8, 16, 32]) }
    if (r.next() < 0.8) attributes.zone = r.pick([...Zones, " A "])
    if (r.next() < 0.4) attributes.accelerator = r.pick(["h100", "A100"])
    if (r.next() < 0.5) attributes.rack = `r${r.int(0, 2)}`
    const running = Array.from({ length: r.int(0, 2) }, (_, k) => ({
      taskId: `run-${i}-${k}`,
      band: r.int(0, 2) as Band,
      resources: res(r.int(0, 8), r.int(0, 8), r.pick([0, 0, 2])),
      building: r.next() < 0.5,
    }))
    return {
      id: `w${i}`,
      capacity: res(r.int(4, 32), r.int(4, 64), r.pick([0, 0, 4, 8])),
      attributes,
      running,
    }
  })
  const constraint = (): Constraint => {
    const op = r.pick(Ops)
    const key = r.pick(["zone", "cores", "accelerator", "rack"])
    const value =
      key === "cores" ? r.pick([8, 16, "16"]) : key === "zone" ? r.pick(Zones) : r.pick(["h100", "r1"])
    return { key, op, values: op === "in" ? [value, r.pick(Zones)] : [value] }
  }
  const jobs = new Map<string, SchedJob>()
  const tasks: Snapshot["tasks"] = []
  for (let j = 0; j < r.int(1, 8); j++) {
    const job: SchedJob = {
      id: `j${j}`,
      band: r.int(0, 2) as Band,
      resources: res(r.int(1, 12), r.int(1, 16), r.pick([0, 0, 0, 1, 4])),
      constraints: Array.from({ length: r.int(0, 2) }, constraint),
      preferences: Array.from({ length: r.int(0, 2) }, () => ({
        constraint: constraint(),
        weight: r.int(1, 3),
      })),
    }
    if (r.next() < 0.2) job.deviceVariant = r.pick(["h100", "a100"])
    if (withGangs && r.next() < 0.3) job.gang = r.next() < 0.7 ? { groupBy: "rack" } : {}
    jobs.set(job.id, job)
    for (let t = 0; t < r.int(1, 6); t++) tasks.push({ id: `j${j}/${t}`, jobId: job.id })
  }
  for (let i = tasks.length - 1; i > 0; i--) {
    const k = r.int(0, i)
    ;[tasks[i], tasks[k]] = [tasks[k]!, tasks[i]!]
  }
  return { workers, jobs, tasks }
}

const variantOk = (w: SchedWorker, v: string | undefined) =>
  v === undefined ||
  ["accelerator", "device-variant"].some(
    (k) => Object.hasOwn(w.attributes, k) && String(w.attributes[k]).trim().toLowerCase() === v.toLowerCase(),
  )

/** The rules, plainly: band order, per-job candidates by score, first fit from the start, skip a failed job. */
function reference(s: Snapshot, o: PlaceOptions) {
  const free = s.workers.map((w) => {
    const f = { ...w.capacity }
    for (const t of w.running) {
      f.cpuMillis -= t.resources.cpuMillis
      f.memoryBytes -= t.resources.memoryBytes
      f.gpu -= t.resources.gpu
      f.tpu -= t.resources.tpu
    }
    return f
  })
  const added = s.workers.map(() => 0)
  const building = s.workers.map((w) => w.running.filter((t) => t.building).length)
  const ordered = [0, 1, 2].flatMap((b) => s.tasks.filter((t) => s.jobs.get(t.jobId)?.band === b))
  const failed = new Set<string>()
  const out: { taskId: string; workerId: string }[] = []
  for (const task of ordered) {
    const job = s.jobs.get(task.jobId)!
    if (failed.has(job.id)) continue
    const score = (w: SchedWorker) =>
      job.preferences.reduce((sum, p) => sum + (holds(w.attributes, p.constraint) ? p.weight : 0), 0)
    const cands = s.workers
      .map((w, i) => ({ w, i }))
      .filter(
        ({ w }) => job.constraints.every((c) => holds(w.attributes, c)) && variantOk(w, job.deviceVariant),
      )
      .sort((a, b) => score(b.w) - score(a.w))
    const r = job.resources
    const hit = cands.find(
      ({ i }) =>
        free[i]!.cpuMillis >= r.cpuMillis &&
        free[i]!.memoryBytes >= r.memoryBytes &&
        free[i]!.gpu >= r.gpu &&
        free[i]!.tpu >= r.tpu &&
        added[i]! < (o.maxAssignmentsPerWorker ?? Number.POSITIVE_INFINITY) &&
        building[i]! < (o.maxBuildingPerWorker ?? Number.POSITIVE_INFINITY),
    )
    if (!hit) {
      failed.add(job.id)
      continue
    }
    const f = free[hit.i]!
    f.cpuMillis -= r.cpuMillis
    f.memoryBytes -= r.memoryBytes
    f.gpu -= r.gpu
    f.tpu -= r.tpu
    added[hit.i]!++
    building[hit.i]!++
    out.push({ taskId: task.id, workerId: hit.w.id })
  }
  return out
}

const optionsFor = (seed: number): PlaceOptions =>
  [
    {},
    { maxAssignmentsPerWorker: 2 },
    { maxBuildingPerWorker: 3 },
    { maxAssignmentsPerWorker: 1, maxBuildingPerWorker: 2 },
  ][seed % 4]!

describe("same assignments as the plain rules", () => {
  for (let seed = 1; seed <= 400; seed++)
    test(`seed ${seed}`, () => {
      const s = randomSnapshot(seed, false)
      const o = optionsFor(seed)
      expect(place(s, o).assignments).toEqual(reference(s, o))
    })
})

describe("invariants with gangs and preemption", () => {
  for (let seed = 1; seed <= 300; seed++)
    test(`seed ${seed}`, () => {
      const s = randomSnapshot(seed, true)
      const o = { ...optionsFor(seed), preemption: seed % 2 === 0 }
      const p = place(s, o)
      const byId = new Map(s.workers.map((w) => [w.id, w]))
      const jobOf = (taskId: string) => s.jobs.get(s.tasks.find((t) => t.id === taskId)!.jobId)!
      const evicted = new Set(p.preemptions.map((e) => e.taskId))
      // Every task is either assigned once or pending with a reason.
      expect(p.assignments.length + p.pending.size).toBe(s.tasks.length)
      for (const t of s.tasks)
        expect(p.assignments.some((a) => a.taskId === t.id) !== p.pending.has(t.id)).toBe(true)
      for (const reason of p.pending.values()) expect(reason.length).toBeGreaterThan(0)
      // Resources, constraints, variant and caps per worker.
      for (const w of s.workers) {
        const mine = p.assignments.filter((a) => a.workerId === w.id)
        const kept = w.running.filter((t) => !evicted.has(t.taskId))
        for (const k of ["cpuMillis", "memoryBytes", "gpu", "tpu"] as const) {
          const used = [...kept.map((t) => t.resources[k]), ...mine.map((a) => jobOf(a.taskId).resources[k])]
          if (mine.length > 0) expect(used.reduce((x, y) => x + y, 0)).toBeLessThanOrEqual(w.capacity[k])
        }
        expect(mine.length).toBeLessThanOrEqual(o.maxAssignmentsPerWorker ?? Number.POSITIVE_INFINITY)
        const buildingNow = kept.filter((t) => t.building).length + mine.length
        if (mine.length > 0)
          expect(buildingNow).toBeLessThanOrEqual(o.maxBuildingPerWorker ?? Number.POSITIVE_INFINITY)
        for (const a of mine) {
          const job = jobOf(a.taskId)
          for (const c of job.constraints) expect(holds(w.attributes, c)).toBe(true)
          expect(variantOk(w, job.deviceVariant)).toBe(true)
        }
      }
      // Preemption only of strictly lower priority, only when enabled.
      if (!o.preemption) expect(p.preemptions).toEqual([])
      for (const e of p.preemptions) {
        const victim = byId.get(e.workerId)!.running.find((t) => t.taskId === e.taskId)!
        expect(victim.band).toBeGreaterThan(jobOf(e.forTaskId).band)
      }
      // Gangs: all or nothing, distinct workers, one group value.
      for (const job of s.jobs.values()) {
        if (!job.gang) continue
        const mine = p.assignments.filter((a) => jobOf(a.taskId).id === job.id)
        if (mine.length === 0) continue
        expect(mine.length).toBe(s.tasks.filter((t) => t.jobId === job.id).length)
        expect(new Set(mine.map((a) => a.workerId)).size).toBe(mine.length)
        const groupBy = job.gang.groupBy
        if (groupBy !== undefined) {
          const values = new Set(mine.map((a) => String(byId.get(a.workerId)!.attributes[groupBy])))
          expect([...values].length).toBe(1)
          expect(values.has("undefined")).toBe(false)
        }
      }
    })
})
