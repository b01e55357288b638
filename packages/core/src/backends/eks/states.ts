/**
 * What a task attempt's Job, its Kueue Workload and its pods mean for swarmplane (backend-contracts.md
 * Parts C.3, C.6, C.7, D.1). Pure: the three objects as one pass listed them, and the time, go in;
 * `readAttempt` says whether the attempt still waits in Kueue's queue (with Kueue's own words, for
 * `pendingReason`), is admitted and starting, runs, or ended, and `attemptOutcome` turns that into an
 * outcome of model/outcome.ts, as the lepton backend's states.ts does.
 *
 * - Waiting: no Workload yet, or `QuotaReserved` not True (Kueue's message, e.g. `couldn't assign
 *   flavors to pod set main: insufficient unused quota ...`).
 * - Admitted, pod not running yet: still ASSIGNED, with what holds the pod (unschedulable, pulling).
 *   An image that cannot be pulled fails the attempt after `ImagePullGraceMs` (it may be a registry
 *   blip; a wrong name does not heal).
 * - A Workload Kueue evicted (preemption, node failure, ...) or a pod Kubernetes evicted: preempted
 *   (against the preemption budget; the Job is deleted and a new attempt queued).
 * - Succeeded, or failed with the container's exit code and reason (`OOMKilled`, `Error`).
 * - A Job that failed on its backoff limit with no pod left: its pod was deleted before it ended (a node
 *   gone, `kubectl delete pod`), which Kubernetes counts as a failure: lost, a WORKER_FAILED attempt
 *   (the preemption budget, as Iris counts a pod gone), not the program's failure.
 * - A state this code does not know changes nothing and is reported with its raw name.
 */
import type { Outcome } from "../../model/outcome"
import type { Condition, ContainerStatus, Job, Pod, Workload } from "./types"

/** An attempt whose image cannot be pulled this long after its pod was made has failed (the default of `imagePullGraceS`). */
export const ImagePullGraceMs = 120_000

/** Waiting reasons of a container whose image cannot be pulled (D.1). */
export const ImagePullReasons = [
  "ErrImagePull",
  "ImagePullBackOff",
  "ImageInspectError",
  "ErrImageNeverPull",
  "InvalidImageName",
  "RegistryUnavailable",
]
/** Waiting reasons that do not heal by waiting: the pod's spec or its config is wrong. */
const ConfigReasons = ["CreateContainerConfigError", "CreateContainerError", "RunContainerError"]

/** An attempt as one pass saw it. */
export type AttemptReading =
  /** In Kueue's queue: `message` is for `pendingReason`. */
  | { kind: "waiting"; message: string }
  /** Admitted by Kueue; its pod is not running yet. */
  | { kind: "starting"; message: string }
  | { kind: "running" }
  | { kind: "succeeded"; exitCode: number }
  | { kind: "failed"; reason: string; message: string; exitCode?: number }
  | { kind: "preempted"; reason: string; message: string }
  /** Its pod is gone before it ended: not the program's failure. */
  | { kind: "lost"; message: string }
  | { kind: "unknown"; state: string; message: string }

export interface AttemptView {
  job: Job
  /** The Job's Kueue Workload, when Kueue has made it. */
  workload?: Workload
  /** The Job's pods (a Job of one completion has one, or none yet). */
  pods: Pod[]
  now: number
  /** How long an image that cannot be pulled is waited for; `ImagePullGraceMs` when absent. */
  imagePullGraceMs?: number
}

const condition = (conditions: Condition[] | undefined, type: string) =>
  conditions?.find((c) => c.type === type)
const isTrue = (conditions: Condition[] | undefined, type: string) =>
  condition(conditions, type)?.status === "True"
const words = (...parts: (string | undefined)[]) => parts.filter(Boolean).join(": ")

/** The pod made last (a Job of one completion and `backoffLimit: 0` makes one per admission). */
function newest(pods: Pod[]): Pod | undefined {
  return [...pods]
    .filter((p) => !p.metadata.deletionTimestamp)
    .sort((a, b) => (a.metadata.creationTimestamp ?? "").localeCompare(b.metadata.creationTimestamp ?? ""))
    .at(-1)
}

/** The main (first) container's status. */
const mainContainer = (pod: Pod): ContainerStatus | undefined => pod.status?.containerStatuses?.[0]

/** How a terminated container ended, as a failure. */
function terminatedFailure(jobName: string, container: ContainerStatus): AttemptReading | undefined {
  const t = container.state?.terminated
  if (!t) return undefined
  if (t.exitCode === 0 && t.reason !== "OOMKilled") return { kind: "succeeded", exitCode: 0 }
  const oom = t.reason === "OOMKilled"
  return {
    kind: "failed",
    reason: oom ? "oom_killed" : "exit_code",
    exitCode: t.exitCode,
    message: `Job ${jobName}: container ${container.name} ${oom ? "was OOMKilled (out of memory)" : `exited with code ${t.exitCode}`}${t.reason && !oom ? ` (${t.reason})` : ""}${t.message ? `: ${t.message}` : ""}`,
  }
}

/** Why Kueue has not admitted the Workload, in Kueue's words. */
function queuedMessage(workload: Workload | undefined): string {
  if (!workload) return "Kueue: waiting for Kueue to make the Job's Workload"
  const reserved = condition(workload.status?.conditions, "QuotaReserved")
  if (reserved?.message) return `Kueue: ${reserved.message}`
  return `Kueue: waiting in LocalQueue ${workload.spec?.queueName ?? "?"} for quota`
}

/** Whether Kueue evicted the Workload (now, or since it was made: its pods were then removed). */
function eviction(workload: Workload | undefined): { reason: string; message: string } | undefined {
  if (!workload) return undefined
  const evicted = condition(workload.status?.conditions, "Evicted")
  if (evicted?.status === "True")
    return { reason: evicted.reason ?? "Evicted", message: evicted.message ?? "" }
  const past = workload.status?.schedulingStats?.evictions?.find((e) => e.count > 0)
  if (past) {
    const requeued = condition(workload.status?.conditions, "Requeued")
    return { reason: past.reason, message: requeued?.message ?? evicted?.message ?? "" }
  }
  return undefined
}

/** What the attempt's Job, Workload and pods mean now. */
export function readAttempt({
  job,
  workload,
  pods,
  now,
  imagePullGraceMs = ImagePullGraceMs,
}: AttemptView): AttemptReading {
  const name = job.metadata.name ?? "?"
  const jobConditions = job.status?.conditions
  const pod = newest(pods)
  const container = pod ? mainContainer(pod) : undefined

  if (isTrue(jobConditions, "Complete") || isTrue(jobConditions, "SuccessCriteriaMet"))
    return { kind: "succeeded", exitCode: 0 }
  if (isTrue(jobConditions, "Failed") || isTrue(jobConditions, "FailureTarget")) {
    const ended = container ? terminatedFailure(name, container) : undefined
    if (ended?.kind === "failed") return ended
    const failed = condition(jobConditions, "Failed") ?? condition(jobConditions, "FailureTarget")
    if (failed?.reason === "BackoffLimitExceeded" && !pods.some((p) => !p.metadata.deletionTimestamp))
      return {
        kind: "lost",
        message: `the pod of Job ${name} was deleted before it ended (its node gone, or deleted outside swarmplane)`,
      }
    return {
      kind: "failed",
      reason: "job_failed",
      message: `Job ${name} failed${failed?.reason || failed?.message ? `: ${words(failed.reason, failed.message)}` : ""}`,
    }
  }

  const evicted = eviction(workload)
  if (evicted)
    return {
      kind: "preempted",
      reason: evicted.reason === "Preempted" ? "preempted" : "evicted",
      message: `Kueue evicted the Workload of Job ${name}${evicted.message ? `: ${words(evicted.reason, evicted.message)}` : ` (${evicted.reason})`}`,
    }

  if (pod) {
    const phase = pod.status?.phase ?? "Pending"
    const podReason = pod.status?.reason
    const disrupted = condition(pod.status?.conditions, "DisruptionTarget")
    if (
      phase === "Failed" &&
      (podReason === "Evicted" || podReason === "Preempting" || disrupted?.status === "True")
    )
      return {
        kind: "preempted",
        reason: "evicted",
        message: `Kubernetes evicted pod ${pod.metadata.name}: ${words(podReason ?? disrupted?.reason, pod.status?.message ?? disrupted?.message) || "no reason given"}`,
      }
    if (phase === "Succeeded") return { kind: "succeeded", exitCode: 0 }
    if (phase === "Failed") {
      const ended = container ? terminatedFailure(name, container) : undefined
      if (ended) return ended
      return {
        kind: "failed",
        reason: "pod_failed",
        message: `Job ${name}: pod ${pod.metadata.name} failed${podReason ? `: ${words(podReason, pod.status?.message)}` : ""}`,
      }
    }
    if (phase === "Running") {
      // A container that ended while the pod is still marked Running: its end is what counts.
      const ended = container ? terminatedFailure(name, container) : undefined
      if (ended?.kind === "failed") return ended
      return { kind: "running" }
    }
    if (phase === "Pending") {
      const waiting = container?.state?.waiting
      const since = Date.parse(pod.status?.startTime ?? pod.metadata.creationTimestamp ?? "")
      const late = Number.isFinite(since) && now - since >= imagePullGraceMs
      if (
        waiting?.reason &&
        (ImagePullReasons.includes(waiting.reason) || ConfigReasons.includes(waiting.reason))
      ) {
        const message = `Job ${name}: pod ${pod.metadata.name} cannot start: ${words(waiting.reason, waiting.message)}`
        if (late)
          return {
            kind: "failed",
            reason: ImagePullReasons.includes(waiting.reason) ? "image_pull" : "container_config",
            message,
          }
        return { kind: "starting", message }
      }
      const scheduled = condition(pod.status?.conditions, "PodScheduled")
      if (scheduled?.status === "False")
        return {
          kind: "starting",
          message: `Kubernetes: pod not scheduled: ${words(scheduled.reason, scheduled.message)}`,
        }
      return {
        kind: "starting",
        message: `Kubernetes: starting pod ${pod.metadata.name}${waiting?.reason ? ` (${waiting.reason})` : ""}`,
      }
    }
    return {
      kind: "unknown",
      state: phase,
      message: `pod ${pod.metadata.name} of Job ${name} is in an unknown phase ${JSON.stringify(phase)}`,
    }
  }

  if (!isTrue(workload?.status?.conditions, "QuotaReserved"))
    return { kind: "waiting", message: queuedMessage(workload) }
  const admission = workload?.status?.admission
  if (isTrue(workload?.status?.conditions, "Admitted"))
    return {
      kind: "starting",
      message: `Kueue: admitted${admission?.clusterQueue ? ` in ClusterQueue ${admission.clusterQueue}` : ""}; waiting for its pod`,
    }
  const admitted = condition(workload?.status?.conditions, "Admitted")
  return {
    kind: "starting",
    message: `Kueue: quota reserved; not admitted yet${admitted?.message ? `: ${admitted.message}` : ""}`,
  }
}

/**
 * The outcome for an attempt; `undefined` while it waits or starts (the task keeps its state; the
 * message goes to `pendingReason`) and for an unknown state. `target`: the Job's name (a gang member's:
 * `<job>#<index>`). A preempted or failed attempt's Job is stopped (deleted) after the commit: Kueue
 * would admit a preempted one again.
 */
export function attemptOutcome(
  reading: AttemptReading,
  attemptUid: string,
  target: string,
): Outcome | undefined {
  switch (reading.kind) {
    case "waiting":
    case "starting":
    case "unknown":
      return undefined
    case "running":
      return { kind: "running", attemptUid, target }
    case "succeeded":
      return { kind: "succeeded", attemptUid, exitCode: reading.exitCode }
    case "failed":
      return {
        kind: "failed",
        attemptUid,
        reason: reading.reason,
        message: reading.message,
        ...(reading.exitCode !== undefined ? { exitCode: reading.exitCode } : {}),
      }
    case "preempted":
      return { kind: "preempted", attemptUid, reason: reading.reason, message: reading.message, stop: true }
    case "lost":
      return { kind: "worker_failed", attemptUid, reason: "pod_lost", message: reading.message }
  }
}
