/**
 * Swarms on a `workers` backend: a router of the swarm's own (an internal job of one task, the agent's
 * proxy, `srv-<swarm>-<tag>-router<n>`) in front of replicas that are internal jobs of one task each
 * (`srv-<swarm>-<tag>-r<slot>`), placed by the scheduler and pulled by agents like any task. The
 * router outlives every generation of the swarm: an update or a scale starts and stops replicas
 * (`rules/swarm-rollout` plans which), and the router sends requests to the swarm's serving replicas,
 * which it reads from the swarm at each heartbeat. The tag (from the swarm's creation time) keeps a
 * swarm made again under the same name from adopting its predecessor's jobs.
 *
 * The endpoint is the swarm's for its life: a router that is retried or moved off a lost worker is told
 * to listen on the same port and placed on the same host when it can be, so on one host the URL never
 * changes. A router moved to another host keeps the port but not the host.
 */

import type { Job, JobSpec, Task } from "../../model/job"
import { FailedTaskStates, isTerminalTask, type TaskState } from "../../model/states"
import type { ReplicaSlot, Swarm } from "../../model/swarm"
import { withPendingReason } from "../../rules/job-status"
import type { ReplicaObservation, RouterObservation } from "../../rules/swarm-rollout"
import { BackendError } from "../../util/errors"
import type { BackendDeps } from "../protocol"

const tag = (swarm: Swarm) => Date.parse(swarm.createdAt).toString(36)

export function replicaJobId(swarm: Swarm, slot: number): string {
  return `srv-${swarm.name}-${tag(swarm)}-r${slot}`
}

/** The router started at a generation: an update after a failure or a scale to 0 starts a new one. */
export function routerJobId(swarm: Swarm, generation: number): string {
  return `srv-${swarm.name}-${tag(swarm)}-router-g${generation}`
}

/** The replica command: the swarm's own, the built-in echo server for `model: echo`, or vLLM. */
export function replicaCommand(swarm: Swarm): string[] {
  if (swarm.command) return [...swarm.command, ...swarm.args]
  if (swarm.model === "echo") return ["swarmplane-agent", "echo-server", ...swarm.args]
  return ["sh", "-c", 'exec vllm serve "$MODEL" --host 0.0.0.0 --port "$PORT" "$@"', "vllm", ...swarm.args]
}

function servingSpec(swarm: Swarm, command: string[]): JobSpec {
  return {
    name: swarm.name,
    backendId: swarm.backendId,
    command,
    env: { ...swarm.env, MODEL: swarm.model },
    resources: { cpu: swarm.cpusPerReplica, memoryMiB: swarm.memoryMiBPerReplica, gpu: swarm.gpusPerReplica },
    constraints: [],
    preferences: [],
    tasks: 1,
    priority: "production",
    // Servers are restarted when they exit; the budget bounds a crash loop, not a long life.
    maxRetriesFailure: 100,
    maxRetriesPreemption: 100,
    maxTaskFailures: 0,
    labels: { "swarmplane.swarm": swarm.name },
  }
}

export function Serving(rt: BackendDeps) {
  const cancel = async (project: string, id: string) => {
    const job = await rt.repos.jobs.get(project, id)
    if (job && !job.cancelRequested && !["SUCCEEDED", "FAILED", "CANCELLED"].includes(job.status))
      await rt.transitions.jobs.cancel(project, id)
  }
  const observeJob = async (project: string, id: string): Promise<{ job: Job; task: Task } | undefined> => {
    const loaded = await rt.repos.jobs.load(project, id)
    const task = loaded?.tasks[0]?.data
    if (!loaded || !task) return undefined
    return { job: loaded.job.data, task: withPendingReason(loaded.job.data, task) }
  }
  return {
    async observeReplicaSet(
      swarm: Swarm,
    ): Promise<{ router: RouterObservation; replicas: Map<number, ReplicaObservation> }> {
      // A swarm served by an earlier release (one job per generation, its router inside): that job is
      // stopped, and the swarm comes up again as a router and replicas.
      const legacy = swarm.handle?.meta.job
      if (typeof legacy === "string") await cancel(swarm.project, legacy)
      const replicas = new Map<number, ReplicaObservation>()
      for (const r of swarm.replicaSet?.replicas ?? []) {
        const seen = await observeJob(swarm.project, replicaJobId(swarm, r.slot))
        replicas.set(r.slot, seen ? observation(seen.task) : { state: "missing" })
      }
      const id = swarm.handle?.meta.router
      const routerSeen = typeof id === "string" ? await observeJob(swarm.project, id) : undefined
      return { router: routerSeen ? observation(routerSeen.task) : { state: "missing" }, replicas }
    },

    async startReplica(swarm: Swarm, replica: ReplicaSlot): Promise<void> {
      await rt.transitions.jobs.create(
        swarm.project,
        replicaJobId(swarm, replica.slot),
        servingSpec(swarm, replicaCommand(swarm)),
        swarm.backendId!,
        {
          serving: {
            swarm: swarm.name,
            generation: replica.generation,
            replicas: 1,
            slot: replica.slot,
            healthPath: swarm.healthPath,
          },
        },
      )
    },

    async stopReplicas(swarm: Swarm, slots: readonly number[]): Promise<void> {
      for (const slot of slots) await cancel(swarm.project, replicaJobId(swarm, slot))
    },

    async runRouter(swarm: Swarm): Promise<NonNullable<Swarm["handle"]>> {
      const current = typeof swarm.handle?.meta.router === "string" ? swarm.handle.meta.router : undefined
      const job = current ? await rt.repos.jobs.get(swarm.project, current) : undefined
      const live = job && !job.cancelRequested && !["SUCCEEDED", "FAILED", "CANCELLED"].includes(job.status)
      if (current && live) return swarm.handle!
      // The first router, or one after the last ended (a scale to 0, a failure, then an update): a new
      // job, listening where the swarm's endpoint was when it had one this backend gave it.
      const id = routerJobId(swarm, swarm.generation)
      if (id === current)
        throw new BackendError(
          `the swarm's router (job ${id}) ended outside swarmplane; update the swarm to start a new one`,
          false,
        )
      await rt.transitions.jobs.create(
        swarm.project,
        id,
        servingSpec(swarm, ["swarmplane-agent", "router"]),
        swarm.backendId!,
        {
          serving: {
            swarm: swarm.name,
            generation: swarm.generation,
            replicas: 0,
            healthPath: swarm.healthPath,
            ...(swarm.url && (current || typeof swarm.handle?.meta.job === "string")
              ? { routerUrl: swarm.url }
              : {}),
          },
        },
      )
      return { id, url: "", meta: { router: id } }
    },

    async stopRouter(swarm: Swarm): Promise<void> {
      const id = swarm.handle?.meta.router
      if (typeof id === "string") await cancel(swarm.project, id)
    },
  }
}

/** What one serving task (a replica or the router) is, as the rollout reads it. Pure. */
export function observation(t: Task): ReplicaObservation {
  const attempt = t.attempts.at(-1)
  const over = isTerminalTask(t.state)
  if ((FailedTaskStates as readonly TaskState[]).includes(t.state)) {
    const exit = attempt?.exitCode
    return {
      state: "failed",
      over,
      detail: `${t.state.toLowerCase()}${exit !== undefined ? ` (exit code ${exit})` : ""}${t.pendingReason ? `: ${t.pendingReason}` : ""}`,
    }
  }
  if (over) return { state: "ended", detail: t.state.toLowerCase() }
  if (crashLoops(t)) {
    const last = t.attempts.filter((a) => a.finishedAt).at(-1)
    return {
      state: "failed",
      detail: `keeps failing: ${CrashLoopAttempts} attempts in a row ended before it was ready; the last: ${last?.message ?? last?.reason ?? "failed"}`,
    }
  }
  if (t.state === "RUNNING" && attempt?.ready && attempt.endpoint)
    return { state: "ready", url: attempt.endpoint }
  if (t.state === "PENDING" && t.attempts.length === 0)
    return { state: "pending", ...(t.pendingReason ? { detail: t.pendingReason } : {}) }
  const tries = t.attempts.length
  const detail =
    t.state === "RUNNING"
      ? attempt?.message || undefined
      : tries > 1 || (t.state === "PENDING" && tries > 0)
        ? `restarting (attempt ${t.state === "PENDING" ? tries + 1 : tries})${t.pendingReason ? `: ${t.pendingReason}` : ""}`
        : undefined
  return { state: "starting", ...(detail ? { detail } : {}) }
}

/**
 * The address the router of a serving job keeps: where its latest attempt listened, else the swarm's
 * URL when the job was made. Pure; undefined until a router of the swarm has listened somewhere.
 */
export function routerAddress(job: Job, router: Task): URL | undefined {
  const address = router.attempts.findLast((a) => a.endpoint)?.endpoint ?? job.serving?.routerUrl
  return address && URL.canParse(address) ? new URL(address) : undefined
}

/** The port a new attempt of the router must listen on; undefined when it may pick one. */
export function routerPort(job: Job, router: Task): number | undefined {
  const port = Number(routerAddress(job, router)?.port)
  return Number.isInteger(port) && port > 0 ? port : undefined
}

/** The host the router listened on (a worker's address), to place it there again. */
export function routerHost(job: Job, router: Task): string | undefined {
  return routerAddress(job, router)?.hostname.replace(/^\[|\]$/g, "") || undefined
}

/** Failed attempts in a row, none of them ever ready, after which a serving task counts as crash-looping. */
export const CrashLoopAttempts = 5

/** Whether the task's last `CrashLoopAttempts` finished attempts all failed before they were ready. */
function crashLoops(t: Task): boolean {
  const ended = t.attempts.filter((a) => a.finishedAt).slice(-CrashLoopAttempts)
  return ended.length === CrashLoopAttempts && ended.every((a) => a.state === "FAILED" && !a.ready)
}
