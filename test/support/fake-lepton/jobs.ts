/**
 * The fake Lepton's batch jobs: `completions` workers, each running `spec.container.command` as a local
 * process with the job's `envs` and this worker env (the contract names none that the real service
 * sets, so these are the fake's own): `LEPTON_JOB_NAME` (the server-assigned id),
 * `LEPTON_JOB_WORKER_INDEX` (0-based) and `LEPTON_JOB_TOTAL_WORKERS`.
 *
 * A job is placed as a gang: all its workers start when capacity allows them all, else it waits in
 * `Queueing`. States: Queueing → Starting → Running (at least one worker ready; `ready < active` while
 * the others start) → Completed (all exited 0) or Failed (one exited non-zero or was killed; the others
 * are killed first, so a Failed job has no active worker). `PATCH {"spec":{"stopped":true}}` goes Stopping →
 * Stopped; `false` starts it again.
 */

import type { LocalProcess } from "../local-processes"
import {
  invalid,
  isObject,
  type Json,
  type JsonObject,
  mergePatch,
  metadata,
  notFound,
  type ReplicaLog,
  suffix,
  type Workspace,
} from "./state"
import { replicaView } from "./wire"

const namePattern = /^[a-z][a-z0-9-]{0,35}$/
const finished = new Set(["Completed", "Failed", "Stopped"])

interface Worker {
  index: number
  id: string
  process?: LocalProcess
  ready: boolean
  exitCode?: number
  log: string
}

interface Job {
  id: string
  metadata: JsonObject
  spec: JsonObject
  state: string
  workers: Worker[]
  history: JsonObject[]
  creationTime: number
  completionTime: number | null
  /** When it ended, in ms of the workspace clock (the archive's timer). */
  endedAtMs?: number
  archived: boolean
  /** A worker failed: the others are being killed, and the job is Failed once none is left. */
  failing?: boolean
}

export type QueryMode = "alive_only" | "archive_only" | "alive_and_archive"

export interface JobOptions {
  /** How long after its start a worker counts as ready (worker i after (i + 1) times this). */
  workerReadyMs: number
  /** Finished jobs move to the archive this long after they end, by the workspace clock. */
  archiveAfterMs: number
  /** Checks and records a new job's affinity (throws a 400 for a node group it does not know). */
  place?: (id: string, affinity: Json | undefined) => void
}

export class Jobs {
  private readonly items = new Map<string, Job>()
  /** Scripted failures: requested job name → worker indexes that will exit 1 instead of running. */
  private readonly scripted = new Map<string, Set<number>>()

  constructor(
    private readonly ws: Workspace,
    readonly options: JobOptions,
  ) {
    ws.onCapacity(() => {
      for (const j of this.items.values()) if (j.state === "Queueing") this.place(j)
    })
  }

  create(body: Json): JsonObject {
    if (!isObject(body) || !isObject(body.metadata)) throw invalid("metadata: required")
    const name = body.metadata.id ?? body.metadata.name
    if (typeof name !== "string" || !namePattern.test(name))
      throw invalid(
        `metadata.id: "${String(name)}" must be lowercase letters, digits and dashes (at most 36)`,
      )
    const spec = body.spec
    if (!isObject(spec)) throw invalid("spec: required")
    const command = isObject(spec.container) ? spec.container.command : undefined
    if (!Array.isArray(command) || command.length === 0 || !command.every((c) => typeof c === "string"))
      throw invalid("spec.container.command: a non-empty array of strings is required")
    const completions = spec.completions ?? 1
    if (typeof completions !== "number" || !Number.isInteger(completions) || completions < 1)
      throw invalid("spec.completions: must be an integer >= 1")
    this.ws.resolveEnvs(spec.envs)
    const id = `${name}-${suffix(5)}`
    this.options.place?.(id, spec.affinity)
    const j: Job = {
      id,
      metadata: metadata(id, name, this.ws.now()),
      spec: { ...spec, completions, parallelism: spec.parallelism ?? completions },
      state: "Queueing",
      workers: [],
      history: [],
      creationTime: Math.floor(this.ws.now() / 1000),
      completionTime: null,
      archived: false,
    }
    this.items.set(id, j)
    this.place(j)
    return this.view(j)
  }

  get(id: string, mode: QueryMode): JsonObject {
    return this.view(this.find(id, mode))
  }

  /** One page (1-based) of the jobs the mode selects, oldest first; past the end, an empty page. */
  list(mode: QueryMode, page: number, pageSize: number, states: string[]): JsonObject[] {
    this.sweep()
    const all = [...this.items.values()].filter(
      (j) => selects(mode, j) && (states.length === 0 || states.includes(j.state)),
    )
    return all.slice((page - 1) * pageSize, page * pageSize).map((j) => this.view(j))
  }

  patch(id: string, body: Json): JsonObject {
    const j = this.find(id, "alive_only")
    if (!isObject(body) || !isObject(body.spec) || typeof body.spec.stopped !== "boolean")
      throw invalid("no valid field to update")
    if (body.spec.stopped) this.stop(j)
    else {
      if (j.state !== "Stopped") throw invalid(`job ${id} is ${j.state}; only a Stopped job can be started`)
      j.spec = mergePatch(j.spec, { stopped: false }) as JsonObject
      j.state = "Queueing"
      j.completionTime = null
      j.endedAtMs = undefined
      this.place(j)
    }
    return this.view(j)
  }

  delete(id: string, mode: QueryMode): JsonObject {
    const j = this.find(id, mode)
    this.items.delete(id)
    for (const w of j.workers) w.process?.kill("SIGKILL")
    return { ...this.view(j), status: { ...status(j), state: "Deleting" } }
  }

  replicas(id: string, mode: QueryMode): JsonObject[] {
    return this.find(id, mode).workers.map((w) => replicaView(w.id, this.ws.now()))
  }

  log(id: string, replicaId: string): ReplicaLog {
    const w = this.find(id, "alive_and_archive").workers.find((x) => x.id === replicaId)
    if (!w) throw notFound(`replica ${replicaId}`)
    return { text: w.process?.log() ?? w.log, ...(w.process?.isAlive() ? { live: w.process } : {}) }
  }

  /** Control: the next job created (or started again) with this requested name fails on this worker. */
  scriptFailure(name: string, workerIndex = 0): void {
    const set = this.scripted.get(name) ?? new Set<number>()
    set.add(workerIndex)
    this.scripted.set(name, set)
  }

  /** Control: kill a worker's processes, as the loss of its node would. */
  killWorker(id: string, workerIndex = 0): void {
    const w = this.find(id, "alive_only").workers[workerIndex]
    if (!w?.process?.isAlive()) throw notFound(`running worker ${workerIndex} of job ${id}`)
    w.process.kill("SIGKILL")
  }

  /** Control: finished jobs move to the archive (what the real service does after a while). */
  archiveFinished(): number {
    let moved = 0
    for (const j of this.items.values())
      if (finished.has(j.state) && !j.archived) {
        j.archived = true
        moved++
      }
    return moved
  }

  stopAll(): void {
    for (const j of this.items.values()) for (const w of j.workers) w.process?.kill("SIGKILL")
    this.items.clear()
  }

  /** Archive the jobs that ended `archiveAfterMs` ago (checked on each read, so the clock drives it). */
  private sweep(): void {
    const cutoff = this.ws.now() - this.options.archiveAfterMs
    for (const j of this.items.values())
      if (j.endedAtMs !== undefined && j.endedAtMs <= cutoff && finished.has(j.state)) j.archived = true
  }

  private find(id: string, mode: QueryMode): Job {
    this.sweep()
    const j = this.items.get(id)
    if (!j || !selects(mode, j)) throw notFound(`job ${id}`)
    return j
  }

  /** Start every worker if the capacity holds them all, else stay Queueing. */
  private place(j: Job): void {
    const n = Number(j.spec.completions)
    if (this.ws.free() < n) return
    j.state = "Starting"
    const command = (j.spec.container as JsonObject).command as string[]
    const env = this.ws.resolveEnvs(j.spec.envs)
    const failing = this.scripted.get(String(j.metadata.name))
    this.scripted.delete(String(j.metadata.name))
    j.workers = []
    for (let index = 0; index < n; index++) {
      const w: Worker = { index, id: `${j.id}-${index}-${suffix(5)}`, ready: false, log: "" }
      j.workers.push(w)
      this.ws.take(w)
      const workerEnv = {
        ...this.ws.baseEnv(),
        ...env,
        LEPTON_JOB_NAME: j.id,
        LEPTON_JOB_WORKER_INDEX: String(index),
        LEPTON_JOB_TOTAL_WORKERS: String(n),
      }
      const run = failing?.has(index)
        ? ["/bin/sh", "-c", "echo 'scripted failure of this worker' >&2; exit 1"]
        : command
      const p = this.ws.runner.start(run, workerEnv)
      w.process = p
      setTimeout(
        () => {
          if (p.isAlive()) {
            w.ready = true
            if (j.state === "Starting") j.state = "Running"
          }
        },
        this.options.workerReadyMs * (index + 1),
      ).unref()
      void p.exited.then((code) => this.workerExited(j, w, code))
    }
  }

  private workerExited(j: Job, w: Worker, code: number): void {
    w.exitCode = code
    w.ready = false
    w.log = w.process?.log() ?? ""
    this.ws.release(w)
    const open = j.workers.filter((x) => x.exitCode === undefined)
    if (j.state === "Stopping") {
      if (open.length === 0) this.end(j, "Stopped")
      return
    }
    if (finished.has(j.state)) return
    // A worker that failed fails the job; it reads Failed once its other workers are gone too, so a
    // Failed job never still counts an active worker.
    if (code !== 0 && !j.failing) {
      j.failing = true
      for (const x of open) x.process?.kill("SIGKILL")
    }
    if (open.length > 0) return
    this.end(j, j.failing ? "Failed" : "Completed")
  }

  private stop(j: Job): void {
    if (finished.has(j.state)) return
    j.spec = mergePatch(j.spec, { stopped: true }) as JsonObject
    const open = j.workers.filter((w) => w.exitCode === undefined)
    if (open.length === 0) this.end(j, "Stopped")
    else {
      j.state = "Stopping"
      for (const w of open) w.process?.terminate()
    }
  }

  private end(j: Job, state: "Completed" | "Failed" | "Stopped"): void {
    j.state = state
    j.endedAtMs = this.ws.now()
    j.completionTime = Math.floor(j.endedAtMs / 1000)
    j.history.push({ ...status(j), job_history: null })
  }

  private view(j: Job): JsonObject {
    return { metadata: j.metadata, spec: j.spec, status: status(j) }
  }
}

function selects(mode: QueryMode, j: Job): boolean {
  return mode === "alive_and_archive" || (mode === "archive_only") === j.archived
}

/** `LeptonJobStatus`; times are epoch seconds. */
function status(j: Job): JsonObject {
  const active = j.workers.filter((w) => w.exitCode === undefined).length
  return {
    job_name: j.id,
    state: j.state,
    ready: j.workers.filter((w) => w.ready).length,
    active,
    failed: j.workers.filter((w) => w.exitCode !== undefined && w.exitCode !== 0).length,
    succeeded: j.workers.filter((w) => w.exitCode === 0).length,
    creation_time: j.creationTime,
    completion_time: j.completionTime,
    job_history: [...j.history],
  }
}
