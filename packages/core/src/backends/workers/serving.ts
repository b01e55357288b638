/**
 * Swarms on a `workers` backend: the replicas and a router run as the tasks of an internal serving
 * job (one per swarm generation: `srv-<swarm>-g<generation>`), placed by the scheduler and pulled by
 * agents like any task. Replica tasks serve on the `PORT` their agent picks; the router task (the last
 * index) is the agent's proxy over the ready replicas and gives the swarm its one endpoint.
 *
 * That endpoint is the swarm's for its life: the first router picks its port, and every later router
 * of the swarm (a retry, a router moved off a lost worker, a new generation, a control plane restarted)
 * is told to listen on it again and is placed on the same host when it can be, so on one host the URL
 * never changes. A router moved to another host keeps the port but not the host.
 */

import type { Job, JobSpec, Task } from "../../model/job"
import { FailedTaskStates, isFinished, isTerminalTask, type TaskState } from "../../model/states"
import type { Swarm } from "../../model/swarm"
import { withPendingReason } from "../../rules/job-status"
import type { BackendDeps, ServingStatus } from "../protocol"

export function servingJobId(swarm: string, generation: number): string {
  return `srv-${swarm}-g${generation}`
}

/** The replica command: the swarm's own, the built-in echo server for `model: echo`, or vLLM. */
export function replicaCommand(swarm: Swarm): string[] {
  if (swarm.command) return [...swarm.command, ...swarm.args]
  if (swarm.model === "echo") return ["swarmplane-agent", "echo-server", ...swarm.args]
  return ["sh", "-c", 'exec vllm serve "$MODEL" --host 0.0.0.0 --port "$PORT" "$@"', "vllm", ...swarm.args]
}

function servingSpec(swarm: Swarm): JobSpec {
  return {
    name: swarm.name,
    backendId: swarm.backendId,
    command: replicaCommand(swarm),
    env: { ...swarm.env, MODEL: swarm.model },
    resources: { cpu: swarm.cpusPerReplica, memoryMiB: swarm.memoryMiBPerReplica, gpu: swarm.gpusPerReplica },
    constraints: [],
    preferences: [],
    tasks: swarm.replicas + 1,
    priority: "production",
    // Servers are restarted when they exit; the budget bounds a crash loop, not a long life.
    maxRetriesFailure: 100,
    maxRetriesPreemption: 100,
    maxTaskFailures: 0,
    labels: { "swarmplane.swarm": swarm.name },
  }
}

export function Serving(rt: BackendDeps) {
  /**
   * Cancel the serving jobs of every generation below `below`, from the one the swarm's handle names
   * (or the first): a generation whose handle was never saved (a pass that lost a race) is not left running.
   */
  const cancelOlder = async (swarm: Swarm, below: number) => {
    const from = Number(swarm.handle?.meta.generation ?? 1)
    for (let g = Math.max(1, from); g < below; g++) {
      const job = await rt.repos.jobs.get(swarm.project, servingJobId(swarm.name, g))
      if (job && !job.cancelRequested && !["SUCCEEDED", "FAILED", "CANCELLED"].includes(job.status))
        await rt.transitions.jobs.cancel(swarm.project, job.id)
    }
  }
  return {
    /** Make sure the current generation's serving job exists; cancel older generations' jobs. */
    async createOrUpdate(swarm: Swarm): Promise<NonNullable<Swarm["handle"]>> {
      const { jobs } = rt.transitions
      const id = servingJobId(swarm.name, swarm.generation)
      await jobs.create(swarm.project, id, servingSpec(swarm), swarm.backendId!, {
        serving: {
          swarm: swarm.name,
          generation: swarm.generation,
          replicas: swarm.replicas,
          healthPath: swarm.healthPath,
          // A new generation's router keeps the address the swarm has (one this backend gave it).
          ...(swarm.url && typeof swarm.handle?.meta.job === "string" ? { routerUrl: swarm.url } : {}),
        },
      })
      await cancelOlder(swarm, swarm.generation)
      return { id, url: "", meta: { generation: swarm.generation, job: id } }
    },

    async status(swarm: Swarm): Promise<ServingStatus | { gone: true }> {
      if (!swarm.handle) return { gone: true }
      const loaded = await rt.repos.jobs.load(swarm.project, swarm.handle.id)
      if (!loaded?.job.data.serving) return { gone: true }
      return servingStatus(
        loaded.job.data,
        loaded.tasks.map((t) => withPendingReason(loaded.job.data, t.data)),
      )
    },

    /** Stop everything of the swarm: its serving job is cancelled; the agents stop the processes. */
    async delete(swarm: Swarm): Promise<void> {
      await cancelOlder(swarm, swarm.generation + 1)
    },
  }
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

const replicaState = (t: Task): string => {
  const attempt = t.attempts.at(-1)
  if (t.state === "RUNNING" && attempt?.ready) return "READY"
  return t.state
}

/** A serving job's tasks, read as a swarm: phase, endpoint, per-replica state. Pure. */
export function servingStatus(job: Job, tasks: Task[]): ServingStatus {
  const replicas = job.serving!.replicas
  const sorted = [...tasks].sort((a, b) => a.index - b.index)
  const replicaTasks = sorted.filter((t) => t.index < replicas)
  const router = sorted.find((t) => t.index === replicas)
  const items = replicaTasks.map((t) => ({
    index: t.index,
    state: replicaState(t),
    ...(t.attempts.at(-1)?.endpoint && t.state === "RUNNING" ? { url: t.attempts.at(-1)!.endpoint! } : {}),
    ...(t.pendingReason ? { message: t.pendingReason } : {}),
  }))
  const ready = items.filter((i) => i.state === "READY").length
  // Nothing of it runs or waits any more: a teardown is complete, whatever the phase.
  const idle = isFinished(job.status) || sorted.every((t) => isTerminalTask(t.state))
  const replicaStatus = { ready, total: replicas, items }
  const what = (t: Task) => (t.index === replicas ? "the router" : `replica ${t.index}`)
  // A server that keeps failing before it is ever ready will not come up by itself: the swarm fails
  // (and is torn down) instead of restarting it for hours, and says why.
  const looping = sorted.find((t) => crashLoops(t))
  if (looping) {
    const last = looping.attempts.filter((a) => a.finishedAt).at(-1)
    return {
      phase: "FAILED",
      detail: `${what(looping)} keeps failing: ${CrashLoopAttempts} attempts in a row ended before it was ready; the last: ${last?.message ?? last?.reason ?? "failed"}`,
      replicas: replicaStatus,
      generation: job.serving!.generation,
      ...(idle ? { idle } : {}),
    }
  }
  const failed = sorted.find((t) => (FailedTaskStates as readonly TaskState[]).includes(t.state))
  if (failed) {
    const exit = failed.attempts.at(-1)?.exitCode
    return {
      phase: "FAILED",
      detail: `${what(failed)} ${failed.state.toLowerCase()}${exit !== undefined ? ` (exit code ${exit})` : ""}${failed.pendingReason ? `: ${failed.pendingReason}` : ""}`,
      replicas: replicaStatus,
      generation: job.serving!.generation,
      ...(idle ? { idle } : {}),
    }
  }
  if (idle) return { phase: "STOPPED", replicas: replicaStatus, generation: job.serving!.generation, idle }
  const routerAttempt = router?.attempts.at(-1)
  if (router?.state === "RUNNING" && routerAttempt?.ready && routerAttempt.endpoint && ready === replicas)
    return {
      phase: "RUNNING",
      url: routerAttempt.endpoint,
      replicas: replicaStatus,
      generation: job.serving!.generation,
    }
  // Why a replica is not ready yet, when it says (a failure it is retrying after, a reason it waits).
  const trouble = replicaTasks.find((t) => t.pendingReason && t.state === "PENDING")
  const routerDown = router && routerTrouble(router)
  if (sorted.some((t) => t.state !== "PENDING"))
    return {
      phase: "INITIALIZING",
      detail: `${ready}/${replicas} replicas ready${routerDown ? `; ${routerDown}` : ""}${trouble ? `; ${what(trouble)}: ${trouble.pendingReason}` : ""}`,
      replicas: replicaStatus,
      generation: job.serving!.generation,
    }
  const reason = sorted.find((t) => t.pendingReason)?.pendingReason
  return {
    phase: "PENDING",
    ...(reason ? { detail: reason } : {}),
    replicas: replicaStatus,
    generation: job.serving!.generation,
  }
}

/**
 * Why a router that served, or was meant to, is not serving now, in words: what its agent says of it
 * (restarting it, waiting for its port), or that the control plane is placing it again. Undefined while
 * it serves, and while a first router waits for its replicas.
 */
function routerTrouble(router: Task): string | undefined {
  const attempt = router.attempts.at(-1)
  if (router.state === "RUNNING") return attempt?.ready ? undefined : attempt?.message
  const tries = router.attempts.length
  if (router.state === "PENDING" && tries > 0)
    return `router restarting (attempt ${tries + 1})${router.pendingReason ? `: ${router.pendingReason}` : ""}`
  if ((router.state === "ASSIGNED" || router.state === "BUILDING") && tries > 1)
    return `router restarting (attempt ${tries})`
  return undefined
}
