/**
 * One control-loop pass over one backend, under its lease: observe → plan → apply.
 *   observe   the backend's active work, read once from the sparse index (a snapshot), and what the
 *             backend sees of it (`backend.reconcile`);
 *   plan      pure functions (`plan.ts`) turn that into task reports, the jobs to settle, timeouts,
 *             placements and launches;
 *   apply     fenced, conditional writes through `transitions/`, each folded back into the snapshot, so
 *             no step reads the work again; substrate effects (stops) after the commit.
 * Only jobs this pass touched, or whose stored counts disagree with their open tasks, are settled or
 * recounted; a job at rest costs nothing.
 * Every write is conditional, so a crash anywhere is repaired by the next pass.
 */
import {
  isServing,
  keepsWorkers,
  type ReconcileResult,
  reportsHealth,
  rollsReplicas,
  type TaskBackend,
  toleratesObserveFailure,
} from "../backends/protocol"
import { createBackend } from "../backends/registry"
import type { Backend } from "../model/backend"
import type { NewEvent } from "../store/events"
import { actsUntil, type Lease } from "../store/leases"
import { FencedError } from "../store/port"
import { mapLimit } from "../util/concurrency"
import { BackendError, VisibleError } from "../util/errors"
import { newId } from "../util/ids"
import { warnOnChange } from "../util/log-on-change"
import type { ControlDeps } from "./deps"
import {
  byJob,
  type Entry,
  endedFailed,
  healthToRecord,
  jobsToSettle,
  planLaunch,
  planObserved,
  planPlacement,
  planTimeouts,
  readyToPlace,
  restops,
  Snapshot,
  teardownEffects,
  unsubmitted,
} from "./plan"
import { noteUnreachable, reconcileReplicaSet, reconcileSwarm } from "./serving"

export { CheckedEveryMs, submitBackoffMs, unsubmitted } from "./plan"

export interface PassReport {
  project: string
  backendId: string
  /** False when another holder had the lease. */
  ran: boolean
  active: number
  placed: number
  transitions: number
  error?: string
}

export const LeaseTtlMs = 60_000

/** Jobs a pass writes at once (each job's items are its own; the store's client bounds the rest). */
const JobsAtOnce = 8

/**
 * Tasks one pass kills at most (cancels, failures past tolerance), over all its jobs: a 10,000-task
 * cancel takes a few short passes rather than one that holds the lease and the store for minutes, and
 * heartbeats, other jobs and swarms are looked after in between.
 */
export const KillsPerPass = 1000

/** The pass lost its lease (it ran past the expiry): it stops; the next holder carries on. */
class LeaseLost extends Error {}

/** What one pass carries from step to step. */
interface Pass {
  rt: ControlDeps
  record: Backend
  backend: TaskBackend
  lease: Lease
  fence: number
  now: number
  snapshot: Snapshot
  report: PassReport
  /** Jobs whose tasks changed state in this pass and are not recounted since. */
  touched: Set<string>
  /** Jobs whose applied outcomes failed a task (they may now be past their tolerance). */
  failed: Set<string>
  /** Attempts to stop on the substrate after the commit. */
  stops: string[]
  /** Workers declared dead in this pass. */
  unavailable: Set<string>
  /** Attempts this pass placed: nothing can have submitted them before its launch. */
  minted: Set<string>
}

/** Before each step that writes: a pass that ran past its lease stops rather than race the next holder. */
function guard(pass: Pass): void {
  if (!pass.rt.repos.leases.valid(pass.lease)) throw new LeaseLost()
}

/** Observe: a backend's active work, read once from the sparse active index. */
export async function readSnapshot(rt: ControlDeps, record: Backend): Promise<Snapshot> {
  const { swarms, jobs, heads, tasks, count } = await rt.repos.active.of(record.project, record.id)
  return new Snapshot(swarms, jobs, tasks, count, heads)
}

/**
 * Apply reports, one conditional write per task (on the versions the snapshot holds) and one call per
 * job, fenced; fold the result back into the snapshot.
 */
async function apply(pass: Pass, entries: readonly Entry[]): Promise<void> {
  const events: { jobId: string; events: NewEvent[] }[] = []
  let failure: { error: unknown } | undefined
  // Jobs are written side by side (each job's tasks are its own items), a few at a time. One that fails
  // does not stop the others: their writes land and are recorded, then the pass fails with it.
  await mapLimit(byJob(entries), JobsAtOnce, async ({ job, reports }) => {
    try {
      const result = await pass.rt.transitions.jobs.applyReports(job, reports, {
        fence: pass.fence,
        known: pass.snapshot.known(job.id),
        collect: (changes) => events.push({ jobId: job.id, events: changes }),
      })
      pass.stops.push(...result.stop)
      pass.snapshot.take(job.id, result.items)
      if (result.moved) pass.touched.add(job.id)
      if (endedFailed(result.tasks)) pass.failed.add(job.id)
    } catch (error) {
      failure ??= { error }
    }
  })
  // Every job's task events in one batched write, after the task writes they record.
  await pass.rt.repos.events.tasksOfJobs(pass.record.project, events)
  if (failure) throw failure.error
}

/**
 * Observe: what the backend sees of the live work (and its swarms, in the same call where it can).
 * After the control loop was away, workers get a fresh grace period and nobody is judged this pass.
 * A substrate that cannot be observed changes no task: the pass goes on, so new work is still placed
 * and says why it is not submitted yet, and the backend's health says what failed.
 */
async function observe(pass: Pass): Promise<ReconcileResult> {
  const { rt, record, backend, lease, report } = pass
  if (keepsWorkers(backend) && lease.lastPassAt !== undefined && backend.isAway(lease.lastPassAt, pass.now)) {
    await backend.seedLiveness()
    return { workers: [], transitions: [] }
  }
  try {
    const observed = await backend.reconcile({
      live: pass.snapshot.live(),
      stopping: pass.snapshot.stopping(),
      swarms: pass.snapshot.swarms.map((s) => s.data),
      ...(lease.lastPassAt !== undefined ? { lastPassAt: lease.lastPassAt } : {}),
    })
    warnOnChange(rt.logger, `backend ${record.project}/${record.id}`, undefined)
    return observed
  } catch (error) {
    if (error instanceof FencedError || !toleratesObserveFailure(backend)) throw error
    report.error = error instanceof Error ? error.message : String(error)
    warnOnChange(
      rt.logger,
      `backend ${record.project}/${record.id}`,
      `${report.error}; tasks unchanged until it answers`,
    )
    return { workers: [], transitions: [] }
  }
}

/** Worker health, then the notes and outcomes the backend observed. */
async function applyObserved(pass: Pass, observed: ReconcileResult): Promise<void> {
  guard(pass)
  // Requeue a worker's attempts only once its death is committed: a heartbeat that raced the mark wins.
  const spared = new Set<string>()
  for (const { worker, health } of observed.workers) {
    const written = await pass.rt.repos.workers.setHealth(worker, health, { fence: pass.fence })
    if (health === "dead") (written ? pass.unavailable : spared).add(worker.data.id)
  }
  const { notes, outcomes } = planObserved(observed, spared)
  await apply(pass, notes)
  await apply(pass, outcomes)
  pass.report.transitions += outcomes.length
  // What an earlier pass ended and the substrate still runs is stopped again, until it says it stopped.
  for (const { attemptUid, target } of restops(observed)) {
    pass.stops.push(attemptUid)
    if (target) pass.snapshot.targets.set(attemptUid, target)
  }
}

/**
 * Before placement: carry out cancels, kill what is left of jobs past their failure tolerance, repair
 * gangs; each such job is recounted with it. Kills are paged (`KillsPerPass`); a job with more to kill
 * is settled again by the next pass, and its pending tasks are not placed meanwhile.
 */
async function settleJobs(pass: Pass, due: ReadonlySet<string>): Promise<void> {
  guard(pass)
  const gangs = [...pass.touched].filter((id) => pass.snapshot.jobs.get(id)?.spec.coscheduling)
  let budget = KillsPerPass
  // Smallest first: a 10,000-task cancel takes what the others leave of the budget, not all of it.
  const open = (id: string) => Object.values(pass.snapshot.openCounts(id)).reduce((n, c) => n + (c ?? 0), 0)
  const jobs = [...new Set([...due, ...pass.failed, ...gangs])].sort((a, b) => open(a) - open(b))
  for (const jobId of jobs) {
    // Out of kills for this pass: the job waits for the next one (a touched job is still recounted).
    if (!budget) break
    guard(pass)
    const settled = await pass.rt.transitions.jobs.settle(pass.record.project, jobId, pass.fence, {
      known: pass.snapshot.known(jobId),
      limit: budget,
    })
    budget -= settled.killed
    pass.stops.push(...settled.stop)
    if (settled.job) pass.snapshot.jobs.set(jobId, settled.job)
    pass.snapshot.take(jobId, settled.items)
    pass.touched.delete(jobId)
  }
}

/** After the pass's writes: store the counts and status of every job whose tasks moved, once. */
async function recount(pass: Pass, due: ReadonlySet<string>): Promise<void> {
  guard(pass)
  await mapLimit([...new Set([...due, ...pass.touched])], JobsAtOnce, (jobId) =>
    pass.rt.transitions.jobs.refresh(
      pass.record.project,
      jobId,
      "tasks_changed",
      pass.fence,
      pass.snapshot.heads.get(jobId),
      pass.snapshot.openCounts(jobId),
    ),
  )
}

/**
 * Swarms, each on its own: one that conflicts with a user's change is retried next pass. Returns
 * whether a deployment was created (its tasks are new work for this pass to place).
 */
async function reconcileSwarms(pass: Pass): Promise<boolean> {
  const { rt, backend, fence } = pass
  let created = false
  for (const swarm of pass.snapshot.swarms) {
    guard(pass)
    try {
      const step = rollsReplicas(backend)
        ? await reconcileReplicaSet(rt, backend, swarm, fence)
        : isServing(backend)
          ? await reconcileSwarm(rt, backend, swarm, fence)
          : (() => {
              throw new VisibleError(
                "backend.not_supported",
                `backend "${pass.record.id}" does not serve swarms`,
                501,
              )
            })()
      if (step === "deployment_created") created = true
    } catch (error) {
      if (error instanceof FencedError) throw error
      const message = error instanceof Error ? error.message : String(error)
      warnOnChange(
        rt.logger,
        `swarm ${swarm.data.project}/${swarm.data.name}`,
        `${message}; retried every pass`,
      )
      // The cluster did not answer: the swarm says so (UNKNOWN, with the error) until it does.
      if (error instanceof BackendError || error instanceof VisibleError)
        await noteUnreachable(rt, swarm, message, fence).catch((e) => {
          if (e instanceof FencedError) throw e
        })
    }
  }
  return created
}

/**
 * Placement of what is ready (and preemption), then scheduling timeouts of what is still pending, with
 * why the rest wait. A task past its timeout is tried once more first: it is given up on only when this
 * pass could not place it either, and its reason is this pass's.
 */
async function place(pass: Pass): Promise<void> {
  guard(pass)
  const ready = readyToPlace(pass.snapshot.pending(), pass.now)
  let reasons: ReadonlyMap<string, string> = new Map()
  let waiting: { jobId: string; reason: string }[] = []
  if (ready.length) {
    const { rt, backend } = pass
    const result = await backend.schedule({
      pending: ready,
      live: pass.snapshot.live(),
      unavailableWorkers: pass.unavailable,
      mintAttemptUid: () => newId("a", rt.clock.now()),
    })
    guard(pass)
    const planned = planPlacement(result, ready)
    await apply(pass, planned.assignments)
    pass.report.placed = planned.assignments.length
    for (const a of result.assignments) pass.minted.add(a.attemptUid)
    // Committed: a worker's heartbeat held open in this process answers with its new work now.
    const placedOn = new Set(result.assignments.flatMap((a) => a.workerId ?? []))
    rt.assignments?.committed(pass.record.project, placedOn)
    await apply(pass, planned.preemptions)
    reasons = result.pendingReasons
    waiting = planned.reasons
  }
  const timedOut = planTimeouts(pass.snapshot.pending(), pass.now, reasons)
  await apply(pass, timedOut)
  const ended = new Set(timedOut.map((e) => e.ref.job.id))
  for (const { jobId, reason } of waiting)
    if (!ended.has(jobId))
      await pass.rt.transitions.jobs.setPendingReason(pass.record.project, jobId, reason, pass.fence)
}

/**
 * Submit what is assigned but not on the substrate: this pass's placements, a crashed pass's, and
 * earlier tries that could not reach it, once their backoff is over. The backend adopts attempts it
 * finds there already, so a crash between submit and persist never submits twice. (A worker-daemon
 * backend's assignments name their worker, which pulls them: none waits here.)
 */
async function launch(pass: Pass): Promise<void> {
  const attempts = unsubmitted(pass.snapshot.live(), pass.now)
  if (!attempts.length) return
  guard(pass)
  // The backend submits nothing past the lease: another pass may launch these attempts after it.
  const launched = await pass.backend.launch({
    attempts,
    deadline: actsUntil(pass.lease),
    firstTry: pass.minted,
  })
  await apply(pass, planLaunch(launched, pass.now))
}

/** After the commit: stop what was stopped, prune dead workers, record the backend's health. */
async function effects(pass: Pass): Promise<void> {
  const { rt, record, backend, report } = pass
  const stops = teardownEffects(pass.stops, pass.snapshot.targets)
  if (stops.length) await backend.stop(stops)
  if (keepsWorkers(backend)) await backend.pruneDeadWorkers()
  // Health is the last contact's result: what the backend saw this pass, if it made contact.
  const health = reportsHealth(backend)
    ? backend.health()
    : report.error
      ? { healthy: false, message: report.error }
      : { healthy: true }
  const status = healthToRecord(record, health, pass.now)
  if (status) await rt.repos.backends.setStatus(record.project, record.id, status)
}

/** How a pass is run; the defaults are production's. */
export interface PassOptions {
  /** How long the pass's lease lasts (default `LeaseTtlMs`); a fault run shortens it to hit expiry sooner. */
  leaseTtlMs?: number
}

/**
 * One pass over `record`'s backend. `given` is the caller's instance of it (the tick's, which closes
 * it); without one the pass makes its own, and a type this release does not implement fails the pass
 * with `backend.not_available`, recorded in the backend's status.
 */
export async function reconcilePass(
  rt: ControlDeps,
  record: Backend,
  owner: string,
  given?: TaskBackend,
  options: PassOptions = {},
): Promise<PassReport> {
  const report: PassReport = {
    project: record.project,
    backendId: record.id,
    ran: false,
    active: 0,
    placed: 0,
    transitions: 0,
  }
  const ttl = options.leaseTtlMs ?? LeaseTtlMs
  const lease = await rt.repos.leases.acquire(record.project, record.id, "reconcile", owner, ttl)
  if (!lease) return report
  report.ran = true
  let own: TaskBackend | undefined
  try {
    const backend = given ?? (await createBackend(record, rt))
    if (!given) own = backend
    const snapshot = await readSnapshot(rt, record)
    report.active = snapshot.count
    const pass: Pass = {
      rt,
      record,
      backend,
      lease,
      fence: lease.token,
      now: rt.clock.now(),
      snapshot,
      report,
      touched: new Set(),
      failed: new Set(),
      stops: [],
      unavailable: new Set(),
      minted: new Set(),
    }
    const due = jobsToSettle(snapshot)
    await applyObserved(pass, await observe(pass))
    await settleJobs(pass, due.settle)
    // A deployment created this pass brought new tasks: read the work again, so they are placed now.
    if (await reconcileSwarms(pass)) {
      const fresh = await readSnapshot(rt, record)
      for (const [uid, target] of pass.snapshot.targets) fresh.targets.set(uid, target)
      pass.snapshot = fresh
    }
    await place(pass)
    await launch(pass)
    await recount(pass, due.recount)
    await effects(pass)
  } catch (error) {
    // A fenced write or a lost lease means a newer holder took over: stop quietly, it carries on.
    if (!(error instanceof FencedError) && !(error instanceof LeaseLost)) {
      report.error = error instanceof Error ? error.message : String(error)
      await rt.repos.backends
        .setStatus(record.project, record.id, {
          healthy: false,
          message: report.error,
          checkedAt: new Date(rt.clock.now()).toISOString(),
        })
        .catch(() => undefined)
    }
  } finally {
    await own?.close().catch(() => undefined)
    await rt.repos.leases.release(lease)
  }
  return report
}
