/**
 * A worker's heartbeat (Iris's Reconcile RPC, made pull-based): apply what the worker observed to
 * the tasks it holds, keep their output tails and router counters, and answer with the complete desired set of attempts.
 * Only this worker's tasks are read (the `WTASKS` index), so a heartbeat costs O(its tasks).
 *
 *   observed RUNNING     → running (+ where a replica listens, whether it is ready)
 *   observed SUCCEEDED   → succeeded;  FAILED → failed (failure budget)
 *   observed KILLED of an attempt still wanted → worker_failed (the worker stopped it: preemption budget)
 *   an attempt the control plane ended (`task.stopping`), not reported running → stopped (the task may
 *   be placed again)
 */

import type { Job, Task } from "../../model/job"
import type { Outcome, TaskReport } from "../../model/outcome"
import type { DesiredAttempt, ObservedAttempt, Worker } from "../../model/worker"
import type { StoredItem } from "../../store/port"
import { mapLimit } from "../../util/concurrency"
import { NotFoundError } from "../../util/errors"
import type { BackendDeps } from "../protocol"
import { routerPort } from "./serving"

/** Jobs (and output tails, router samples) one heartbeat writes at once. */
const WritesAtOnce = 8

const live = (t: Task) => t.state === "ASSIGNED" || t.state === "BUILDING" || t.state === "RUNNING"
const Ended: ReadonlySet<string> = new Set(["SUCCEEDED", "FAILED", "KILLED"])

/** The last two non-empty lines of an output tail, each cut at 300 characters, joined by " | ". */
export function lastLines(tail: string | undefined): string | undefined {
  const lines = (tail ?? "")
    .split("\n")
    .map((line) => line.trim())
    .filter(Boolean)
    .slice(-2)
    .map((line) => (line.length > 300 ? `${line.slice(0, 300)}...` : line))
  return lines.length ? lines.join(" | ") : undefined
}

function outcomeOf(task: Task, seen: ObservedAttempt, serving: boolean): Outcome | undefined {
  // A replica or router is meant to run until stopped: any exit, even 0, is a failure to restart.
  if (serving && seen.state === "SUCCEEDED")
    return {
      kind: "failed",
      attemptUid: seen.attemptUid,
      reason: "exited",
      exitCode: seen.exitCode ?? 0,
      message: "a server process exited",
    }
  switch (seen.state) {
    case "RUNNING":
      return task.state === "RUNNING" ? undefined : { kind: "running", attemptUid: seen.attemptUid }
    case "SUCCEEDED":
      return { kind: "succeeded", attemptUid: seen.attemptUid, exitCode: seen.exitCode ?? 0 }
    case "FAILED": {
      // What the process said last is usually why (`sh: vllm: not found`): it goes into the reason.
      const said = lastLines(seen.logTail)
      const base =
        seen.message ?? (seen.exitCode !== undefined ? `exited with code ${seen.exitCode}` : undefined)
      const message = [base, said && `last output: ${said}`].filter(Boolean).join("; ")
      return {
        kind: "failed",
        attemptUid: seen.attemptUid,
        reason: seen.exitCode === undefined || seen.exitCode === 127 ? "start_failed" : "exit_code",
        ...(seen.exitCode !== undefined ? { exitCode: seen.exitCode } : {}),
        ...(message ? { message } : {}),
      }
    }
    case "KILLED":
      return { kind: "worker_failed", attemptUid: seen.attemptUid, reason: "stopped_by_worker" }
  }
}

/** Whether an ending outcome says the process started (it exited, rather than failed to start). */
const ran = (o: Outcome) => o.kind === "succeeded" || (o.kind === "failed" && o.reason !== "start_failed")

/**
 * Apply a worker's observations and return its desired set; `freed` when an attempt of it ended here
 * (its resources are free: a pass should place pending work now rather than at the next tick).
 */
export async function heartbeat(
  rt: Pick<BackendDeps, "repos" | "transitions">,
  project: string,
  workerId: string,
  observed: ObservedAttempt[],
): Promise<{ worker: Worker; desired: DesiredAttempt[]; freed: boolean }> {
  const { repos } = rt
  // 1. This worker's tasks, and their jobs. Each task is read consistently, so a heartbeat never hands
  // out an attempt that has already finished or moved.
  const heldItems = await repos.jobs.heldBy(project, workerId)
  const held = heldItems.map((h) => h.task)
  const jobIds = [...new Set(heldItems.map((h) => h.jobId))]
  const jobs = new Map((await repos.jobs.getMany(project, jobIds)).map((j) => [j.id, j] as const))
  const jobIdOf = new Map(heldItems.map((h) => [h.task, h.jobId] as const))
  const jobOf = (item: StoredItem<Task>) => jobs.get(jobIdOf.get(item) ?? "")

  // 2. Observations → reports per job; output tails and router samples kept.
  const byAttempt = new Map(held.map((t) => [t.data.attempts.at(-1)?.attemptUid, t] as const))
  const reports = new Map<string, TaskReport[]>()
  const sideWrites: (() => Promise<void>)[] = []
  for (const seen of observed) {
    const item = byAttempt.get(seen.attemptUid)
    const job = item && jobOf(item)
    if (!item || !job || !live(item.data)) continue // not ours (any more): it is left out of the desired set
    const list = reports.get(job.id) ?? []
    const outcome = outcomeOf(item.data, seen, job.serving !== undefined)
    // The note first: an attempt's last progress arrives with its outcome, and once the outcome has
    // ended the attempt a note about it is stale.
    if (seen.endpoint !== undefined || seen.ready !== undefined || seen.progress !== undefined)
      list.push({
        index: item.data.index,
        serving: {
          attemptUid: seen.attemptUid,
          endpoint: seen.endpoint,
          ready: seen.ready,
          progress: seen.progress,
          // Why a running server is not serving (a router restarting), or nothing once it is again.
          ...(job.serving && seen.state === "RUNNING" ? { message: seen.message ?? "" } : {}),
        },
      })
    // A process that ended before any heartbeat saw it running (a short task) did run: it is RUNNING
    // first, so its attempt says when it started (this report), as a longer one's does.
    if (outcome && item.data.state !== "RUNNING" && ran(outcome))
      list.push({ index: item.data.index, outcome: { kind: "running", attemptUid: seen.attemptUid } })
    if (outcome) list.push({ index: item.data.index, outcome })
    reports.set(job.id, list)
    // A router's counters: a sample of its swarm's metrics now and then.
    if (seen.router && job.serving && item.data.index === job.serving.replicas) {
      const { swarm } = job.serving
      const counters = seen.router
      sideWrites.push(
        async () => void (await rt.transitions.swarms.recordRouterSample(project, swarm, counters)),
      )
    }
    const tail = seen.logTail
    if (tail !== undefined)
      sideWrites.push(() => repos.jobs.saveLogTail(project, job.id, item.data.index, seen.attemptUid, tail))
  }
  // Each tail and each job's tasks are items of their own: written side by side, a few at a time, so
  // a worker that reports many attempts at once (a batch of short tasks) is answered soon.
  await mapLimit(sideWrites, WritesAtOnce, (save) => save())
  // Attempts the control plane ended that this worker ran: stopped once it no longer runs them (it
  // reports them ended, or not at all: a heartbeat reports everything it runs).
  const seenRunning = new Set(observed.filter((o) => !Ended.has(o.state)).map((o) => o.attemptUid))
  for (const item of held) {
    const uid = item.data.stopping?.attemptUid
    const job = jobOf(item)
    if (!uid || !job || seenRunning.has(uid)) continue
    const list = reports.get(job.id) ?? []
    list.push({ index: item.data.index, outcome: { kind: "stopped", attemptUid: uid } })
    reports.set(job.id, list)
  }
  const freed = [...reports.values()].some((list) =>
    list.some((r) => "outcome" in r && r.outcome.kind !== "running"),
  )
  const current = new Map(held.map((t) => [`${jobOf(t)?.id}/${t.data.index}`, t.data]))
  await mapLimit([...reports], WritesAtOnce, async ([jobId, list]) => {
    const job = jobs.get(jobId)!
    const { tasks } = await rt.transitions.jobs.applyReports(job, list)
    for (const t of tasks) if (current.has(`${jobId}/${t.index}`)) current.set(`${jobId}/${t.index}`, t)
  })

  // 3. The desired set: every attempt still live on this worker.
  const stillHeld = [...current.entries()].filter(
    ([, t]) => live(t) && t.attempts.at(-1)?.workerId === workerId,
  )
  const worker = await repos.workers.heartbeat(project, workerId, stillHeld.length > 0)
  if (!worker) throw new NotFoundError("worker", workerId)
  const swarmUrls = new Map<string, string | undefined>()
  const desired: DesiredAttempt[] = []
  for (const [key, task] of stillHeld) {
    const job = jobs.get(key.slice(0, key.lastIndexOf("/")))
    if (!job) continue
    desired.push(await desiredOf(rt, job, task, swarmUrls))
  }
  return { worker, desired, freed }
}

async function desiredOf(
  rt: Pick<BackendDeps, "repos">,
  job: Job,
  task: Task,
  swarmUrls: Map<string, string | undefined>,
): Promise<DesiredAttempt> {
  const attemptUid = task.attempts.at(-1)!.attemptUid
  const base = { attemptUid, action: "run" as const, jobId: job.id, taskIndex: task.index }
  if (job.serving && task.index === job.serving.replicas) {
    // The swarm's serving replicas, as the last pass left them (a replica joins once healthy and
    // leaves when it drains: `rules/swarm-rollout`).
    const swarm = await rt.repos.swarms.get(job.project, job.serving.swarm)
    const upstreams = (swarm?.replicaSet?.replicas ?? []).flatMap((r) =>
      r.state === "serving" && r.url ? [r.url] : [],
    )
    // The swarm's address: every router of the swarm listens on the port the first one picked.
    const port = routerPort(job, task)
    // A swarm that scales to zero: its router holds requests while a replica wakes.
    const wake = swarm?.autoscaling?.minReplicas === 0 ? swarm.autoscaling.wakeTimeoutS : undefined
    return {
      ...base,
      kind: "router",
      upstreams,
      ...(port ? { port } : {}),
      ...(wake ? { wakeHoldS: wake } : {}),
    }
  }
  const env: Record<string, string> = {
    ...job.spec.env,
    SHARD_ID: String(job.serving?.slot ?? task.index),
    NSHARDS: String(job.serving ? job.serving.replicas : job.spec.tasks),
    ATTEMPT_UID: attemptUid,
  }
  if (job.spec.swarm) {
    if (!swarmUrls.has(job.spec.swarm))
      swarmUrls.set(job.spec.swarm, (await rt.repos.swarms.get(job.project, job.spec.swarm))?.url)
    const url = swarmUrls.get(job.spec.swarm)
    if (url) env.SWARM_ENDPOINT = url
  }
  const resources = job.spec.resources
  if (job.serving)
    return {
      ...base,
      kind: "replica",
      command: job.spec.command,
      env,
      healthPath: job.serving.healthPath,
      resources,
    }
  return { ...base, kind: "task", command: job.spec.command, env, resources }
}
