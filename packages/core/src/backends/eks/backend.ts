/**
 * The `eks` backend (kind `delegated`): Kueue on an Amazon EKS cluster places the work; swarmplane
 * talks to the cluster's Kubernetes API (backend-contracts.md Parts B-D). Each task attempt is one
 * batch/v1 Job, named from the attempt's id before it is sent and created suspended for Kueue to admit,
 * so a create whose answer was lost is found again (409 AlreadyExists) and adopted rather than made
 * twice. A gang (`coscheduling`) is one Indexed Job of all its members, which Kueue admits whole or
 * not at all; each member's attempt is one completion index of it (`<job>#<index>`). A reconcile pass
 * lists the namespace's Jobs, Pods and Kueue Workloads by swarmplane's label selector (a few paged
 * LISTs, whatever the number of live attempts). Each swarm is a Deployment and a
 * Service (serving.ts). A batch shard's progress counters come from its pod's log (../progress-log.ts).
 * Every contact is recorded as the backend's health; the cluster token never appears in a message.
 */
import type { Backend } from "../../model/backend"
import { iso } from "../../util/clock"
import { contactHealth } from "../contacts"
import { progressReads, readProgressLogs } from "../progress-log"
import type {
  BackendDeps,
  LaunchRequest,
  LaunchResult,
  ReconcileResult,
  ReportsHealth,
  ScheduleResult,
  ServingBackend,
  TaskBackend,
  TaskRef,
} from "../protocol"
import { awaitingSwarms } from "../swarm-gate"
import { accessOptionsOf, EksAuthError, eksAccess } from "./auth"
import { KubeApiError, type KubeClient, kubeClient } from "./client"
import { indexNamespace, LostAfterMs, type NamespaceIndex, observeNamespace } from "./observe"
import { EksServing } from "./serving"
import {
  CompletionIndexLabel,
  ContainerName,
  type EksConfig,
  gangJobObject,
  gangSubmission,
  jobName,
  jobObject,
  parseSubmission,
  selectorOf,
} from "./spec"
import type { FlavorResources, Pod, QueueStatus } from "./types"

export { LostAfterMs }

/** One request's timeout: an API server answers in well under a second when it is well. */
export const CallTimeoutMs = 15_000
/** No call of one invocation runs past this (a reconcile tick's budget is about a minute). */
export const InvocationBudgetMs = 45_000
/** Tries after a failed call, and the first wait: short, as the next pass tries again anyway. */
export const CallRetries = 2
export const CallBackoffMs = 250
/** Lines of a pod's log `fetchLogs` asks for at most (`tailLines`): a log is never read whole. */
export const MaxLogLines = 10_000
/**
 * Lines of a batch shard's pod log a pass reads for its progress (`tailLines`): its runner prints a
 * progress line at each change of its counters, so the last one is among the newest few.
 */
export const ProgressLogLines = 200
/** The Workloads of batch/v1 Jobs (Kueue labels each with its Job's uid): one LIST per pass. */
export const WorkloadSelector = "kueue.x-k8s.io/job-uid"

const lastAttempt = (ref: TaskRef) => ref.task.data.attempts.at(-1)
/** The pods of an attempt's Job that are its own: a gang member's are those of its completion index. */
const podsOfMember = (pods: readonly Pod[], index: number | undefined) =>
  index === undefined ? pods : pods.filter((p) => p.metadata.labels?.[CompletionIndexLabel] === String(index))
/** A Job's newest pod (the one whose log is the attempt's latest output). */
const newestPod = (pods: readonly Pod[]) =>
  [...pods]
    .sort((a, b) => (a.metadata.creationTimestamp ?? "").localeCompare(b.metadata.creationTimestamp ?? ""))
    .at(-1)
const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error))

/**
 * Whether a failed call means the cluster is away or busy, or refuses swarmplane's identity (which an
 * operator fixes in IAM or RBAC, not in the job): the attempts wait and are tried again, rather than fail.
 */
const transient = (error: unknown) =>
  error instanceof EksAuthError ||
  (error instanceof KubeApiError &&
    (error.status === undefined ||
      error.status === 429 ||
      error.status >= 500 ||
      [401, 403].includes(error.status)))

export function EksBackend(
  backend: Backend & { config: EksConfig },
  runtime: BackendDeps,
): TaskBackend & ServingBackend & ReportsHealth {
  const { project, id: backendId, config } = backend
  const { namespace } = config
  const budgetEnds = runtime.clock.now() + InvocationBudgetMs
  /** What this invocation's contacts with the cluster came to (the backend's health). */
  const contacts = contactHealth()
  // The function's own AWS credentials (the default provider chain); cluster and token are cached per process.
  const access = eksAccess({ ...accessOptionsOf(config), now: () => runtime.clock.now() })
  const clients = new Map<number, KubeClient>()

  /** A client whose calls never run past `deadline` (the invocation's budget by default). */
  function client(deadline = budgetEnds): KubeClient {
    let made = clients.get(deadline)
    if (!made) {
      made = kubeClient({
        access,
        now: () => runtime.clock.now(),
        timeoutMs: CallTimeoutMs,
        retries: CallRetries,
        backoffMs: CallBackoffMs,
        deadline,
      })
      clients.set(deadline, made)
    }
    return made
  }

  /** One contact with the cluster; its success or failure is the backend's health. */
  const contacting = <T>(use: (c: KubeClient) => Promise<T>, deadline?: number): Promise<T> =>
    contacts.record(() => use(client(deadline)))

  /** Swarms: a Deployment and a Service each (serving.ts), through the same contacts. */
  const serving = EksServing({ project, backendId, config, call: (use) => contacting(use) })

  /** The namespace's Jobs and pods of this backend, and its Kueue Workloads: three paged LISTs. */
  async function listNamespace() {
    const selector = selectorOf(project, backendId)
    const [jobs, pods, workloads] = await contacting((c) =>
      Promise.all([
        c.jobs.list(namespace, { labelSelector: selector }),
        c.pods.list(namespace, { labelSelector: selector }),
        c.workloads.list(namespace, { labelSelector: WorkloadSelector }),
      ]),
    )
    return indexNamespace(jobs, pods, workloads)
  }

  /**
   * The progress of a few batch shards (`progressReads` picks which), from the newest lines of their
   * Jobs' newest pods' logs, as listed in this pass: one GET each, a few at once, within the progress
   * budget. Best effort and no contact: a read that fails is logged at debug, and the health stays what
   * the listing made it. A finished pod's log is served too, so a shard that ended shows its last counters.
   */
  function readProgress(
    launched: readonly TaskRef[],
    index: NamespaceIndex,
    transitions: ReconcileResult["transitions"],
  ) {
    const reads = progressReads(launched, transitions, Math.floor(runtime.clock.now() / 1000))
    return readProgressLogs(
      reads,
      async (_ref, attempt, until) => {
        const { name, index: member } = parseSubmission(attempt.target ?? attempt.submission ?? "")
        const pod = newestPod(podsOfMember(index.pods.get(name) ?? [], member))
        if (!pod?.metadata.name) return undefined
        return client(Math.min(budgetEnds, until)).pods.log(namespace, pod.metadata.name, {
          container: ContainerName,
          tailLines: ProgressLogLines,
        })
      },
      runtime.clock,
      runtime.logger,
      `${project} eks ${backendId}`,
    )
  }

  /** `launch` under its deadline (see there). */
  async function launchAttempts(request: LaunchRequest, deadline: number): Promise<LaunchResult> {
    const attempts = request.attempts.filter((ref) => lastAttempt(ref)?.submission)
    const result: Required<LaunchResult> = { launched: [], failed: [], deferred: [] }
    let away: string | undefined
    const swarmUrls = new Map<string, string | undefined>()
    // One Job per submission's name: a gang's members (`<job>#<index>`) go out together as one.
    const bySubmission = new Map<string, TaskRef[]>()
    for (const ref of attempts) {
      const { name } = parseSubmission(lastAttempt(ref)!.submission!)
      bySubmission.set(name, [...(bySubmission.get(name) ?? []), ref])
    }
    for (const [submitted, group] of bySubmission) {
      const indexOf = (ref: TaskRef) => parseSubmission(lastAttempt(ref)!.submission!).index
      const members = [...group].sort((a, b) => (indexOf(a) ?? 0) - (indexOf(b) ?? 0))
      const gang = members.some((ref) => indexOf(ref) !== undefined)
      if (away || runtime.clock.now() >= deadline) {
        for (const ref of members)
          result.deferred.push({ ref, message: away ?? "the pass's lease ends; submitted by a later pass" })
        continue
      }
      const ref = members[0]!
      const attempt = lastAttempt(ref)!
      const swarm = ref.job.spec.swarm
      if (swarm && !swarmUrls.has(swarm))
        swarmUrls.set(swarm, (await runtime.repos.swarms.get(project, swarm))?.url)
      const swarmUrl = swarm ? swarmUrls.get(swarm) : undefined
      const common = { project, backendId, job: ref.job, config, ...(swarmUrl ? { swarmUrl } : {}) }
      const object = gang
        ? gangJobObject({
            ...common,
            members: members.map((m) => ({
              taskIndex: m.task.data.index,
              attemptUid: lastAttempt(m)!.attemptUid,
            })),
          })
        : jobObject({ ...common, taskIndex: ref.task.data.index, attemptUid: attempt.attemptUid })
      const name = object.metadata.name!
      if (name !== submitted || (gang && members.some((m, i) => indexOf(m) !== i))) {
        // A gang launched with some of its members only would be a Job of the wrong size: fail it whole.
        for (const m of members)
          result.failed.push({ ref: m, message: `gang Job ${submitted} is missing members in this launch` })
        continue
      }
      try {
        // A request the API server refuses is the job's fault, not the cluster's: answered inside the
        // contact, so the backend stays healthy.
        const made = await contacting(
          (c) =>
            c.jobs.create(namespace, object).then(
              (): { adopted: boolean; refused?: KubeApiError } => ({ adopted: false }),
              (error: unknown) => {
                if (error instanceof KubeApiError && error.reason === "AlreadyExists")
                  return { adopted: true }
                if (error instanceof KubeApiError && !transient(error))
                  return { adopted: false, refused: error }
                throw error
              },
            ),
          deadline,
        )
        if (made.refused)
          for (const m of members) result.failed.push({ ref: m, message: made.refused.message })
        else {
          if (made.adopted)
            runtime.logger.info(
              `${project} eks ${backendId}: adopted Job ${namespace}/${name} from an earlier submit`,
            )
          for (const m of members) result.launched.push({ ref: m, target: lastAttempt(m)!.submission! })
        }
      } catch (error) {
        if (!transient(error)) throw error
        away = messageOf(error)
        for (const m of members) result.deferred.push({ ref: m, message: away })
      }
    }
    return result
  }

  /** A LocalQueue's or ClusterQueue's counts and flavor usage, as `status()` shows them. */
  const queueView = (
    s: (QueueStatus & { flavorUsage?: FlavorResources[]; flavorsUsage?: FlavorResources[] }) | undefined,
  ) => ({
    active: s?.conditions?.find((c) => c.type === "Active")?.status === "True",
    activeMessage: s?.conditions?.find((c) => c.type === "Active")?.message,
    pendingWorkloads: s?.pendingWorkloads ?? 0,
    reservingWorkloads: s?.reservingWorkloads ?? 0,
    admittedWorkloads: s?.admittedWorkloads ?? 0,
    flavorUsage: Object.fromEntries(
      (s?.flavorsUsage ?? s?.flavorUsage ?? []).map((f) => [
        f.name,
        Object.fromEntries(f.resources.map((r) => [r.name, r.total ?? "0"])),
      ]),
    ),
  })

  return {
    descriptor: {
      backendId,
      kind: "delegated",
      advertisedAttributes: {
        ...Object.fromEntries(Object.entries(config.attributes ?? {}).map(([k, v]) => [k, [v]])),
      },
      scaleGroups: [],
      displayName: config.displayName ?? backendId,
    },

    health: contacts.health,

    /**
     * Kueue places the work: every pending task gets an attempt and its Job's name, except tasks of a
     * job against a swarm that does not serve yet (`SWARM_ENDPOINT` must mean something). A gang's
     * pending members share one Job, named from the first member's attempt: member `i` (by task index)
     * is its completion index `i` (`<job>#<i>`). A new gang whose tasks are not all written yet waits.
     */
    async schedule(request): Promise<ScheduleResult> {
      const { ready, pendingReasons } = await awaitingSwarms(runtime.repos, project, request.pending)
      const assignments: ScheduleResult["assignments"] = []
      const gangs = new Map<string, TaskRef[]>()
      for (const ref of ready) {
        if (ref.job.spec.coscheduling) {
          gangs.set(ref.job.id, [...(gangs.get(ref.job.id) ?? []), ref])
          continue
        }
        const attemptUid = request.mintAttemptUid()
        assignments.push({ ref, attemptUid, submission: jobName(attemptUid) })
      }
      for (const refs of gangs.values()) {
        const job = refs[0]!.job
        const fresh = refs.every((ref) => ref.task.data.attempts.length === 0)
        if (fresh && refs.length < job.spec.tasks) {
          for (const ref of refs)
            pendingReasons.set(
              `${job.id}/${ref.task.data.index}`,
              "waiting for the gang's tasks to be written",
            )
          continue
        }
        const members = [...refs].sort((a, b) => a.task.data.index - b.task.data.index)
        const uids = members.map(() => request.mintAttemptUid())
        const name = jobName(uids[0]!)
        for (const [i, ref] of members.entries())
          assignments.push({ ref, attemptUid: uids[i]!, submission: gangSubmission(name, i) })
      }
      return { assignments, preemptions: [], pendingReasons }
    },

    /**
     * Create each attempt's Job, suspended, for Kueue to admit; a Job of that name already there (409
     * AlreadyExists: an earlier try landed) is adopted. The cluster away, busy or refusing swarmplane's
     * identity defers the rest of the launch (tried again with backoff); a Job the API server refuses
     * (another 4xx, e.g. 422 Invalid) fails its attempt with Kubernetes' words.
     */
    async launch(request): Promise<LaunchResult> {
      // Nothing is created past the pass's lease (a call still going on is cut off there, and the rest
      // is deferred): the next holder's create of the same name answers 409 and adopts it.
      const deadline = Math.min(budgetEnds, request.deadline ?? budgetEnds)
      return launchAttempts(request, deadline)
    },

    /**
     * One pass over the namespace for every live and stopping attempt: a paged LIST of this backend's
     * Jobs, one of their pods and one of the namespace's Workloads. No live work, no call. What a
     * failed attempt printed last is added to its message, and a few batch shards' progress is read from
     * their logs (`readProgress`); both best effort.
     */
    async reconcile(request): Promise<ReconcileResult> {
      const launched = request.live.filter((ref) => lastAttempt(ref)?.submission)
      const stopping = request.stopping ?? []
      const result: Required<Omit<ReconcileResult, "progress">> = {
        transitions: [],
        workers: [],
        waiting: [],
        unstopped: [],
      }
      if (!launched.length && !stopping.length) return result
      const index = await listNamespace()
      const observed = observeNamespace(launched, stopping, index, runtime.clock.now(), {
        imagePullGraceMs: config.imagePullGraceS * 1000,
      })
      for (const message of observed.unknown) runtime.logger.warn(`${project} eks ${backendId}: ${message}`)
      result.transitions.push(...observed.transitions)
      result.waiting.push(...observed.waiting)
      result.unstopped.push(...observed.unstopped)
      for (const t of result.transitions) {
        if (t.outcome.kind !== "failed") continue
        const tail = await this.fetchLogs(t.ref, 2).catch(() => undefined)
        const said = tail?.lines.filter((line) => line.trim()).join(" | ")
        if (said)
          t.outcome = {
            ...t.outcome,
            message: `${t.outcome.message ?? t.outcome.reason}; last output: ${said.length > 600 ? `${said.slice(0, 600)}...` : said}`,
          }
      }
      const progress = await readProgress(launched, index, result.transitions)
      return progress.length ? { ...result, progress } : result
    },

    /**
     * Delete each attempt's Job (`propagationPolicy=Background`: its pods and Workload go too); one
     * already gone is done. A gang member's stop deletes the gang's one Job: the gang is retried whole.
     */
    async stop(effects) {
      const targets = [
        ...new Set(
          effects.flatMap((e) => (e.kind === "stop" && e.target ? [parseSubmission(e.target).name] : [])),
        ),
      ]
      for (const target of targets) await contacting((c) => c.jobs.delete(namespace, target))
    },

    /** The last `tail` lines of the attempt's pod (the newest one of its Job), read with `tailLines`. */
    async fetchLogs(ref, tail) {
      const attempt = lastAttempt(ref)
      const empty = { attemptUid: attempt?.attemptUid ?? "", lines: [], truncated: false }
      const submitted = attempt?.target ?? attempt?.submission
      if (!attempt || !submitted) return empty
      const { name, index } = parseSubmission(submitted)
      const pods = await contacting((c) =>
        c.pods.list(namespace, {
          labelSelector: `batch.kubernetes.io/job-name=${name}${index === undefined ? "" : `,${CompletionIndexLabel}=${index}`}`,
        }),
      )
      const pod = newestPod(pods)
      if (!pod?.metadata.name) return empty
      const podName = pod.metadata.name
      const want = Math.max(1, Math.min(tail, MaxLogLines))
      // One line more than asked tells whether older output was left out.
      const text = await contacting((c) =>
        c.pods.log(namespace, podName, { container: ContainerName, tailLines: want + 1 }).catch((error) => {
          // A pod gone meanwhile, or not started yet, has no log to show: not a failed contact.
          if (error instanceof KubeApiError && [400, 404].includes(error.status ?? 0)) return ""
          throw error
        }),
      )
      const lines = text.split("\n")
      if (lines.at(-1) === "") lines.pop()
      return {
        attemptUid: attempt.attemptUid,
        lines: lines.slice(-want),
        truncated: lines.length > want,
        updatedAt: iso(runtime.clock.now()),
      }
    },

    /**
     * The cluster as swarmplane sees it: the EKS cluster (status, version, API server), the backend's
     * LocalQueue and its ClusterQueue (pending, reserving and admitted Workloads, flavor usage). A
     * cluster that cannot be reached or refuses swarmplane is unhealthy with the words of the refusal.
     */
    async status() {
      const where = {
        clusterName: config.clusterName,
        region: config.region,
        namespace,
        localQueue: config.localQueue,
      }
      try {
        const cluster = await contacting(() => access.cluster())
        const localQueue = await contacting((c) => c.localQueues.get(namespace, config.localQueue))
        if (!localQueue) {
          const message = `LocalQueue ${namespace}/${config.localQueue} does not exist in EKS cluster ${config.clusterName}`
          contacts.unhealthy(message)
          return {
            healthy: false,
            message,
            detail: { ...where, cluster: { status: cluster.status, version: cluster.version } },
          }
        }
        const cqName = localQueue.spec?.clusterQueue
        const clusterQueue = cqName ? await contacting((c) => c.clusterQueues.get(cqName)) : undefined
        const lq = queueView(localQueue.status)
        const cq = clusterQueue ? queueView(clusterQueue.status) : undefined
        const detail = {
          ...where,
          cluster: { status: cluster.status, version: cluster.version, endpoint: cluster.endpoint },
          localQueueStatus: lq,
          clusterQueue: cqName ? { name: cqName, ...(cq ?? { missing: true }) } : undefined,
        }
        const message = !clusterQueue
          ? `ClusterQueue ${cqName ?? "?"} of LocalQueue ${config.localQueue} does not exist`
          : !cq?.active && cq?.activeMessage
            ? `ClusterQueue ${cqName} is inactive: ${cq.activeMessage}`
            : undefined
        if (message) contacts.unhealthy(message)
        return { healthy: !message, ...(message ? { message } : {}), detail }
      } catch (error) {
        if (!(error instanceof KubeApiError || error instanceof EksAuthError)) throw error
        return { healthy: false, message: error.message, detail: where }
      }
    },

    createOrUpdate: (swarm) => serving.createOrUpdate(swarm),
    servingStatus: (swarm) => serving.status(swarm),
    delete: (swarm) => serving.delete(swarm),

    async close() {},
  }
}
