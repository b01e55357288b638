/**
 * The scheduler: `place(snapshot, options)` decides which pending task goes on which worker in one
 * pass. Pure: it reads only the snapshot and returns assignments, preemptions and pending reasons.
 *
 * Iris's rules, kept: gangs first, then ordinary tasks by band, first-fit over each job's candidates
 * (hard constraints filter, preferences order), no head-of-line blocking, and once a job's task
 * fails to fit the job's remaining (identical) tasks are skipped for the pass. What makes it fast:
 * candidate lists are built once per distinct requirement over bitmasks, free capacity lives in
 * typed arrays, and each job keeps a cursor into its candidate list — since free capacity only
 * shrinks and cap counters only grow during the pass, a worker that rejected a job never gets a
 * second look from it, so first-fit costs O(candidates) per job instead of per task. Workers that no
 * job of a candidate list can use any more (capped, or with less free than the smallest of those
 * jobs needs) are spliced out of that list for everyone, so full workers cost nothing per job.
 */
import { candidateIndex, type Requirement } from "./candidates"
import { placeGang } from "./gangs"
import { fits, type Need, needOf, newPassState, type PassState, release, take, underCaps } from "./pass-state"
import { findEviction } from "./preempt"
import { explainer } from "./reasons"
import type { Placement, PlaceOptions, RunningTask, SchedJob, SchedTask, Snapshot } from "./types"

/** Per-job state for one pass. */
interface JobRun {
  job: SchedJob
  req: Requirement
  need: Need
  /** Next candidate position that may still fit (every earlier one has rejected this job). */
  cursor: number
  /** A task failed to fit: the job's remaining tasks would too. */
  exhausted: boolean
  /** Gangs only: the job's pending tasks, in order. */
  gangTasks: SchedTask[]
  /** Ordinary jobs: the skip list shared with the other jobs of the same requirement. */
  lane: Lane | undefined
}

/**
 * A requirement's candidate positions, with dead ones skipped: `next[p] === p` while position p may
 * still serve a job of this requirement, otherwise it points further on (union-find with path
 * halving; `next[length]` is the end). Dead = capped, or below `floor` — the smallest need of the
 * requirement's jobs in every dimension — which stays true for the rest of the pass.
 */
interface Lane {
  next: Int32Array
  floor: Need
}

/** First live position at or after `p`. */
function live(next: Int32Array, p: number): number {
  for (;;) {
    const q = next[p]!
    if (q === p) return p
    const r = next[q]!
    next[p] = r
    p = r
  }
}

function dead(s: PassState, w: number, floor: Need): boolean {
  return (
    !underCaps(s, w) ||
    s.cpu[w]! < floor.cpu ||
    s.mem[w]! < floor.mem ||
    s.gpu[w]! < floor.gpu ||
    s.tpu[w]! < floor.tpu
  )
}

export function place(snapshot: Snapshot, options: PlaceOptions = {}): Placement {
  const s = newPassState(snapshot.workers, options)
  const ix = candidateIndex(snapshot.workers)
  const placement: Placement = {
    assignments: [],
    preemptions: [],
    pending: new Map(),
    stats: { tasksPlaced: 0, gangsPlaced: 0, gangsUnplaced: 0 },
  }
  const { assignments, pending, stats } = placement
  const workerId = (w: number) => snapshot.workers[w]!.id

  // 1. Group tasks by job; split gangs (by band, then first appearance) from ordinary tasks (by band, stable).
  const runs = new Map<string, JobRun>()
  const lanes = new Map<Requirement, Lane>()
  const gangs: JobRun[][] = [[], [], []]
  const tasks: SchedTask[][] = [[], [], []]
  const taskRuns: JobRun[][] = [[], [], []]
  for (const task of snapshot.tasks) {
    let run = runs.get(task.jobId)
    if (!run) {
      const job = snapshot.jobs.get(task.jobId)
      if (!job) {
        pending.set(task.id, `unknown job ${task.jobId}`)
        continue
      }
      const req = ix.requirement(job)
      const need = needOf(job.resources)
      run = { job, req, need, cursor: 0, exhausted: false, gangTasks: [], lane: undefined }
      runs.set(task.jobId, run)
      if (job.gang) gangs[job.band]!.push(run)
      else run.lane = laneFor(lanes, req, need)
    }
    if (run.job.gang) run.gangTasks.push(task)
    else {
      tasks[run.job.band]!.push(task)
      taskRuns[run.job.band]!.push(run)
    }
  }
  const order = ([] as SchedTask[]).concat(...tasks)
  const orderRuns = ([] as JobRun[]).concat(...taskRuns)

  // 2. Gangs, all or nothing.
  for (const run of ([] as JobRun[]).concat(...gangs)) {
    const result = placeGang(s, ix, run.job, run.req, run.need, run.gangTasks)
    if (result.placed) {
      for (const [i, t] of run.gangTasks.entries())
        assignments.push({ taskId: t.id, workerId: workerId(result.workers[i]!) })
      stats.gangsPlaced++
    } else {
      for (const t of run.gangTasks) pending.set(t.id, result.reason)
      stats.gangsUnplaced++
    }
  }

  // 3. Ordinary tasks: first-fit from the job's cursor. A task that fits nowhere only stops its own job.
  const placed = new Uint8Array(order.length)
  for (let i = 0; i < order.length; i++) {
    const run = orderRuns[i]!
    if (run.exhausted) continue
    const cand = run.req.workers
    const { next, floor } = run.lane!
    const need = run.need
    let c = live(next, run.cursor)
    while (c < cand.length) {
      const w = cand[c]!
      if (fits(s, w, need)) break
      if (dead(s, w, floor)) next[c] = c + 1
      c = live(next, c + 1)
    }
    run.cursor = c
    if (c === cand.length) {
      run.exhausted = true
      continue
    }
    const w = cand[c]!
    take(s, w, need)
    assignments.push({ taskId: order[i]!.id, workerId: workerId(w) })
    placed[i] = 1
  }

  // 4. Preemption: unplaced tasks, highest band first, may evict strictly lower bands.
  const evicted = new Set<RunningTask>()
  const gaveUp = new Set<JobRun>()
  if (options.preemption) {
    for (let i = 0; i < order.length; i++) {
      const run = orderRuns[i]!
      if (placed[i] || run.job.band === 2 || gaveUp.has(run)) continue
      const task = order[i]!
      // Evictions earlier in this phase may have left room, so look again from the start.
      let w = evicted.size > 0 ? firstFit(s, run.req.workers, run.need) : -1
      if (w < 0) {
        const eviction = findEviction(s, run.req.workers, run.need, run.job.band, evicted)
        if (!eviction) {
          gaveUp.add(run)
          continue
        }
        w = eviction.worker
        for (const victim of eviction.victims) {
          evicted.add(victim)
          release(s, w, victim.resources, victim.building === true)
          placement.preemptions.push({ taskId: victim.taskId, workerId: workerId(w), forTaskId: task.id })
        }
      }
      take(s, w, run.need)
      assignments.push({ taskId: task.id, workerId: workerId(w) })
      placed[i] = 1
    }
  }

  // 5. Reasons, once per job, against the final state.
  const why = explainer(s, ix, evicted.size > 0)
  const reasons = new Map<JobRun, string>()
  for (let i = 0; i < order.length; i++) {
    if (placed[i]) continue
    const run = orderRuns[i]!
    let reason = reasons.get(run)
    if (reason === undefined) {
      reason = why.explain(run.req, run.need)
      if (gaveUp.has(run)) reason += `; preempting band ${run.job.band + 1}+ tasks would not make room`
      reasons.set(run, reason)
    }
    pending.set(order[i]!.id, reason)
  }

  stats.tasksPlaced = assignments.length
  return placement
}

function laneFor(lanes: Map<Requirement, Lane>, req: Requirement, need: Need): Lane {
  let lane = lanes.get(req)
  if (!lane) {
    const next = new Int32Array(req.workers.length + 1)
    for (let i = 0; i < next.length; i++) next[i] = i
    lane = { next, floor: { ...need } }
    lanes.set(req, lane)
  }
  const f = lane.floor
  f.cpu = Math.min(f.cpu, need.cpu)
  f.mem = Math.min(f.mem, need.mem)
  f.gpu = Math.min(f.gpu, need.gpu)
  f.tpu = Math.min(f.tpu, need.tpu)
  return lane
}

function firstFit(s: PassState, cand: Int32Array, need: Need): number {
  for (const w of cand) if (fits(s, w, need)) return w
  return -1
}
