/**
 * The fake cluster's Kueue (Part C, v1beta1): a Job labelled `kueue.x-k8s.io/queue-name` gets its
 * Workload (named and owned as C.2 says); each ClusterQueue admits its pending Workloads in priority
 * then FIFO order when their requests fit a flavor's nominal quota (all pods of the pod set at once),
 * with the conditions, reasons and "couldn't assign flavors" messages of C.3; admission unsuspends the
 * Job; a finished or deleted Job releases its quota; a higher-priority Workload that does not fit
 * preempts lower-priority ones when the ClusterQueue's `preemption.withinClusterQueue` allows, and a
 * test can evict a Workload itself. Queue `status` counts and flavor usage follow C.4.
 */
import { createHash } from "node:crypto"
import { jobFinished } from "./jobs"
import { writeQueueStatus } from "./queue-status"
import { addUsage, assignFlavors, podSetRequests, quantities, type Usage } from "./quota"
import { asArray, asObject, type JsonObject, parseQuantity, Types } from "./resources"
import { labelsOf, meta, nameOf, namespaceOf, type Store } from "./store"
import { findCondition, hasCondition, isAdmitted, priority, setCondition } from "./workload-status"

export const QueueLabel = "kueue.x-k8s.io/queue-name"
export const PriorityClassLabel = "kueue.x-k8s.io/priority-class"
export const JobUidLabel = "kueue.x-k8s.io/job-uid"

/** C.2: `job-<name>-<first 5 hex of sha1("Job\nbatch\n<name>\n<uid>")>`. */
export function workloadName(jobName: string, jobUid: string): string {
  const hash = createHash("sha1").update(`Job\nbatch\n${jobName}\n${jobUid}`).digest("hex").slice(0, 5)
  return `${`job-${jobName}`.slice(0, 247)}-${hash}`
}

export interface EvictOptions {
  /** Default `Preempted`. */
  reason?: string
  message?: string
  /** Keep it pending (not readmitted) until `release`; default false (requeued at once). */
  hold?: boolean
}

export class Kueue {
  private seq = 0
  private readonly order = new Map<string, number>()
  private readonly held = new Set<string>()

  constructor(private readonly store: Store) {}

  sync(): void {
    this.createWorkloads()
    this.finishWorkloads()
    for (const cq of this.store.all(Types.clusterqueues)) this.schedule(cq)
    this.markInadmissible()
    writeQueueStatus(
      this.store,
      (w) => this.usage(w),
      (w) => this.clusterQueueOf(w),
    )
  }

  evict(namespace: string, name: string, options: EvictOptions = {}): void {
    const wl = this.store.get(Types.workloads, namespace, name)
    const reason = options.reason ?? "Preempted"
    this.doEvict(wl, reason, options.message ?? `Evicted by the test (${reason})`)
    if (options.hold) this.held.add(String(meta(wl).uid))
  }

  release(namespace: string, name: string): void {
    this.held.delete(String(meta(this.store.get(Types.workloads, namespace, name)).uid))
    this.store.touch(this.store.get(Types.workloads, namespace, name))
  }

  // 1. Every queue-labelled Job has its Workload (and is suspended until admitted).
  private createWorkloads(): void {
    const owned = new Set(this.store.all(Types.workloads).map((w) => labelsOf(w)[JobUidLabel]))
    for (const job of this.store.all(Types.jobs)) {
      const queue = labelsOf(job)[QueueLabel]
      const uid = String(meta(job).uid)
      if (!queue || owned.has(uid) || jobFinished(job)) continue
      const spec = asObject(job.spec)
      if (spec.suspend !== true) {
        const previous = structuredClone(spec)
        spec.suspend = true
        this.store.touch(job, previous)
      }
      const template = asObject(spec.template)
      const count = Number(spec.parallelism ?? 1)
      const priorityClass = labelsOf(job)[PriorityClassLabel]
      const wpc = priorityClass
        ? this.store.find(Types.workloadpriorityclasses, "", priorityClass)
        : undefined
      const wlSpec: JsonObject = {
        queueName: queue,
        active: true,
        podSets: [{ name: "main", count, template }],
        priority: Number(wpc?.value ?? 0),
      }
      if (priorityClass && wpc) {
        wlSpec.priorityClassName = priorityClass
        wlSpec.priorityClassSource = "kueue.x-k8s.io/workloadpriorityclass"
      }
      const wl = this.store.create(Types.workloads, namespaceOf(job), {
        metadata: {
          name: workloadName(nameOf(job), uid),
          labels: { [JobUidLabel]: uid },
          finalizers: ["kueue.x-k8s.io/resource-in-use"],
          ownerReferences: [
            {
              apiVersion: "batch/v1",
              kind: "Job",
              name: nameOf(job),
              uid,
              controller: true,
              blockOwnerDeletion: true,
            },
          ],
        },
        spec: wlSpec,
        status: { resourceRequests: [{ name: "main", resources: quantities(podSetRequests(wlSpec)) }] },
      })
      this.order.set(String(meta(wl).uid), this.seq++)
    }
    // A Workload deleted through the API: Kueue drops its finalizer and it goes.
    for (const wl of this.store.all(Types.workloads))
      if (meta(wl).deletionTimestamp) {
        meta(wl).finalizers = []
        this.store.remove(Types.workloads, namespaceOf(wl), nameOf(wl))
      }
  }

  // 2. A Workload whose Job finished is Finished (its quota is free again).
  private finishWorkloads(): void {
    for (const wl of this.store.all(Types.workloads)) {
      if (hasCondition(wl, "Finished")) continue
      const job = this.jobOf(wl)
      const outcome = job ? jobFinished(job) : undefined
      if (!job || !outcome) continue
      const jobCondition = asArray(asObject(job.status).conditions)
        .map(asObject)
        .find((c) => c.type === (outcome === "Complete" ? "Complete" : "Failed"))
      setCondition(
        wl,
        this.store.timestamp(),
        "Finished",
        "True",
        outcome === "Complete" ? "Succeeded" : "Failed",
        String(jobCondition?.message ?? ""),
      )
      this.store.touch(wl)
    }
  }

  // 3. Admission: pending Workloads by priority then arrival, each admitted if it fits a flavor.
  private schedule(cq: JsonObject): void {
    const cqName = nameOf(cq)
    const mine = this.store.all(Types.workloads).filter((w) => this.clusterQueueOf(w) === cqName)
    const usage = this.usage(mine)
    const pending = mine
      .filter((w) => !isAdmitted(w) && !hasCondition(w, "Finished") && asObject(w.spec).active !== false)
      .filter((w) => !this.held.has(String(meta(w).uid)))
      .sort((a, b) => priority(b) - priority(a) || this.orderOf(a) - this.orderOf(b))
    const strict = asObject(cq.spec).queueingStrategy === "StrictFIFO"
    let blocked = false
    let preempted = false
    for (const wl of pending) {
      const requests = podSetRequests(asObject(wl.spec))
      const fit = blocked ? undefined : assignFlavors(cq, usage, requests)
      if (fit && "flavors" in fit) {
        this.admit(wl, cqName, fit.flavors, requests)
        for (const [r, amount] of Object.entries(requests)) addUsage(usage, fit.flavors[r] ?? "", r, amount)
        continue
      }
      const message =
        fit && "message" in fit
          ? fit.message
          : "Workload is waiting behind the head of a StrictFIFO ClusterQueue"
      // Victims release their quota in this pass; the preemptor is admitted in the next one.
      if (!preempted) preempted = this.preempt(cq, wl, mine, requests)
      this.setPending(wl, "Pending", message)
      if (strict) blocked = true
    }
  }

  /** Evict lower-priority admitted Workloads of the same ClusterQueue so `wl` fits, if the policy allows. */
  private preempt(
    cq: JsonObject,
    wl: JsonObject,
    mine: JsonObject[],
    requests: Record<string, number>,
  ): boolean {
    const policy = asObject(asObject(cq.spec).preemption).withinClusterQueue
    if (policy !== "LowerPriority" && policy !== "LowerOrNewerEqualPriority") return false
    const candidates = mine
      .filter((w) => isAdmitted(w) && !hasCondition(w, "Finished") && priority(w) < priority(wl))
      .sort((a, b) => priority(a) - priority(b) || this.orderOf(b) - this.orderOf(a))
    const victims: JsonObject[] = []
    for (const c of candidates) {
      victims.push(c)
      const rest = mine.filter((w) => !victims.includes(w))
      if ("flavors" in assignFlavors(cq, this.usage(rest), requests)) {
        const jobUid = labelsOf(wl)[JobUidLabel] ?? ""
        for (const v of victims)
          this.doEvict(
            v,
            "Preempted",
            `Preempted to accommodate a workload (UID: ${String(meta(wl).uid)}, JobUID: ${jobUid}) due to prioritization in the ClusterQueue`,
          )
        return true
      }
    }
    return false
  }

  private admit(
    wl: JsonObject,
    cqName: string,
    flavors: Record<string, string>,
    requests: Record<string, number>,
  ): void {
    const now = this.store.timestamp()
    const status = asObject(wl.status)
    const count = asArray(asObject(wl.spec).podSets).map(asObject)[0]?.count ?? 1
    status.admission = {
      clusterQueue: cqName,
      podSetAssignments: [{ name: "main", flavors, resourceUsage: quantities(requests), count }],
    }
    wl.status = status
    setCondition(
      wl,
      now,
      "QuotaReserved",
      "True",
      "QuotaReserved",
      `Quota reserved in ClusterQueue ${cqName}`,
    )
    setCondition(wl, now, "Admitted", "True", "Admitted", "The workload is admitted")
    for (const type of ["Evicted", "Preempted"]) {
      const c = findCondition(wl, type)
      if (c && c.status === "True")
        setCondition(wl, now, type, "False", "QuotaReserved", `Previously: ${String(c.message ?? "")}`)
    }
    this.store.touch(wl)
    // Start the Job: unsuspend it, with the flavor's node labels and the pod-set label on its pods.
    const job = this.jobOf(wl)
    if (!job) return
    const spec = asObject(job.spec)
    const previous = structuredClone(spec)
    const template = asObject(spec.template)
    const tm = asObject(template.metadata)
    tm.labels = { ...asObject(tm.labels), "kueue.x-k8s.io/podset": "main" }
    template.metadata = tm
    const podSpec = asObject(template.spec)
    for (const flavor of new Set(Object.values(flavors))) {
      const rf = this.store.find(Types.resourceflavors, "", flavor)
      const nodeLabels = asObject(asObject(rf?.spec).nodeLabels)
      if (Object.keys(nodeLabels).length > 0)
        podSpec.nodeSelector = { ...asObject(podSpec.nodeSelector), ...nodeLabels }
    }
    template.spec = podSpec
    spec.template = template
    spec.suspend = false
    this.store.touch(job, previous)
  }

  private doEvict(wl: JsonObject, reason: string, message: string): void {
    const now = this.store.timestamp()
    setCondition(wl, now, "Evicted", "True", reason, message)
    if (reason === "Preempted") setCondition(wl, now, "Preempted", "True", "InClusterQueue", message)
    const status = asObject(wl.status)
    delete status.admission
    setCondition(wl, now, "QuotaReserved", "False", "Pending", message)
    setCondition(wl, now, "Admitted", "False", "NoReservation", "The workload has no reservation")
    setCondition(wl, now, "Requeued", reason === "Preempted" ? "True" : "False", reason, message)
    const stats = asObject(status.schedulingStats)
    const evictions = asArray(stats.evictions).map(asObject)
    const entry = evictions.find((e) => e.reason === reason)
    if (entry) entry.count = Number(entry.count) + 1
    else evictions.push({ reason, underlyingCause: "", count: 1 })
    stats.evictions = evictions
    status.schedulingStats = stats
    // Requeued Workloads queue behind those already waiting (Kueue orders them by eviction time).
    this.order.set(String(meta(wl).uid), this.seq++)
    this.store.touch(wl)
    const job = this.jobOf(wl)
    if (job && asObject(job.spec).suspend !== true) {
      const previous = structuredClone(asObject(job.spec))
      asObject(job.spec).suspend = true
      this.store.touch(job, previous)
    }
  }

  private setPending(wl: JsonObject, reason: string, message: string): void {
    const c = findCondition(wl, "QuotaReserved")
    if (c && c.status === "False" && c.reason === reason && c.message === message) return
    setCondition(wl, this.store.timestamp(), "QuotaReserved", "False", reason, message)
    this.store.touch(wl)
  }

  /** Workloads whose LocalQueue or ClusterQueue does not exist are Inadmissible. */
  private markInadmissible(): void {
    for (const wl of this.store.all(Types.workloads)) {
      if (isAdmitted(wl) || hasCondition(wl, "Finished")) continue
      const queue = String(asObject(wl.spec).queueName ?? "")
      const lq = this.store.find(Types.localqueues, namespaceOf(wl), queue)
      if (!lq) this.setPending(wl, "Inadmissible", `LocalQueue ${queue} doesn't exist`)
      else {
        const cq = String(asObject(lq.spec).clusterQueue ?? "")
        if (!this.store.find(Types.clusterqueues, "", cq))
          this.setPending(wl, "Inadmissible", `ClusterQueue ${cq} doesn't exist`)
      }
    }
  }

  private usage(workloads: JsonObject[]): Usage {
    const usage: Usage = new Map()
    for (const w of workloads) {
      if (!isAdmitted(w) || hasCondition(w, "Finished")) continue
      for (const a of asArray(asObject(asObject(w.status).admission).podSetAssignments).map(asObject)) {
        const flavors = asObject(a.flavors)
        for (const [r, q] of Object.entries(asObject(a.resourceUsage)))
          addUsage(usage, String(flavors[r] ?? ""), r, parseQuantity(q))
      }
    }
    return usage
  }

  private clusterQueueOf(wl: JsonObject): string | undefined {
    const admitted = asObject(asObject(wl.status).admission).clusterQueue
    if (typeof admitted === "string") return admitted
    const lq = this.store.find(Types.localqueues, namespaceOf(wl), String(asObject(wl.spec).queueName ?? ""))
    const cq = asObject(lq?.spec).clusterQueue
    return typeof cq === "string" ? cq : undefined
  }

  private jobOf(wl: JsonObject): JsonObject | undefined {
    const owner = asArray(meta(wl).ownerReferences)
      .map(asObject)
      .find((r) => r.kind === "Job")
    const job = owner ? this.store.find(Types.jobs, namespaceOf(wl), String(owner.name)) : undefined
    return job && meta(job).uid === owner?.uid ? job : undefined
  }

  private orderOf(wl: JsonObject): number {
    const uid = String(meta(wl).uid)
    if (!this.order.has(uid)) this.order.set(uid, this.seq++)
    return this.order.get(uid) ?? 0
  }
}
