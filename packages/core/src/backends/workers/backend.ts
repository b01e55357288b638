/**
 * The `workers` backend (kind `worker-daemon`): swarmplane runs the scheduler and keeps the worker
 * store. Workers register and heartbeat (heartbeat.ts); this module places pending tasks on them,
 * judges their liveness, scales their groups (autoscaler.ts) and serves swarms (serving.ts).
 * Stopping an attempt needs no call: it leaves the worker's desired set, and the agent stops it.
 */

import type { Backend, BackendConfigOf } from "../../model/backend"
import type { Job } from "../../model/job"
import type { Worker } from "../../model/worker"
import { place } from "../../scheduling/place"
import type { StoredItem } from "../../store/port"
import { iso } from "../../util/clock"
import type {
  AutoscaleResult,
  AutoscalingBackend,
  BackendDeps,
  ReconcileResult,
  ReplicaSetBackend,
  ReportsCapacity,
  ScheduleResult,
  TaskBackend,
  TaskRef,
  WorkerStoreBackend,
} from "../protocol"
import { backoffMs, type GroupState, planScaling, StartTimeoutMs } from "./autoscaler"
import { Serving } from "./serving"
import { buildSnapshot, bySubmission, RouterResources, res } from "./snapshot"

type WorkersConfig = BackendConfigOf<"workers">

interface AutoscalerState {
  groups: Record<string, GroupState>
  lastResult?: AutoscaleResult
}

function groupState(state: AutoscalerState, name: string): GroupState {
  const existing = state.groups[name]
  if (existing) return existing
  const fresh: GroupState = { starts: [], stops: [], failures: 0 }
  state.groups[name] = fresh
  return fresh
}

/**
 * A gap between passes this long means the control loop itself was away (not the workers): far more
 * than the cron period (1 min), so ordinary passes never mistake silence for it.
 */
export function awayAfterMs(graceS: number): number {
  return Math.max(5 * 60_000, 3 * graceS * 1000)
}

export function WorkersBackend(
  backend: Backend & { config: WorkersConfig },
  runtime: BackendDeps,
): TaskBackend & ReplicaSetBackend & WorkerStoreBackend & AutoscalingBackend & ReportsCapacity {
  const { project, id: backendId, config } = backend
  const graceMs = config.heartbeatGraceS * 1000
  const serving = Serving(runtime)
  const workerItems = () => runtime.repos.workers.items(project, backendId)
  const alive = (items: StoredItem<Worker>[]) => items.map((i) => i.data).filter((w) => w.health !== "dead")

  return {
    descriptor: {
      backendId,
      kind: "worker-daemon",
      advertisedAttributes: Object.fromEntries(
        [...new Set(config.scaleGroups.flatMap((g) => Object.keys(g.attributes)))].map((key) => [
          key,
          [
            ...new Set(
              config.scaleGroups.map((g) => g.attributes[key]).filter((v): v is string => v !== undefined),
            ),
          ],
        ]),
      ),
      scaleGroups: config.scaleGroups.map((g) => g.name),
      displayName: config.displayName ?? backendId,
    },

    async schedule(request): Promise<ScheduleResult> {
      const workers = alive(await workerItems()).filter(
        (w) => w.health === "healthy" && !request.unavailableWorkers?.has(w.id),
      )
      const pendingReasons = new Map<string, string>()
      // Tasks of a job against a swarm wait until the swarm serves: SWARM_ENDPOINT must mean something.
      const swarmReady = new Map<string, boolean>()
      const placeable: TaskRef[] = []
      for (const ref of [...request.pending].sort(bySubmission)) {
        const swarm = ref.job.spec.swarm
        if (swarm && !ref.job.serving) {
          if (!swarmReady.has(swarm))
            swarmReady.set(swarm, (await runtime.repos.swarms.get(project, swarm))?.phase === "RUNNING")
          if (!swarmReady.get(swarm)) {
            pendingReasons.set(
              `${ref.job.id}/${ref.task.data.index}`,
              `waiting for swarm ${swarm} to be RUNNING`,
            )
            continue
          }
        }
        placeable.push(ref)
      }
      const refs = new Map(placeable.map((r) => [`${r.job.id}/${r.task.data.index}`, r]))
      const liveRefs = new Map(request.live.map((r) => [`${r.job.id}/${r.task.data.index}`, r]))
      const placement = place(buildSnapshot(workers, request.live, placeable), { preemption: true })
      for (const [key, reason] of placement.pending)
        pendingReasons.set(
          key,
          workers.length ? reason : "no workers yet: the autoscaler starts them, or start an agent",
        )
      return {
        assignments: placement.assignments.flatMap(({ taskId, workerId }) => {
          const ref = refs.get(taskId)
          return ref ? [{ ref, attemptUid: request.mintAttemptUid(), workerId, target: workerId }] : []
        }),
        preemptions: placement.preemptions.flatMap(({ taskId, forTaskId }) => {
          const ref = liveRefs.get(taskId)
          return ref ? [{ ref, reason: `preempted for ${forTaskId}` }] : []
        }),
        pendingReasons,
      }
    },

    // Workers pull their attempts: an assignment is the launch.
    async launch() {
      return { launched: [], failed: [] }
    },

    async reconcile(request): Promise<ReconcileResult> {
      const now = runtime.clock.now()
      const items = await workerItems()
      const byId = new Map(items.map((i) => [i.data.id, i]))
      const health: ReconcileResult["workers"] = []
      for (const item of items) {
        if (item.data.health === "dead") continue
        const silent = now - Date.parse(item.data.lastSeen)
        const next: Worker["health"] =
          silent > graceMs ? "dead" : silent > graceMs / 2 ? "suspect" : "healthy"
        if (next !== item.data.health) health.push({ worker: item, health: next })
      }
      const dead = new Set(health.filter((h) => h.health === "dead").map((h) => h.worker.data.id))
      const transitions: ReconcileResult["transitions"] = []
      for (const ref of request.live) {
        const attempt = ref.task.data.attempts.at(-1)
        if (!attempt?.workerId) continue
        const worker = byId.get(attempt.workerId)
        if (worker && worker.data.health !== "dead" && !dead.has(attempt.workerId)) continue
        transitions.push({
          ref,
          outcome: {
            kind: "worker_failed",
            attemptUid: attempt.attemptUid,
            reason: "worker_lost",
            message: `worker ${attempt.workerId} stopped heartbeating`,
          },
        })
      }
      // An ended attempt whose worker is gone (dead before this pass, or removed) runs nowhere any more:
      // an agent stops its tasks when it loses the control plane. A live worker confirms at its heartbeat.
      for (const ref of request.stopping ?? []) {
        const attempt = ref.task.data.attempts.at(-1)
        const uid = ref.task.data.stopping?.attemptUid
        if (!uid) continue
        const worker = attempt?.workerId ? byId.get(attempt.workerId) : undefined
        if (worker && worker.data.health !== "dead") continue
        transitions.push({ ref, outcome: { kind: "stopped", attemptUid: uid } })
      }
      return { transitions, workers: health }
    },

    async autoscale(request): Promise<AutoscaleResult> {
      const now = runtime.clock.now()
      const stored = await runtime.repos.backendState.get<AutoscalerState>(project, backendId, {
        consistent: true,
      })
      // The pass updates the state in place and puts it back: a copy of its own (what a store hands
      // out may be shared and frozen).
      const state: AutoscalerState = stored ? structuredClone(stored) : { groups: {} }
      const items = await workerItems()
      const workers = alive(items)
      const instances = new Map<
        string,
        Awaited<ReturnType<NonNullable<BackendDeps["providers"]["local"]>["list"]>>
      >()
      for (const group of config.scaleGroups) {
        const provider = runtime.providers[group.provider.type]
        const target = { project, backendId, group }
        const list = provider ? await provider.list(target).catch(() => []) : []
        // Instances of dead workers, and ones that never registered, are stopped and count as failures.
        const registered = new Map(items.map((i) => [i.data.instanceId, i.data]))
        const stale = list.filter(
          (i) =>
            registered.get(i.id)?.health === "dead" ||
            (!registered.has(i.id) && now - i.startedAt > StartTimeoutMs),
        )
        if (provider && stale.length) {
          await provider
            .stop(
              target,
              stale.map((i) => i.id),
            )
            .catch(() => undefined)
          const g = groupState(state, group.name)
          if (stale.some((i) => !registered.has(i.id))) {
            g.failures++
            g.backoffUntil = now + backoffMs(g.failures)
            g.lastError = "a started worker did not register in time"
          }
        }
        instances.set(
          group.name,
          list.filter((i) => !stale.includes(i)),
        )
        // The backoff ends when a started worker has registered, not merely when a start call returned.
        const g = groupState(state, group.name)
        if (
          g.failures &&
          !stale.length &&
          items.some(
            (i) =>
              i.data.scaleGroup === group.name &&
              i.data.health === "healthy" &&
              Date.parse(i.data.registeredAt) >= (g.starts.at(-1) ?? 0),
          )
        ) {
          g.failures = 0
          delete g.backoffUntil
          delete g.lastError
        }
      }
      const plan = planScaling({
        groups: config.scaleGroups,
        workers,
        instances,
        pending: request.pending,
        live: request.live,
        state: state.groups,
        now,
      })
      for (const { group, count } of plan.start) {
        const g = groupState(state, group.name)
        const provider = runtime.providers[group.provider.type]
        try {
          if (!provider) throw new Error(`no "${group.provider.type}" provider where this control plane runs`)
          await provider.start({ project, backendId, group }, count)
          g.starts.push(...Array(count).fill(now))
        } catch (error) {
          g.failures++
          g.backoffUntil = now + backoffMs(g.failures)
          g.lastError = error instanceof Error ? error.message : String(error)
          const s = plan.status.find((x) => x.group === group.name)
          if (s)
            Object.assign(s, {
              action: "blocked",
              reason: `start failed: ${g.lastError}`,
              backoffUntil: iso(g.backoffUntil),
            })
        }
      }
      for (const { group, instanceIds } of plan.stop) {
        const g = groupState(state, group.name)
        await runtime.providers[group.provider.type]?.stop({ project, backendId, group }, instanceIds)
        g.stops.push(...instanceIds.map(() => now))
      }
      for (const g of Object.values(state.groups)) {
        g.starts = g.starts.filter((t) => now - t < 60_000)
        g.stops = g.stops.filter((t) => now - t < 60_000)
      }
      const result: AutoscaleResult = { groups: plan.status }
      const data: AutoscalerState = { ...state, lastResult: result }
      await runtime.repos.backendState.put(project, backendId, data)
      return result
    },

    async status() {
      const workers = (await workerItems()).map((i) => i.data)
      const by = (h: Worker["health"]) => workers.filter((w) => w.health === h).length
      return {
        healthy: true,
        detail: { workers: { healthy: by("healthy"), suspect: by("suspect"), dead: by("dead") } },
      }
    },

    keepsMinimum: () => config.scaleGroups.some((g) => g.min > 0),

    async autoscalerStatus() {
      const stored = await runtime.repos.backendState.get<AutoscalerState>(project, backendId)
      return stored?.lastResult ?? { groups: [] }
    },

    /** What the live workers have, and what of it the attempts placed on them leave free. */
    async resourceCapacity() {
      const workers = alive(await workerItems())
      const sum = (pick: (w: Worker) => number) => workers.reduce((n, w) => n + pick(w), 0)
      const total = {
        cpu: sum((w) => w.resources.cpu),
        memoryMiB: sum((w) => w.resources.memoryMiB),
        gpu: sum((w) => w.resources.gpu),
      }
      const used = { cpu: 0, memoryMiB: 0, gpu: 0 }
      const specs = new Map<string, Job | undefined>()
      for (const worker of workers)
        for (const { jobId, task } of await runtime.repos.jobs.heldBy(project, worker.id)) {
          if (!specs.has(jobId)) specs.set(jobId, await runtime.repos.jobs.get(project, jobId))
          const job = specs.get(jobId)
          if (!job) continue
          const r =
            job.serving && task.data.index === job.serving.replicas ? RouterResources : job.spec.resources
          used.cpu += r.cpu
          used.memoryMiB += r.memoryMiB
          used.gpu += r.gpu
        }
      const left = (a: number, b: number) => Math.max(0, Math.round((a - b) * 1000) / 1000)
      return {
        total,
        free: {
          cpu: left(total.cpu, used.cpu),
          memoryMiB: left(total.memoryMiB, used.memoryMiB),
          gpu: left(total.gpu, used.gpu),
        },
      }
    },

    async fetchLogs(ref, tail) {
      const attempt = ref.task.data.attempts.at(-1)
      if (!attempt) return { attemptUid: "", lines: [], truncated: false }
      const record = await runtime.repos.jobs.logTail(
        project,
        ref.job.id,
        ref.task.data.index,
        attempt.attemptUid,
      )
      const lines = record ? record.text.replace(/\n$/, "").split("\n") : []
      return {
        attemptUid: attempt.attemptUid,
        lines: lines.slice(-tail),
        truncated: lines.length > tail,
        ...(record ? { updatedAt: record.updatedAt } : {}),
      }
    },

    isAway: (lastPassAt, now) => now - lastPassAt > awayAfterMs(config.heartbeatGraceS),

    async seedLiveness() {
      const seedAt = iso(runtime.clock.now())
      for (const item of await workerItems())
        if (item.data.health !== "dead") await runtime.repos.workers.setHealth(item, "healthy", { seedAt })
    },

    // Stopping needs no call: an attempt that is no longer live leaves its worker's desired set.
    async stop() {},

    async pruneDeadWorkers() {
      const now = runtime.clock.now()
      const old = (await workerItems()).filter(
        (i) =>
          i.data.health === "dead" && now - Date.parse(i.data.lastSeen) > config.deadWorkerRetentionS * 1000,
      )
      for (const item of old) await runtime.repos.workers.remove(item)
      return old.length
    },

    async close() {},

    observeReplicaSet: (swarm) => serving.observeReplicaSet(swarm),
    startReplica: (swarm, replica) => serving.startReplica(swarm, replica),
    stopReplicas: (swarm, slots) => serving.stopReplicas(swarm, slots),
    runRouter: (swarm) => serving.runRouter(swarm),
    stopRouter: (swarm) => serving.stopRouter(swarm),
  }
}

export { res }
