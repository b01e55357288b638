/**
 * One control-loop pass over one backend, under its lease (observe → plan → apply):
 *   1. take the lease (skip the pass if another holder has it); its token fences every write;
 *   2. read the active work from the sparse index;
 *   3. after a long absence, give workers a fresh grace period (`seedLiveness`);
 *   4. reconcile: worker health and observed outcomes, applied with the task state machine;
 *   5. settle jobs: kills for cancels and failures past tolerance, counts and status;
 *   6. swarms: create, observe and tear down deployments;
 *   7. scheduling timeouts, then placement of what is still pending (and preemption);
 *   8. teardown effects after the commit; release the lease.
 * Every write is conditional, so a crash anywhere is repaired by the next pass.
 */

import {
  isServing,
  keepsWorkers,
  type ReconcileResult,
  reportsHealth,
  type TaskBackend,
  type TaskRef,
  type TeardownEffect,
} from "@swarmplane/core/backends/protocol"
import { createBackend } from "@swarmplane/core/backends/registry"
import { noteUnreachable, reconcileSwarm } from "@swarmplane/core/control/serving"
import type { Backend } from "@swarmplane/core/model/backend"
import type { Attempt } from "@swarmplane/core/model/job"
import type { Outcome, TaskReport } from "@swarmplane/core/model/outcome"
import type { Runtime } from "@swarmplane/core/runtime"
import type { Lease } from "@swarmplane/core/store/leases"
import { FencedError } from "@swarmplane/core/store/port"
import { BackendError, VisibleError } from "@swarmplane/core/util/errors"
import { newId } from "@swarmplane/core/util/ids"
import { warnOnChange } from "@swarmplane/core/util/log-on-change"
import { activeWork } from "./active-before"

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

/** A backend's recorded health is rewritten at least this often while passes run over it. */
export const CheckedEveryMs = 30_000

/**
 * A gap between passes this long means the control loop itself was away (not the workers): far more
 * than the cron period (1 min), so ordinary passes never mistake silence for it.
 */
export function awayAfterMs(graceS: number): number {
  return Math.max(5 * 60_000, 3 * graceS * 1000)
}

/** Apply reports about tasks, grouped per job (one conditional write per job), fenced. Returns the attempts to stop. */
async function applyByJob(
  rt: Runtime,
  entries: { ref: TaskRef; report: TaskReport }[],
  fence: number,
): Promise<string[]> {
  const byJob = new Map<string, { job: TaskRef["job"]; reports: TaskReport[] }>()
  for (const { ref, report } of entries) {
    const entry = byJob.get(ref.job.id) ?? { job: ref.job, reports: [] }
    entry.reports.push(report)
    byJob.set(ref.job.id, entry)
  }
  const stop: string[] = []
  for (const { job, reports } of byJob.values())
    stop.push(...(await rt.transitions.jobs.applyReports(job, reports, { fence })).stop)
  return stop
}

const currentUid = (ref: TaskRef) => ref.task.data.attempts.at(-1)!.attemptUid

/** Apply outcomes (fenced). Returns the attempts to stop. */
function applyOutcomes(rt: Runtime, items: { ref: TaskRef; outcome: Outcome }[], fence: number) {
  const entries = items.map(({ ref, outcome }) => ({ ref, report: { index: ref.task.data.index, outcome } }))
  return applyByJob(rt, entries, fence)
}

/** Backoff between tries to submit an attempt whose substrate could not be reached: 5 s doubling, at most 5 min. */
export function submitBackoffMs(failures: number): number {
  return Math.min(5 * 60_000, 5_000 * 2 ** Math.max(0, failures - 1))
}

/** Attempts persisted as ASSIGNED but not on the substrate yet, whose next try is due. */
export function unsubmitted(live: TaskRef[], now: number): TaskRef[] {
  return live.filter((ref) => {
    const attempt = ref.task.data.attempts.at(-1)
    return (
      ref.task.data.state === "ASSIGNED" &&
      !attempt?.target &&
      (attempt?.retryAt === undefined || Date.parse(attempt.retryAt) <= now)
    )
  })
}

/**
 * Delegated backends: submit what was persisted as ASSIGNED but is not yet on the substrate (no
 * target): this pass's placements, any a crashed pass left behind, and tries that could not reach the
 * substrate (again after a backoff, with the reason on the task). The backend adopts attempts it finds
 * there already, so a crash between submit and persist never submits twice.
 */
async function launchAssigned(
  rt: Runtime,
  backend: TaskBackend,
  record: Backend,
  fence: number,
): Promise<void> {
  if (record.kind !== "delegated") return
  const now = rt.clock.now()
  const attempts = unsubmitted((await activeWork(rt, record)).live, now)
  if (!attempts.length) return
  const result = await backend.launch({ attempts })
  await applyByJob(
    rt,
    [
      ...result.launched.map(({ ref, target }) => ({
        ref,
        report: { index: ref.task.data.index, serving: { attemptUid: currentUid(ref), target } },
      })),
      ...result.failed.map(({ ref, message }) => ({
        ref,
        report: {
          index: ref.task.data.index,
          outcome: { kind: "failed" as const, attemptUid: currentUid(ref), reason: "submit_failed", message },
        },
      })),
      ...(result.deferred ?? []).map(({ ref, message }) => {
        const failures = (ref.task.data.attempts.at(-1)?.submitFailures ?? 0) + 1
        return {
          ref,
          report: {
            index: ref.task.data.index,
            serving: {
              attemptUid: currentUid(ref),
              submitFailure: { message, retryAt: new Date(now + submitBackoffMs(failures)).toISOString() },
            },
          },
        }
      }),
    ],
    fence,
  )
}

/**
 * What the backend read of live attempts besides outcomes (a batch shard's counters, why a submitted
 * attempt still waits in the substrate's queue), as notes on those attempts: stale ones change nothing.
 */
async function applyNotes(
  rt: Runtime,
  observed: Pick<ReconcileResult, "progress" | "waiting">,
  fence: number,
): Promise<void> {
  const note = (ref: TaskRef, fields: { progress?: Attempt["progress"]; pendingReason?: string }) => ({
    ref,
    report: { index: ref.task.data.index, serving: { attemptUid: currentUid(ref), ...fields } },
  })
  await applyByJob(
    rt,
    [
      ...(observed.progress ?? []).map(({ ref, progress }) => note(ref, { progress })),
      ...(observed.waiting ?? []).map(({ ref, reason }) => note(ref, { pendingReason: reason })),
    ],
    fence,
  )
}

/** The pass lost its lease (it ran past the expiry): it stops; the next holder carries on. */
class LeaseLost extends Error {}

export async function reconcilePass(rt: Runtime, record: Backend, owner: string): Promise<PassReport> {
  const report: PassReport = {
    project: record.project,
    backendId: record.id,
    ran: false,
    active: 0,
    placed: 0,
    transitions: 0,
  }
  const leases = rt.repos.leases
  const lease: Lease | undefined = await leases.acquire(
    record.project,
    record.id,
    "reconcile",
    owner,
    LeaseTtlMs,
  )
  if (!lease) return report
  report.ran = true
  const fence = lease.token
  // Before each phase that writes: a pass that ran past its lease stops rather than race the next holder.
  const guard = () => {
    if (!leases.valid(lease)) throw new LeaseLost()
  }
  let backend: TaskBackend | undefined
  try {
    backend = await createBackend(record, rt)
    let work = await activeWork(rt, record)
    const firstLive = work.live
    report.active = work.count
    const now = rt.clock.now()

    // 3–4. Liveness and observed outcomes. After an absence, workers get a fresh grace period and
    // nobody is judged this pass (the workers list may not show the fresh lastSeen yet).
    const away =
      record.config.type === "workers" &&
      lease.lastPassAt !== undefined &&
      now - lease.lastPassAt > awayAfterMs(record.config.heartbeatGraceS)
    if (away && keepsWorkers(backend)) await backend.seedLiveness()
    // A substrate that cannot be observed this pass changes no task; the pass goes on, so new work is
    // still placed and says why it is not submitted yet, and the backend's health says what failed.
    let observed: ReconcileResult = { workers: [], transitions: [] }
    if (!away)
      try {
        observed = await backend.reconcile({
          live: work.live,
          swarms: work.swarms.map((s) => s.data),
          ...(lease.lastPassAt !== undefined ? { lastPassAt: lease.lastPassAt } : {}),
        })
        warnOnChange(rt.logger, `backend ${record.project}/${record.id}`, undefined)
      } catch (error) {
        if (error instanceof FencedError || record.kind !== "delegated") throw error
        report.error = error instanceof Error ? error.message : String(error)
        warnOnChange(
          rt.logger,
          `backend ${record.project}/${record.id}`,
          `${report.error}; tasks unchanged until it answers`,
        )
      }
    guard()
    // Requeue a worker's attempts only once its death is committed: a heartbeat that raced the mark wins.
    const unavailable = new Set<string>()
    const spared = new Set<string>()
    for (const { worker, health } of observed.workers) {
      const written = await rt.repos.workers.setHealth(worker, health, { fence })
      if (health === "dead") (written ? unavailable : spared).add(worker.data.id)
    }
    await applyNotes(rt, observed, fence)
    const transitions = observed.transitions.filter((t) => {
      const workerId = t.ref.task.data.attempts.at(-1)?.workerId
      return !(t.outcome.kind === "worker_failed" && workerId && spared.has(workerId))
    })
    const stops = await applyOutcomes(rt, transitions, fence)
    report.transitions += transitions.length

    // 5. Settle every active job (cancel and tolerance kills, gang repair; counts and status).
    guard()
    for (const job of work.jobs.values()) {
      const settled = await rt.transitions.jobs.settle(record.project, job.id, fence)
      stops.push(...settled.stop)
    }

    // 6. Swarms, each on its own: one that conflicts with a user's change is retried next pass.
    for (const swarm of work.swarms) {
      guard()
      try {
        if (isServing(backend)) await reconcileSwarm(rt, backend, swarm, fence)
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

    // 7. Timeouts, then placement over fresh state.
    guard()
    work = await activeWork(rt, record)
    const timedOut = work.pending.filter((ref) => {
      const limit = ref.job.spec.schedulingTimeoutS
      const since = Date.parse(ref.task.data.attempts.at(-1)?.finishedAt ?? ref.job.createdAt)
      return limit !== undefined && now - since > limit * 1000
    })
    if (timedOut.length) {
      await applyOutcomes(
        rt,
        timedOut.map((ref) => ({
          ref,
          outcome: {
            kind: "unschedulable",
            reason: "scheduling_timeout",
            message: `not placed within ${ref.job.spec.schedulingTimeoutS}s: ${ref.job.pendingReason ?? "no fitting capacity"}`,
          },
        })),
        fence,
      )
      work = await activeWork(rt, record)
    }
    // A task retried after a failure waits out its backoff (it keeps saying why and until when).
    const ready = work.pending.filter(
      (ref) => !ref.task.data.retryAt || Date.parse(ref.task.data.retryAt) <= now,
    )
    if (ready.length) {
      guard()
      const plan = await backend.schedule({
        pending: ready,
        live: work.live,
        unavailableWorkers: unavailable,
        mintAttemptUid: () => newId("a", rt.clock.now()),
      })
      guard()
      await applyOutcomes(
        rt,
        plan.assignments.map((a) => ({
          ref: a.ref,
          outcome: {
            kind: "assigned",
            attemptUid: a.attemptUid,
            ...(a.workerId ? { workerId: a.workerId } : {}),
            ...(a.target ? { target: a.target } : {}),
            ...(a.submission ? { submission: a.submission } : {}),
          },
        })),
        fence,
      )
      report.placed = plan.assignments.length
      const preempted = plan.preemptions.map((p) => ({
        ref: p.ref,
        outcome: {
          kind: "preempted" as const,
          attemptUid: p.ref.task.data.attempts.at(-1)!.attemptUid,
          reason: p.reason,
        },
      }))
      stops.push(...(await applyOutcomes(rt, preempted, fence)))
      // Why the rest wait: one reason per job (its tasks are alike), written only when it changes.
      const placed = new Set(plan.assignments.map((a) => `${a.ref.job.id}/${a.ref.task.data.index}`))
      const firstWaiting = new Map<string, TaskRef>()
      for (const ref of ready)
        if (!placed.has(`${ref.job.id}/${ref.task.data.index}`) && !firstWaiting.has(ref.job.id))
          firstWaiting.set(ref.job.id, ref)
      for (const ref of firstWaiting.values()) {
        const reason = plan.pendingReasons.get(`${ref.job.id}/${ref.task.data.index}`)
        if (reason && reason !== ref.job.pendingReason)
          await rt.transitions.jobs.setPendingReason(record.project, ref.job.id, reason, fence)
      }
    }

    // Submit what is assigned but not on the substrate: this pass's placements, a crashed pass's,
    // and earlier tries that could not reach it, once their backoff is over.
    if (record.kind === "delegated" && (report.placed > 0 || unsubmitted(work.live, now).length)) {
      guard()
      await launchAssigned(rt, backend, record, fence)
    }

    // 8. Teardown after the commit.
    // Where each stopped attempt runs, from the live tasks this pass began with (stops are of those).
    const targets = new Map(
      [...firstLive, ...work.live].map((ref) => {
        const attempt = ref.task.data.attempts.at(-1)
        return [attempt?.attemptUid, attempt?.target] as const
      }),
    )
    const effects: TeardownEffect[] = stops.map((attemptUid) => ({
      kind: "stop" as const,
      attemptUid,
      ...(targets.get(attemptUid) ? { target: targets.get(attemptUid) } : {}),
    }))
    if (effects.length) await backend.stop(effects)
    if (keepsWorkers(backend)) await backend.pruneDeadWorkers()
    // Health is the last contact's result: what the backend saw this pass, if it made contact. It is
    // written when it changes, and at least every `CheckedEveryMs` while passes run, so "checked"
    // stays true without a write every pass.
    const health = reportsHealth(backend)
      ? backend.health()
      : report.error
        ? { healthy: false, message: report.error }
        : { healthy: true }
    const changed =
      health && (health.healthy !== record.status.healthy || health.message !== record.status.message)
    const stale = !record.status.checkedAt || now - Date.parse(record.status.checkedAt) >= CheckedEveryMs
    if (health && (changed || stale))
      await rt.repos.backends.setStatus(record.project, record.id, {
        ...health,
        checkedAt: new Date(now).toISOString(),
      })
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
    await backend?.close().catch(() => undefined)
    await leases.release(lease)
  }
  return report
}
