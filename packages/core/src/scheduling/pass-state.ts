/**
 * The mutable state of one placement pass: each worker's free resources and per-pass cap counters, in
 * flat typed arrays indexed by worker position so the first-fit loop touches no objects or maps.
 * Within a pass (before any preemption) free resources only shrink and counters only grow; the
 * placement loop relies on that monotonicity to never look at a rejected worker twice for a job.
 */
import type { PlaceOptions, Res, SchedWorker } from "./types"

/** What one task needs, copied out of `Res` once per job. */
export interface Need {
  cpu: number
  mem: number
  gpu: number
  tpu: number
}

export function needOf(r: Res): Need {
  return { cpu: r.cpuMillis, mem: r.memoryBytes, gpu: r.gpu, tpu: r.tpu }
}

export interface PassState {
  workers: SchedWorker[]
  /** Free = capacity − running − this pass's assignments (+ evicted). Float64: bytes stay exact. */
  cpu: Float64Array
  mem: Float64Array
  gpu: Float64Array
  tpu: Float64Array
  /** New assignments this pass, per worker. */
  added: Int32Array
  /** Running tasks still building plus this pass's assignments, per worker. */
  building: Int32Array
  maxAdded: number
  maxBuilding: number
}

export function newPassState(workers: SchedWorker[], options: PlaceOptions): PassState {
  const n = workers.length
  const s: PassState = {
    workers,
    cpu: new Float64Array(n),
    mem: new Float64Array(n),
    gpu: new Float64Array(n),
    tpu: new Float64Array(n),
    added: new Int32Array(n),
    building: new Int32Array(n),
    maxAdded: options.maxAssignmentsPerWorker ?? Number.POSITIVE_INFINITY,
    maxBuilding: options.maxBuildingPerWorker ?? Number.POSITIVE_INFINITY,
  }
  for (let w = 0; w < n; w++) {
    const worker = workers[w]!
    let { cpuMillis: cpu, memoryBytes: mem, gpu, tpu } = worker.capacity
    let building = 0
    for (const t of worker.running) {
      cpu -= t.resources.cpuMillis
      mem -= t.resources.memoryBytes
      gpu -= t.resources.gpu
      tpu -= t.resources.tpu
      if (t.building) building++
    }
    s.cpu[w] = cpu
    s.mem[w] = mem
    s.gpu[w] = gpu
    s.tpu[w] = tpu
    s.building[w] = building
  }
  return s
}

/** The worker may still take a task this pass (both caps). */
export function underCaps(s: PassState, w: number): boolean {
  return s.added[w]! < s.maxAdded && s.building[w]! < s.maxBuilding
}

/** Free resources cover `n` on every dimension (a zero need still fails on an over-committed worker). */
export function hasRoom(s: PassState, w: number, n: Need): boolean {
  return s.cpu[w]! >= n.cpu && s.mem[w]! >= n.mem && s.gpu[w]! >= n.gpu && s.tpu[w]! >= n.tpu
}

export function fits(s: PassState, w: number, n: Need): boolean {
  return hasRoom(s, w, n) && underCaps(s, w)
}

/** Record one new assignment of a task needing `n` on worker `w`. */
export function take(s: PassState, w: number, n: Need): void {
  s.cpu[w] = s.cpu[w]! - n.cpu
  s.mem[w] = s.mem[w]! - n.mem
  s.gpu[w] = s.gpu[w]! - n.gpu
  s.tpu[w] = s.tpu[w]! - n.tpu
  s.added[w] = s.added[w]! + 1
  s.building[w] = s.building[w]! + 1
}

/** Give back what an evicted running task held. */
export function release(s: PassState, w: number, r: Res, building: boolean): void {
  s.cpu[w] = s.cpu[w]! + r.cpuMillis
  s.mem[w] = s.mem[w]! + r.memoryBytes
  s.gpu[w] = s.gpu[w]! + r.gpu
  s.tpu[w] = s.tpu[w]! + r.tpu
  if (building) s.building[w] = s.building[w]! - 1
}
