/**
 * The `lepton` backend (kind `delegated`): NVIDIA DGX Cloud Lepton places the work; swarmplane talks
 * to the workspace's v2 API (backend-contracts.md Part A). Each task attempt is one Lepton job, named
 * from the attempt's id before it is sent, so a create whose answer was lost is found again and
 * adopted rather than made twice; each swarm is one deployment (serving.ts). A reconcile pass reads
 * the workspace's live jobs in one paged list (and every deployment in one more call), whatever the
 * number of live attempts, and reads one by one only the jobs that ended and left that list since.
 * Every contact is recorded as the backend's health; the token is read once per invocation and never
 * appears in a message.
 *
 * A batch shard's progress counters come from its log (progress.ts); the node group it places by is
 * node-groups.ts'.
 */
import type { Backend } from "../../model/backend"
import type { Swarm } from "../../model/swarm"
import { iso } from "../../util/clock"
import { mapLimit } from "../../util/concurrency"
import { BackendError, VisibleError } from "../../util/errors"
import { contactHealth } from "../contacts"
import { progressReads } from "../progress-log"
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
import { LeptonApiError, type LeptonClient, type LogTailLimits, leptonClient } from "./client"
import { LeptonNodeGroups } from "./node-groups"
import { indexJobs, type JobIndex, LostAfterMs, observeJobs, unlisted, withJobs } from "./observe"
import { readProgress } from "./progress"
import { deploymentOf, LeptonServing } from "./serving"
import { jobBody, jobName, type LeptonConfig } from "./spec"
import type { LeptonDeployment } from "./types"

export { LostAfterMs }

/** The public gateway; a backend's `workspaceUrl` overrides it. */
export const DefaultGateway = "https://gateway.dgxc-lepton.nvidia.com/api/v2/workspaces"
/** One request's timeout: Lepton answers in well under a second when it is well. */
export const CallTimeoutMs = 15_000
/** No call of one invocation runs past this (a reconcile tick's budget is about a minute). */
export const InvocationBudgetMs = 45_000
/** Tries after a failed call, and the first wait: short, as the next pass tries again anyway. */
export const CallRetries = 2
export const CallBackoffMs = 250
/**
 * One read of a task's log to show it: the stream follows a running replica, so it is left after a
 * pause once its backlog is through, and only its newest text is kept.
 */
export const LogReadLimits: LogTailLimits = {
  maxBytes: 32 << 20,
  maxMs: 10_000,
  idleMs: 1_000,
  keepChars: 1 << 20,
}
/** The workspace API base of a backend. */
export const workspaceUrlOf = (config: LeptonConfig) =>
  config.workspaceUrl ?? `${DefaultGateway}/${encodeURIComponent(config.workspaceId)}`

const lastAttempt = (ref: TaskRef) => ref.task.data.attempts.at(-1)

/** A rejection handler: Lepton's 404 reads as `value`, anything else is thrown on. */
const absent =
  <T>(value: T) =>
  (error: unknown): T => {
    if (error instanceof LeptonApiError && error.status === 404) return value
    throw error
  }

/**
 * Whether a failed call means Lepton is away or busy, or refuses the token (which the user fixes in
 * the secret, not in the job): the attempts wait and are tried again, rather than fail.
 */
const transient = (error: LeptonApiError) =>
  error.status === undefined ||
  error.status === 429 ||
  error.status >= 500 ||
  [401, 403].includes(error.status)

export function LeptonBackend(
  backend: Backend & { config: LeptonConfig },
  runtime: BackendDeps,
): TaskBackend & ServingBackend & ReportsHealth {
  const { project, id: backendId, config } = backend
  const budgetEnds = runtime.clock.now() + InvocationBudgetMs
  /** No call runs past this: the invocation's budget, brought forward to its pass's lease by a launch. */
  let deadline = budgetEnds
  let made: Promise<LeptonClient> | undefined
  let endpointToken: Promise<string | undefined> | undefined
  /** What this invocation's contacts with Lepton came to (the backend's health). */
  const contacts = contactHealth()
  /** Deployments read by this pass's reconcile, by name. */
  const observedDeployments = new Map<string, LeptonDeployment>()

  /** The client, with the token read once (lazily: a pass with nothing to do never reads it). */
  function client(): Promise<LeptonClient> {
    made ??= runtime.secrets.get(project, config.tokenSecret).then((token) =>
      leptonClient({
        baseUrl: workspaceUrlOf(config),
        token,
        now: () => runtime.clock.now(),
        timeoutMs: CallTimeoutMs,
        retries: CallRetries,
        backoffMs: CallBackoffMs,
        deadline: () => deadline,
      }),
    )
    return made
  }

  /** One contact with Lepton; its success or failure is the backend's health. */
  const contacting = async <T>(use: (c: LeptonClient) => Promise<T>): Promise<T> =>
    contacts.record(async () => use(await client()))

  const nodeGroups = LeptonNodeGroups(config, contacting)
  const nodeGroup = nodeGroups.resolve

  const serving = LeptonServing({
    project,
    config,
    call: contacting,
    nodeGroupId: async () => (await nodeGroup()).metadata.id,
    endpointToken: () => {
      const name = config.endpointTokenSecret
      endpointToken ??= name ? runtime.secrets.get(project, name) : Promise.resolve(undefined)
      return endpointToken
    },
  })

  /**
   * The workspace's live jobs in one paged list (`alive_only`: what it costs follows live work, not
   * the workspace's history of finished jobs, which Lepton moves to its archive).
   */
  const listJobs = async () => indexJobs(await contacting((c) => c.jobs.list({ mode: "alive_only" })))

  /**
   * The live list, then the archived jobs of attempts it no longer shows (ended and archived since the
   * last pass), each read by its id, a few at a time and at most `ArchiveReadsPerPass`; attempts past
   * that are left to the next pass (`deferred`), not taken for lost.
   */
  async function observedJobs(launched: readonly TaskRef[], stopping: readonly TaskRef[]) {
    const listed = await listJobs()
    const { read, deferred } = unlisted(listed, launched, stopping)
    // A read that fails leaves its attempts to the next pass; the rest of the pass goes on.
    const archived = await mapLimit([...read], 4, ([id, refs]) =>
      contacting((c) => c.jobs.get(id, "alive_and_archive")).catch((error: unknown) => {
        if (!(error instanceof BackendError || error instanceof VisibleError)) throw error
        for (const ref of refs) deferred.add(ref)
        return undefined
      }),
    )
    return {
      index: withJobs(
        listed,
        archived.filter((job) => job !== undefined),
      ),
      deferred,
    }
  }

  /** `launch` under its deadline (see there). */
  async function launchAttempts(request: LaunchRequest): Promise<LaunchResult> {
    const attempts = request.attempts.filter((ref) => lastAttempt(ref)?.submission)
    const result: Required<LaunchResult> = { launched: [], failed: [], deferred: [] }
    if (!attempts.length) return result
    let index: JobIndex
    try {
      index = await listJobs()
      // An attempt an earlier pass placed may have been created by a try whose answer was lost, and
      // its job may have ended and left the live list since: look in the archive too before making
      // it again (one paged list, only when such an attempt is not live; a first try needs none).
      const earlier = attempts.filter((ref) => {
        const attempt = lastAttempt(ref)!
        return !request.firstTry?.has(attempt.attemptUid) && !index.byName.has(attempt.submission!)
      })
      if (earlier.length)
        index = withJobs(index, await contacting((c) => c.jobs.list({ mode: "archive_only" })))
    } catch (error) {
      if (!(error instanceof BackendError || error instanceof VisibleError)) throw error
      for (const ref of attempts) result.deferred.push({ ref, message: error.message })
      return result
    }
    let away: string | undefined
    const swarmUrls = new Map<string, string | undefined>()
    for (const ref of attempts) {
      const attempt = lastAttempt(ref)!
      const found = index.byName.get(attempt.submission!)
      if (found) {
        if (attempt.target !== found.metadata.id)
          runtime.logger.info(
            `${project} lepton ${backendId}: adopted job ${found.metadata.id} (${attempt.submission}) from an earlier submit`,
          )
        result.launched.push({ ref, target: found.metadata.id })
        continue
      }
      if (away) {
        result.deferred.push({ ref, message: away })
        continue
      }
      let nodeGroupId: string
      try {
        nodeGroupId = (await nodeGroup()).metadata.id
      } catch (error) {
        if (!(error instanceof LeptonApiError)) throw error
        away = error.message
        result.deferred.push({ ref, message: away })
        continue
      }
      const swarm = ref.job.spec.swarm
      if (swarm && !swarmUrls.has(swarm))
        swarmUrls.set(swarm, (await runtime.repos.swarms.get(project, swarm))?.url)
      const body = jobBody({
        job: ref.job,
        taskIndex: ref.task.data.index,
        attemptUid: attempt.attemptUid,
        config,
        nodeGroupId,
        ...(swarm && swarmUrls.get(swarm) ? { swarmUrl: swarmUrls.get(swarm)! } : {}),
      })
      try {
        // A request Lepton refuses is the job's fault, not Lepton's: answered inside the contact, so
        // the backend stays healthy.
        const made = await contacting((c) =>
          c.jobs.create(body).then(
            (created) => ({ created }),
            (error: unknown) => {
              if (error instanceof LeptonApiError && !transient(error)) return { refused: error }
              throw error
            },
          ),
        )
        if ("created" in made) result.launched.push({ ref, target: made.created.metadata.id })
        // A job of that name exists after all (made meanwhile): the next try lists and adopts it.
        else if (made.refused.status === 409) result.deferred.push({ ref, message: made.refused.message })
        else result.failed.push({ ref, message: made.refused.message })
      } catch (error) {
        if (!(error instanceof LeptonApiError)) throw error
        away = error.message
        result.deferred.push({ ref, message: away })
      }
    }
    return result
  }

  return {
    descriptor: {
      backendId,
      kind: "delegated",
      advertisedAttributes: {
        nodeGroup: [config.nodeGroup],
        resourceShape: [config.resourceShape],
        ...Object.fromEntries(Object.entries(config.attributes ?? {}).map(([k, v]) => [k, [v]])),
      },
      scaleGroups: [],
      displayName: config.displayName ?? backendId,
    },

    health: contacts.health,

    /**
     * Lepton places the work: every pending task gets an attempt and its job's name, except tasks of a
     * job against a swarm that does not serve yet (`SWARM_ENDPOINT` must mean something).
     */
    async schedule(request): Promise<ScheduleResult> {
      const { ready, pendingReasons } = await awaitingSwarms(runtime.repos, project, request.pending)
      const assignments: ScheduleResult["assignments"] = []
      for (const ref of ready) {
        const attemptUid = request.mintAttemptUid()
        assignments.push({ ref, attemptUid, submission: jobName(attemptUid) })
      }
      return { assignments, preemptions: [], pendingReasons }
    },

    /**
     * Create (or adopt) each attempt's job. One list of the workspace's jobs finds those an earlier try
     * created; the rest are created. Lepton away, busy or refusing the token defers the rest of the
     * launch (tried again with backoff); a request Lepton refuses (a 4xx) fails the attempt with its words.
     */
    async launch(request): Promise<LaunchResult> {
      // Nothing is created past the pass's lease (a call still going on is cut off there, and the rest
      // is deferred): the next holder lists what landed and adopts it instead of creating it again.
      if (request.deadline !== undefined) deadline = Math.min(budgetEnds, request.deadline)
      try {
        return await launchAttempts(request)
      } finally {
        deadline = budgetEnds
      }
    },

    /**
     * One paged list of the workspace's live jobs for every live and stopping attempt (plus a read of
     * each job that has just left it for the archive), and one list of the deployments for the swarms
     * (kept for this pass's `servingStatus`). No live work, no call. Then
     * the progress of a few batch shards, from their logs (`readProgress`).
     */
    async reconcile(request): Promise<ReconcileResult> {
      observedDeployments.clear()
      const launched = request.live.filter((ref) => lastAttempt(ref)?.submission)
      const stopping = request.stopping ?? []
      const swarms = (request.swarms ?? []).filter((swarm) => swarm.handle)
      const result: Required<Omit<ReconcileResult, "progress">> = {
        transitions: [],
        workers: [],
        waiting: [],
        unstopped: [],
      }
      if (swarms.length) {
        const deployments = await contacting((c) => c.deployments.list())
        for (const d of deployments) observedDeployments.set(d.metadata.name ?? d.metadata.id, d)
      }
      if (!launched.length && !stopping.length) return result
      const { index, deferred } = await observedJobs(launched, stopping)
      const observed = observeJobs(
        launched.filter((ref) => !deferred.has(ref)),
        stopping.filter((ref) => !deferred.has(ref)),
        index,
        runtime.clock.now(),
      )
      for (const message of observed.unknown)
        runtime.logger.warn(`${project} lepton ${backendId}: ${message}`)
      result.transitions.push(...observed.transitions)
      result.waiting.push(...observed.waiting)
      result.unstopped.push(...observed.unstopped)
      // Batch shards' counters, from their logs: those that ended now (their last), then running ones.
      const progress = await readProgress(
        await client(),
        progressReads(launched, result.transitions, Math.floor(runtime.clock.now() / 1000)),
        runtime.clock,
        runtime.logger,
        `${project} lepton ${backendId}`,
      )
      // What a failed task printed last is usually why: read only for those that failed, best effort.
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
      return progress.length ? { ...result, progress } : result
    },

    /** Stop each attempt's job (`stopped: true`); a job already gone is done. */
    async stop(effects) {
      const targets = [...new Set(effects.flatMap((e) => (e.kind === "stop" && e.target ? [e.target] : [])))]
      for (const target of targets) await contacting((c) => c.jobs.stop(target))
    },

    /** The last `tail` lines of the attempt's job's first worker (a bounded read of its log stream). */
    async fetchLogs(ref, tail) {
      const attempt = lastAttempt(ref)
      const empty = { attemptUid: attempt?.attemptUid ?? "", lines: [], truncated: false }
      if (!attempt?.target) return empty
      const target = attempt.target
      // A job Lepton no longer has (404) has no log to show; that is not a failed contact.
      const replicas = await contacting((c) => c.jobs.replicas(target).catch(absent([])))
      const first = [...replicas].sort((a, b) => a.id.localeCompare(b.id))[0]
      if (!first) return empty
      const read = await contacting((c) => c.jobs.replicaLogTail(target, first.id, LogReadLimits))
      const text = read?.text ?? ""
      const lines = text.split("\n")
      if (lines.at(-1) === "") lines.pop()
      // Only the newest text was kept: its first line may be cut.
      const cut = text.length >= LogReadLimits.keepChars
      if (cut) lines.shift()
      return {
        attemptUid: attempt.attemptUid,
        lines: lines.slice(-tail),
        truncated: cut || lines.length > tail,
        updatedAt: iso(runtime.clock.now()),
      }
    },

    /**
     * The workspace as Lepton shows it: its state, the shapes it offers and its quota; and the
     * configured node group: its nodes ready of desired, its GPUs allocated of total (one read of its
     * nodes) and the shapes offered in it. A refused token is unhealthy with Lepton's words and a hint
     * (never the token); a workspace that is not `normal`, or a node group it does not have, is
     * unhealthy too (nothing would start there).
     */
    async status() {
      let info: Awaited<ReturnType<LeptonClient["workspace"]>>
      try {
        info = await contacting((c) => c.workspace())
      } catch (error) {
        if (!(error instanceof LeptonApiError)) throw error
        return { healthy: false, message: error.message, detail: { workspaceId: config.workspaceId } }
      }
      const state = info.workspace_state ?? undefined
      const workspace = {
        workspaceId: config.workspaceId,
        workspaceName: info.workspace_name ?? undefined,
        tier: info.workspace_tier ?? undefined,
        state,
        shapes: Object.keys(info.supported_shapes ?? {}).sort(),
        quota: info.resource_quota ?? undefined,
      }
      let placement: Record<string, unknown>
      try {
        placement = await nodeGroups.status()
      } catch (error) {
        if (!(error instanceof LeptonApiError)) throw error
        return {
          healthy: false,
          message: error.message,
          detail: { ...workspace, nodeGroup: config.nodeGroup },
        }
      }
      const healthy = !state || state === "normal"
      const message = healthy ? undefined : `Lepton workspace ${config.workspaceId} is ${state}`
      if (message) contacts.unhealthy(message)
      return { healthy, ...(message ? { message } : {}), detail: { ...workspace, nodeGroup: placement } }
    },

    async close() {},

    createOrUpdate: (swarm: Swarm) => {
      observedDeployments.delete(deploymentOf(project, swarm))
      return serving.createOrUpdate(swarm)
    },
    // The reconcile pass listed every deployment already; a new one is read on its own.
    servingStatus: (swarm: Swarm) => {
      const seen = observedDeployments.get(deploymentOf(project, swarm))
      return serving.status(swarm, seen)
    },
    delete: (swarm: Swarm) => {
      observedDeployments.delete(deploymentOf(project, swarm))
      return serving.delete(swarm)
    },
  }
}
