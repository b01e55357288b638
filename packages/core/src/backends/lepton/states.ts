/**
 * What Lepton's state names mean for swarmplane (backend-contracts.md Part A.5, A.6). Pure:
 *
 * - `deploymentPhase`: a deployment's `state`, its replicas' readiness and whether the health check
 *   answered give a swarm phase, replica counts and a detail in words;
 * - `readJob` then `jobOutcome`: a job's status gives what it means for the task's attempt, in the
 *   style of the Slurm backend's `mapSlurmState`/`toOutcome`: still waiting in Lepton's queue (a reason
 *   for `pendingReason`), still starting, running, or an outcome of model/outcome.ts.
 *
 * A job stopped or deleted on Lepton while swarmplane still wanted it is a failure
 * (`stopped_on_lepton`, against the failure budget, as Slurm's `cancelled_on_cluster`), never a
 * silent end. A state name this code does not know (Lepton's own unknown is `""`) changes nothing and
 * is reported with its raw name, so a new Lepton state is seen rather than guessed at.
 */
import type { Outcome } from "../../model/outcome"
import type { SwarmPhase } from "../../model/states"
import type { Swarm } from "../../model/swarm"
import type { JobHistoryEntry, LeptonJob, Readiness } from "./types"

/** `"Not Ready"` → `"Not Ready"`, `""` / absent → `""` (shown as such in messages). */
const quoted = (state: string) => JSON.stringify(state)

export interface DeploymentView {
  /** `status.state` as Lepton sent it. */
  state: string | null | undefined
  /** `GET /deployments/{name}/readiness`: replica id → entries, the first the current one. */
  readiness?: Readiness
  /** The swarm's health path answered 200 through the deployment's endpoint. */
  healthy?: boolean
  /** Replicas asked for (`min_replicas`, or the autoscaler's desired count). */
  replicas: number
  /**
   * The swarm asks for a fixed 0 replicas, so Lepton stopping the deployment is what was asked. (An
   * autoscaled swarm whose autoscaler is at 0 is not: its endpoint must stay known to wake it.)
   */
  scaledToZero?: boolean
  /** swarmplane asked Lepton to delete the deployment (the swarm is being deleted or torn down). */
  deleteRequested?: boolean
}

export interface DeploymentPhase {
  phase: SwarmPhase
  detail?: string
  replicas: Swarm["replicaStatus"]
  /** Nothing of the deployment runs any more (a teardown is complete). */
  idle?: boolean
}

/** Readiness reasons that mean a replica will not become ready without someone acting. */
const Fatal = ["ConfigError", "SystemError"]
const Rolling = ["Starting", "Updating", "Scaling", "Restarting", "Migrating"]
const Unasked: Record<string, string> = {
  Stopped: "Lepton has stopped the deployment",
  Stopping: "Lepton is stopping the deployment",
  Deleting: "Lepton is deleting the deployment",
}

/** The replicas of a readiness map, by id order, with their current reason. */
function replicasOf(readiness: Readiness | undefined): {
  items: Swarm["replicaStatus"]["items"]
  reasons: { reason: string; message?: string }[]
} {
  const ids = Object.keys(readiness ?? {}).sort()
  const reasons = ids.map((id) => {
    const first = readiness?.[id]?.[0]
    return { reason: first?.reason ?? "Unknown", message: first?.message ?? undefined }
  })
  const items = ids.map((id, index) => ({
    index,
    state: reasons[index]!.reason,
    ...(reasons[index]!.message ? { message: `${id}: ${reasons[index]!.message}` } : { message: id }),
  }))
  return { items, reasons }
}

/** `ConfigError: image not found` for the first replica with one of these reasons. */
function firstWith(reasons: { reason: string; message?: string }[], wanted: string[]): string | undefined {
  const hit = reasons.find((r) => wanted.includes(r.reason))
  return hit ? `${hit.reason}${hit.message ? `: ${hit.message}` : ""}` : undefined
}

/** A swarm's phase from its Lepton deployment. */
export function deploymentPhase(view: DeploymentView): DeploymentPhase {
  const state = view.state ?? ""
  const { items, reasons } = replicasOf(view.readiness)
  const ready = reasons.filter((r) => r.reason === "Ready").length
  const replicas = { ready, total: view.replicas, items }
  const counted = `${ready}/${view.replicas} replicas ready`
  const noCapacity = firstWith(reasons, ["NoCapacity"])
  const at = (phase: SwarmPhase, detail?: string, idle?: boolean): DeploymentPhase => ({
    phase,
    ...(detail ? { detail } : {}),
    replicas,
    ...(idle !== undefined ? { idle } : {}),
  })

  if (state === "Ready")
    return view.healthy
      ? at("RUNNING")
      : at(
          "INITIALIZING",
          `Lepton reports the deployment Ready; its health check has not answered 200 yet (${counted})`,
        )
  if (Rolling.includes(state)) {
    if (ready > 0) return at("INITIALIZING", `Lepton: ${state} (${counted})`)
    return at("PENDING", `Lepton: ${state}${noCapacity ? `; ${noCapacity}` : ""} (${counted})`)
  }
  if (state === "Not Ready") {
    const fatal = firstWith(reasons, Fatal)
    if (fatal) return at("FAILED", `Lepton: a replica cannot start: ${fatal}`)
    if (noCapacity && ready === 0)
      return at("PENDING", `Lepton: waiting for capacity in the node group (${noCapacity})`)
    return at("INITIALIZING", `Lepton: Not Ready (${counted})`)
  }
  if (state === "Stopped" || state === "Stopping" || state === "Deleting") {
    // A teardown swarmplane asked for: done once nothing runs; Lepton finishes a delete it accepted.
    if (view.deleteRequested)
      return at("STOPPED", state === "Stopped" ? undefined : `Lepton: ${state}`, state === "Stopped")
    // A swarm scaled to 0 replicas is stopped as asked (Lepton stops a deployment whose
    // `min_replicas` is 0): it serves nothing, and scaling it up again starts it over.
    if (view.scaledToZero && state !== "Deleting")
      return at("STOPPED", `Lepton: ${state}; the swarm asks for 0 replicas`, state === "Stopped")
    return at("FAILED", `${Unasked[state]}, not through swarmplane`)
  }
  if (state === "Error") {
    const why = firstWith(reasons, [...Fatal, "NoCapacity", "Unknown"])
    return at("FAILED", `Lepton reports the deployment in Error${why ? `: ${why}` : ""}`)
  }
  return at("UNKNOWN", `Lepton reports an unknown deployment state ${quoted(state)} (${counted})`)
}

/** A Lepton job as swarmplane reads it. `state` is the raw name. */
export type JobReading =
  /** Still in Lepton's queue: `message` is for `pendingReason`. */
  | { kind: "waiting"; state: string; message: string }
  /** Its workers are being started (`Running` with fewer ready than active). */
  | { kind: "starting"; state: string; message: string }
  | { kind: "running"; state: string }
  | { kind: "succeeded"; state: string }
  | { kind: "failed"; state: string; reason: "job_failed" | "stopped_on_lepton"; message: string }
  /** swarmplane stopped it and Lepton no longer runs it. */
  | { kind: "stopped"; state: string }
  /** swarmplane stopped it and Lepton is still shutting it down. */
  | { kind: "stopping"; state: string; message: string }
  | { kind: "unknown"; state: string; message: string }

const Waiting: Record<string, string> = {
  Starting: "Lepton: starting the job",
  Queueing: "Lepton: queued, waiting for capacity or quota in the node group",
  Awaiting: "Lepton: awaiting its turn (capacity, quota or its start time)",
  PendingRetry: "Lepton: waiting to retry after a failure",
  Restarting: "Lepton: restarting the job's workers",
}
const Stopped = ["Stopped", "Deleted"]
const Stopping = ["Stopping", "Deleting", "Terminating"]

/** The words of a failure: the status's own, else the newest history entry's that has some. */
function failureWords(status: NonNullable<LeptonJob["status"]>): string | undefined {
  const own = [status.reason, status.message].filter(Boolean).join(": ")
  if (own) return own
  for (const entry of [...(status.job_history ?? [])].reverse()) {
    const words = [entry.reason, entry.message].filter(Boolean).join(": ")
    if (words) return words
  }
  return undefined
}

/**
 * What a job's status means. `stopRequested`: swarmplane stopped (or deleted) this job itself, so its
 * ending is the stop swarmplane asked for, not a failure.
 */
export function readJob(job: Pick<LeptonJob, "metadata" | "status">, stopRequested = false): JobReading {
  const status = job.status ?? {}
  const state = status.state ?? ""
  const id = job.metadata.id
  const workers = (n: number | null | undefined) => n ?? 0
  if (Object.hasOwn(Waiting, state)) return { kind: "waiting", state, message: Waiting[state]! }
  if (state === "Running") {
    const ready = workers(status.ready)
    const active = workers(status.active)
    if (ready < active)
      return { kind: "starting", state, message: `Lepton: ${ready} of ${active} workers ready` }
    return { kind: "running", state }
  }
  if (state === "Completed") return { kind: "succeeded", state }
  if (state === "Failed") {
    const words = failureWords(status)
    const failed = workers(status.failed)
    return {
      kind: "failed",
      state,
      reason: "job_failed",
      message: `Lepton job ${id} failed${words ? `: ${words}` : ""}${failed ? ` (${failed} worker${failed === 1 ? "" : "s"} failed)` : ""}`,
    }
  }
  if (Stopped.includes(state) || Stopping.includes(state)) {
    if (stopRequested)
      return Stopped.includes(state)
        ? { kind: "stopped", state }
        : { kind: "stopping", state, message: `Lepton: ${state}` }
    return {
      kind: "failed",
      state,
      reason: "stopped_on_lepton",
      message: `Lepton job ${id} is ${state} on Lepton, not through swarmplane`,
    }
  }
  if (state === "Archived") {
    const last: JobHistoryEntry | undefined = status.job_history?.at(-1)
    if (last?.state && last.state !== "Archived")
      return readJob(
        { metadata: job.metadata, status: { ...last, job_history: status.job_history } },
        stopRequested,
      )
    return {
      kind: "unknown",
      state,
      message: `Lepton job ${id} is Archived with no history of how it ended`,
    }
  }
  return { kind: "unknown", state, message: `Lepton job ${id} is in an unknown state ${quoted(state)}` }
}

/**
 * The outcome for an attempt; `undefined` while it waits or starts on Lepton (the task keeps its
 * state; a waiting message goes to `pendingReason`) and for an unknown state. `target`: the Lepton job id.
 */
export function jobOutcome(reading: JobReading, attemptUid: string, target?: string): Outcome | undefined {
  switch (reading.kind) {
    case "waiting":
    case "starting":
    case "stopping":
    case "unknown":
      return undefined
    case "running":
      return { kind: "running", attemptUid, ...(target ? { target } : {}) }
    case "succeeded":
      return { kind: "succeeded", attemptUid, exitCode: 0 }
    case "failed":
      return { kind: "failed", attemptUid, reason: reading.reason, message: reading.message }
    case "stopped":
      return { kind: "stopped", attemptUid }
  }
}
