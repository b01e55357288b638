/**
 * What one pass's listing of a namespace says of the live and stopping attempts. Pure: the Jobs and
 * pods swarmplane made (listed by its label selector) and the namespace's Kueue Workloads (joined to
 * their Jobs by owner) go in with the time; transitions, queue reasons and attempts to stop again come
 * out, as in the lepton backend's observe.ts. An attempt's Job is found by the name swarmplane gave it
 * (`attempt.submission`), so a create whose answer was lost is seen too. A gang member's is its gang's
 * Indexed Job, and its pods are those of its completion index (`<job>#<index>`). One the cluster no longer
 * lists is lost after `LostAfterMs` (a few passes), never silently left running.
 */
import type { ReconcileResult, TaskRef } from "../protocol"
import { CompletionIndexLabel, parseSubmission } from "./spec"
import { attemptOutcome, readAttempt } from "./states"
import type { Job, Pod, Workload } from "./types"

/** An attempt whose Job the cluster has not listed this long after the attempt was made counts as lost. */
export const LostAfterMs = 60_000

/** The label Kubernetes puts on a Job's pods (C.5). */
export const JobNameLabel = "batch.kubernetes.io/job-name"

export interface NamespaceIndex {
  jobs: Map<string, Job>
  /** By the Job's name. */
  workloads: Map<string, Workload>
  /** By the Job's name. */
  pods: Map<string, Pod[]>
}

/** One namespace's listing, indexed by Job name. A Workload belongs to the Job that owns it (by uid). */
export function indexNamespace(jobs: Job[], pods: Pod[], workloads: Workload[]): NamespaceIndex {
  const byName = new Map<string, Job>()
  const nameOfUid = new Map<string, string>()
  for (const job of jobs) {
    const name = job.metadata.name
    if (!name) continue
    byName.set(name, job)
    if (job.metadata.uid) nameOfUid.set(job.metadata.uid, name)
  }
  const byJob = new Map<string, Workload>()
  for (const w of workloads) {
    const owner = w.metadata.ownerReferences?.find((r) => r.kind === "Job" && r.controller !== false)
    const name = owner ? nameOfUid.get(owner.uid) : undefined
    if (name) byJob.set(name, w)
  }
  const podsOf = new Map<string, Pod[]>()
  for (const pod of pods) {
    const name = pod.metadata.labels?.[JobNameLabel] ?? pod.metadata.labels?.["job-name"]
    if (name && byName.has(name)) podsOf.set(name, [...(podsOf.get(name) ?? []), pod])
  }
  return { jobs: byName, workloads: byJob, pods: podsOf }
}

export type Observation = Required<Pick<ReconcileResult, "transitions" | "waiting" | "unstopped">> & {
  /** Attempts in a state this code does not know, in words (logged; the task is left as it is). */
  unknown: string[]
}

/** Whether a Job has ended (or is going): a stopped attempt's Job in this state is done with. */
const ended = (job: Job) =>
  Boolean(job.metadata.deletionTimestamp) ||
  (job.status?.conditions ?? []).some((c) => ["Complete", "Failed"].includes(c.type) && c.status === "True")

export function observeNamespace(
  launched: readonly TaskRef[],
  stopping: readonly TaskRef[],
  index: NamespaceIndex,
  now: number,
  options: { imagePullGraceMs?: number } = {},
): Observation {
  const out: Observation = { transitions: [], waiting: [], unstopped: [], unknown: [] }
  for (const ref of launched) {
    const attempt = ref.task.data.attempts.at(-1)
    if (!attempt?.submission) continue
    const uid = attempt.attemptUid
    const submitted = attempt.target ?? attempt.submission
    const { name, index: member } = parseSubmission(submitted)
    const job = index.jobs.get(name)
    if (!job) {
      // Created (or being created) but not listed: after a few passes the Job is gone from the cluster.
      if (attempt.target && now - Date.parse(attempt.createdAt) > LostAfterMs)
        out.transitions.push({
          ref,
          outcome: {
            kind: "worker_failed",
            attemptUid: uid,
            reason: "lost",
            message: `the cluster no longer lists Job ${name} (deleted outside swarmplane?)`,
          },
        })
      continue
    }
    const pods = index.pods.get(name) ?? []
    const own =
      member === undefined
        ? pods
        : pods.filter((p) => p.metadata.labels?.[CompletionIndexLabel] === String(member))
    let reading = readAttempt({ job, workload: index.workloads.get(name), pods: own, now, ...options })
    // A gang's Job fails whole when one member's pod fails: that member fails (and swarmplane retries
    // the gang), the others wait to be stopped rather than spend their own failure budgets.
    if (
      member !== undefined &&
      (reading.kind === "failed" || reading.kind === "lost") &&
      !own.some((p) => p.status?.phase === "Failed" && !p.metadata.deletionTimestamp) &&
      pods.some((p) => p.status?.phase === "Failed")
    )
      reading = {
        kind: "starting",
        message: `another member of gang Job ${name} failed; the gang is retried`,
      }
    if (reading.kind === "waiting" || reading.kind === "starting")
      out.waiting.push({ ref, reason: reading.message })
    if (reading.kind === "unknown") out.unknown.push(reading.message)
    const outcome = attemptOutcome(reading, uid, submitted)
    // A task already RUNNING is not told so again every pass.
    if (outcome && !(outcome.kind === "running" && ref.task.data.state === "RUNNING"))
      out.transitions.push({ ref, outcome })
  }
  // What swarmplane ended: stopped once the Job is gone or has ended, else deleted again.
  for (const ref of stopping) {
    const uid = ref.task.data.stopping?.attemptUid
    const attempt = ref.task.data.attempts.find((a) => a.attemptUid === uid)
    if (!uid || !attempt) continue
    const submitted = attempt.target ?? attempt.submission
    const job = submitted ? index.jobs.get(parseSubmission(submitted).name) : undefined
    if (!job || ended(job)) out.transitions.push({ ref, outcome: { kind: "stopped", attemptUid: uid } })
    else out.unstopped.push({ ref, target: submitted })
  }
  return out
}
