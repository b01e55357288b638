/**
 * Preemption: for a task that fits nowhere, find the worker where evicting running tasks of strictly
 * lower priority (a higher band number) makes room, needing the fewest victims and, among equals, the
 * lowest-priority ones. Equal or higher bands are never touched, nor tasks placed in this pass.
 */
import { type Need, type PassState, underCaps } from "./pass-state"
import type { Band, RunningTask } from "./types"

export interface Eviction {
  worker: number
  victims: RunningTask[]
}

/** The best eviction among `candidates` for a band-`band` task needing `need`, if any makes room. */
export function findEviction(
  s: PassState,
  candidates: Int32Array,
  need: Need,
  band: Band,
  evicted: ReadonlySet<RunningTask>,
): Eviction | undefined {
  let best: Eviction | undefined
  let bestCost = Number.POSITIVE_INFINITY
  for (const w of candidates) {
    if (!underCaps(s, w)) continue
    const victims = victimsOn(s, w, need, band, evicted)
    if (!victims) continue
    // Fewest victims first; then the sum of their priorities (batch 1, interactive 2, production 3).
    const cost = victims.length * 100 + victims.reduce((sum, t) => sum + (3 - t.band), 0)
    if (cost < bestCost) {
      best = { worker: w, victims }
      bestCost = cost
    }
  }
  return best
}

/** What is still missing on worker `w` per dimension, given the extra room `freed` would give. */
function deficit(s: PassState, w: number, need: Need, freed: Need): Need {
  return {
    cpu: Math.max(0, need.cpu - s.cpu[w]! - freed.cpu),
    mem: Math.max(0, need.mem - s.mem[w]! - freed.mem),
    gpu: Math.max(0, need.gpu - s.gpu[w]! - freed.gpu),
    tpu: Math.max(0, need.tpu - s.tpu[w]! - freed.tpu),
  }
}

const covered = (d: Need) => d.cpu === 0 && d.mem === 0 && d.gpu === 0 && d.tpu === 0

/** How much of the deficit `t` would cover, each short dimension weighted equally. */
function gain(t: RunningTask, d: Need): number {
  const r = t.resources
  let g = 0
  if (d.cpu > 0) g += Math.min(r.cpuMillis, d.cpu) / d.cpu
  if (d.mem > 0) g += Math.min(r.memoryBytes, d.mem) / d.mem
  if (d.gpu > 0) g += Math.min(r.gpu, d.gpu) / d.gpu
  if (d.tpu > 0) g += Math.min(r.tpu, d.tpu) / d.tpu
  return g
}

function add(freed: Need, t: RunningTask, sign: 1 | -1): void {
  freed.cpu += sign * t.resources.cpuMillis
  freed.mem += sign * t.resources.memoryBytes
  freed.gpu += sign * t.resources.gpu
  freed.tpu += sign * t.resources.tpu
}

/**
 * A small victim set on one worker, or undefined when even evicting every lower-band task would not
 * make room. Greedy (largest share of the remaining deficit, lower priority on ties), then pruned of
 * victims that turn out unnecessary, highest priority first.
 */
function victimsOn(
  s: PassState,
  w: number,
  need: Need,
  band: Band,
  evicted: ReadonlySet<RunningTask>,
): RunningTask[] | undefined {
  const pool = s.workers[w]!.running.filter((t) => t.band > band && !evicted.has(t))
  if (pool.length === 0) return undefined
  const all: Need = { cpu: 0, mem: 0, gpu: 0, tpu: 0 }
  for (const t of pool) add(all, t, 1)
  if (!covered(deficit(s, w, need, all))) return undefined

  const freed: Need = { cpu: 0, mem: 0, gpu: 0, tpu: 0 }
  const chosen: RunningTask[] = []
  let left = pool
  let d = deficit(s, w, need, freed)
  while (!covered(d)) {
    let pick = left[0]!
    let pickGain = gain(pick, d)
    for (const t of left) {
      const g = gain(t, d)
      if (g > pickGain || (g === pickGain && t.band > pick.band)) {
        pick = t
        pickGain = g
      }
    }
    chosen.push(pick)
    add(freed, pick, 1)
    left = left.filter((t) => t !== pick)
    d = deficit(s, w, need, freed)
  }
  // Greedy may over-pick; drop victims that are not needed, sparing higher priorities first.
  for (const t of [...chosen].sort((a, b) => a.band - b.band)) {
    add(freed, t, -1)
    if (covered(deficit(s, w, need, freed))) chosen.splice(chosen.indexOf(t), 1)
    else add(freed, t, 1)
  }
  return chosen
}
