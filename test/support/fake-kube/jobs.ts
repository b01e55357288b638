/**
 * The fake cluster's Job controller (batch/v1, C.6): defaults on create, pods for an unsuspended Job
 * (`parallelism` at a time until `completions` succeed; Indexed Jobs get `JOB_COMPLETION_INDEX` and
 * one pod per index), `status` counts and conditions (Complete after SuccessCriteriaMet, Failed with
 * BackoffLimitExceeded once more than `backoffLimit` pods failed, Suspended while suspended), pods
 * deleted when the Job is suspended or fails, and garbage collection of pods whose owner is gone.
 * A pod deleted by anyone but this controller before it ended (`kubectl delete pod`, a lost node) counts
 * as failed, as Kubernetes' Job controller counts it with its tracking finalizer since 1.26: `failed` is
 * cumulative, and a Job with `backoffLimit: 0` fails on it (there is no replacement pod).
 */
import { asArray, asObject, condition, isObject, type JsonObject, Types } from "./resources"
import { labelsOf, meta, nameOf, namespaceOf, randomSuffix, type Store } from "./store"

/** Job defaults (as the apiserver fills them) and pod-template labels. */
export function defaultJob(job: JsonObject): void {
  const spec = asObject(job.spec)
  job.spec = spec
  if (spec.parallelism === undefined) spec.parallelism = 1
  if (spec.completions === undefined) spec.completions = spec.parallelism === 1 ? 1 : Number(spec.parallelism)
  spec.backoffLimit ??= 6
  spec.completionMode ??= "NonIndexed"
  spec.suspend ??= false
  spec.manualSelector ??= false
  spec.podReplacementPolicy ??= "TerminatingOrFailed"
}

/** What the apiserver fills once the Job has a uid: its selector and the matching pod-template labels. */
export function selectJobPods(job: JsonObject): void {
  const uid = String(meta(job).uid)
  const spec = asObject(job.spec)
  if (spec.manualSelector === true) return
  spec.selector = { matchLabels: { "batch.kubernetes.io/controller-uid": uid } }
  const template = asObject(spec.template)
  const tm = asObject(template.metadata)
  tm.labels = {
    ...asObject(tm.labels),
    "batch.kubernetes.io/controller-uid": uid,
    "batch.kubernetes.io/job-name": nameOf(job),
    "controller-uid": uid,
    "job-name": nameOf(job),
  }
  template.metadata = tm
  spec.template = template
}

const finished = (job: JsonObject) =>
  asArray(asObject(job.status).conditions).some(
    (c) => ["Complete", "Failed"].includes(String(asObject(c).type)) && asObject(c).status === "True",
  )

export function jobFinished(job: JsonObject): "Complete" | "Failed" | undefined {
  if (!finished(job)) return undefined
  return asArray(asObject(job.status).conditions).some(
    (c) => asObject(c).type === "Failed" && asObject(c).status === "True",
  )
    ? "Failed"
    : "Complete"
}

export class JobController {
  constructor(private readonly store: Store) {}

  /** Per Job uid: its pods not yet ended as the last sync left them, and its pods lost before ending. */
  private readonly tracked = new Map<string, { active: Set<string>; lost: number }>()

  sync(): void {
    this.collectGarbage()
    // Pods by their Job's uid, read once per pass (not once per Job: a pass must stay linear).
    const byJob = new Map<string, JsonObject[]>()
    for (const p of this.store.all(Types.pods)) {
      const uid = labelsOf(p)["batch.kubernetes.io/controller-uid"]
      if (uid !== undefined) byJob.set(uid, [...(byJob.get(uid) ?? []), p])
    }
    const jobs = this.store.all(Types.jobs)
    for (const job of jobs) this.syncJob(job, byJob.get(String(meta(job).uid)) ?? [])
    const live = new Set(jobs.map((j) => String(meta(j).uid)))
    for (const uid of this.tracked.keys()) if (!live.has(uid)) this.tracked.delete(uid)
  }

  /** Pods and Workloads whose controlling owner no longer exists go (Background propagation). */
  private collectGarbage(): void {
    const uids = new Set<string>()
    for (const t of [Types.jobs, Types.deployments])
      for (const o of this.store.all(t)) uids.add(String(meta(o).uid))
    for (const t of [Types.pods, Types.workloads])
      for (const o of this.store.all(t)) {
        const owner = asArray(meta(o).ownerReferences)
          .map(asObject)
          .find((r) => r.controller === true)
        if (owner && !uids.has(String(owner.uid))) {
          if (t === Types.workloads) meta(o).finalizers = []
          this.store.remove(t, namespaceOf(o), nameOf(o))
        }
      }
  }

  /** One Job: `pods` are those it owns, as the pass read them. */
  private syncJob(job: JsonObject, pods: JsonObject[]): void {
    const spec = asObject(job.spec)
    const before = JSON.stringify(job.status ?? null)
    const status = asObject(job.status)
    const now = this.store.timestamp()
    const created: JsonObject[] = []
    const phase = (p: JsonObject) => String(asObject(p.status).phase ?? "Pending")
    const active = pods.filter((p) => !["Succeeded", "Failed"].includes(phase(p)))
    const succeeded = pods.filter((p) => phase(p) === "Succeeded")
    const failed = pods.filter((p) => phase(p) === "Failed")
    const conditions = asArray(status.conditions).map(asObject)
    const setCondition = (type: string, value: string, reason: string, message: string) => {
      const existing = conditions.find((c) => c.type === type)
      if (existing && existing.status === value && existing.reason === reason) return
      const c = condition(type, value, now, reason, message)
      if (existing) Object.assign(existing, c)
      else conditions.push(c)
    }
    const indexOf = (p: JsonObject) => Number(labelsOf(p)["batch.kubernetes.io/job-completion-index"])
    const track = this.tracked.get(String(meta(job).uid)) ?? { active: new Set<string>(), lost: 0 }
    this.tracked.set(String(meta(job).uid), track)
    // Pods this Job had running at the last sync that are gone now, removed by someone else.
    const present = new Set(pods.map(nameOf))
    for (const name of track.active) if (!present.has(name)) track.lost++
    const failedCount = failed.length + track.lost
    const kill = (list: JsonObject[]) => {
      for (const p of list) this.store.remove(Types.pods, namespaceOf(p), nameOf(p))
    }

    if (finished(job)) {
      kill(active)
    } else if (spec.suspend === true) {
      kill(active)
      setCondition("Suspended", "True", "JobSuspended", "Job suspended")
      delete status.startTime
    } else {
      if (conditions.some((c) => c.type === "Suspended" && c.status === "True"))
        setCondition("Suspended", "False", "JobResumed", "Job resumed")
      status.startTime ??= now
      const completions = Number(spec.completions ?? 1)
      const parallelism = Number(spec.parallelism ?? 1)
      const indexed = spec.completionMode === "Indexed"
      const doneIndexes = new Set(succeeded.map(indexOf))
      const allDone = indexed ? doneIndexes.size >= completions : succeeded.length >= completions
      if (failedCount > Number(spec.backoffLimit ?? 6)) {
        kill(active)
        setCondition(
          "FailureTarget",
          "True",
          "BackoffLimitExceeded",
          "Job has reached the specified backoff limit",
        )
        setCondition("Failed", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
      } else if (allDone) {
        kill(active)
        setCondition(
          "SuccessCriteriaMet",
          "True",
          "CompletionsReached",
          "Reached expected number of succeeded pods",
        )
        setCondition("Complete", "True", "CompletionsReached", "Reached expected number of succeeded pods")
        status.completionTime ??= now
      } else if (indexed) {
        const busy = new Set(active.map(indexOf))
        let running = active.length
        for (let i = 0; i < completions && running < parallelism; i++)
          if (!doneIndexes.has(i) && !busy.has(i)) {
            created.push(this.createPod(job, i))
            running++
          }
      } else {
        const want = Math.min(parallelism, completions - succeeded.length)
        for (let i = active.length; i < want; i++) created.push(this.createPod(job))
      }
    }
    // The status, rebuilt in a fixed key order so that an unchanged Job is not rewritten.
    const after = [
      ...pods.filter((p) => this.store.find(Types.pods, namespaceOf(p), nameOf(p)) === p),
      ...created,
    ]
    const count = (f: (p: JsonObject) => boolean) => after.filter(f).length
    track.active = new Set(after.filter((p) => !["Succeeded", "Failed"].includes(phase(p))).map(nameOf))
    const next: JsonObject = {}
    if (conditions.length > 0) next.conditions = conditions
    if (status.startTime !== undefined) next.startTime = status.startTime
    if (status.completionTime !== undefined) next.completionTime = status.completionTime
    const counts: [string, number][] = [
      ["active", count((p) => !["Succeeded", "Failed"].includes(phase(p)))],
      ["succeeded", count((p) => phase(p) === "Succeeded")],
      ["failed", count((p) => phase(p) === "Failed") + track.lost],
    ]
    for (const [k, n] of counts) if (n > 0) next[k] = n
    next.ready = count((p) =>
      asArray(asObject(p.status).conditions).some(
        (c) => asObject(c).type === "Ready" && asObject(c).status === "True",
      ),
    )
    next.terminating = 0
    if (spec.completionMode === "Indexed") {
      const done = after.filter((p) => phase(p) === "Succeeded").map(indexOf)
      next.completedIndexes = ranges([...new Set(done)])
    }
    next.uncountedTerminatedPods = {}
    if (JSON.stringify(next) !== before) {
      job.status = next
      this.store.touch(job)
    }
  }

  private createPod(job: JsonObject, index?: number): JsonObject {
    const m = meta(job)
    const name = nameOf(job)
    const template = structuredClone(asObject(asObject(job.spec).template))
    const tm = asObject(template.metadata)
    const labels: Record<string, string> = {
      ...(asObject(tm.labels) as Record<string, string>),
      "batch.kubernetes.io/controller-uid": String(m.uid),
      "batch.kubernetes.io/job-name": name,
      "controller-uid": String(m.uid),
      "job-name": name,
    }
    const annotations = asObject(tm.annotations)
    const spec = asObject(template.spec)
    if (index !== undefined) {
      labels["batch.kubernetes.io/job-completion-index"] = String(index)
      annotations["batch.kubernetes.io/job-completion-index"] = String(index)
      // As the Job controller does: every container learns its index from the annotation.
      for (const c of asArray(spec.containers))
        if (isObject(c))
          c.env = [
            ...asArray(c.env),
            {
              name: "JOB_COMPLETION_INDEX",
              valueFrom: {
                fieldRef: { fieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']" },
              },
            },
          ]
    }
    if (index !== undefined) spec.hostname ??= `${name}-${index}`
    return this.store.create(Types.pods, namespaceOf(job), {
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        name: index === undefined ? `${name}-${randomSuffix()}` : `${name}-${index}-${randomSuffix()}`,
        labels,
        annotations,
        ownerReferences: [
          {
            apiVersion: "batch/v1",
            kind: "Job",
            name,
            uid: String(m.uid),
            controller: true,
            blockOwnerDeletion: true,
          },
        ],
      },
      spec: { ...spec, nodeName: "fake-node" },
    })
  }
}

/** `[0,1,2,5]` → `"0-2,5"`, as `completedIndexes` shows. */
function ranges(indexes: number[]): string {
  const sorted = [...indexes].sort((a, b) => a - b)
  const out: string[] = []
  for (let i = 0; i < sorted.length; ) {
    let j = i
    while (j + 1 < sorted.length && sorted[j + 1] === (sorted[j] ?? 0) + 1) j++
    out.push(i === j ? String(sorted[i]) : `${sorted[i]}-${sorted[j]}`)
    i = j + 1
  }
  return out.join(",")
}
