/**
 * The composition of the core: what every entry point builds once per process (in Lambda: per cold
 * start) from the ports' adapters: the repositories over a store, the transitions, the queue, clock,
 * logger, secrets and providers. `functions/deps.ts` builds it from the deployed
 * resources; `functions/local.ts` from the embedded servers; tests from memory adapters.
 */
import type { Providers } from "./providers/port"
import type { ScheduleQueue } from "./queue/port"
import type { Secrets } from "./secrets/port"
import { Repos } from "./store"
import type { StateStore } from "./store/port"
import { Transitions } from "./transitions"
import { type Clock, systemClock } from "./util/clock"
import type { Logger } from "./util/logger"

export type { Secrets }

/**
 * Everything the core's layers are built with, composed once per process. No layer takes this whole
 * or imports this module: backends take `BackendDeps`, the control loop `ControlDeps`, the API
 * `ApiDeps`, and a runtime is each of them (it has every field they name).
 */
export interface Runtime {
  repos: Repos
  transitions: Transitions
  queue: ScheduleQueue
  clock: Clock
  logger: Logger
  /** HMAC pepper for key hashes and the encryption of stored idempotent responses. */
  pepper: string
  version: string
  /** Project whose admin keys may create projects (the one bootstrap makes first). */
  operatorProject: string
  secrets: Secrets
  /** Scale-group providers available where this runtime runs (`local` only on the local control plane). */
  providers: Providers
  /**
   * Placements committed in this process, for heartbeats held open in this process (the
   * `AssignmentSignal` of `backends/workers/assignment-signal.ts`, which this module may not import).
   */
  assignments: InProcessAssignments
  /**
   * Whether a worker's heartbeat may be held open until new work is placed on it (`?waitS`). Where the
   * API and the reconcile pass share a process (the local plane) this costs nothing; deployed, a held
   * heartbeat keeps one API Lambda invocation busy per worker (about $20 a month per worker at 512 MB),
   * so it is off unless the deployment asks for it.
   */
  heartbeatHold: boolean
}

/**
 * The in-process assignment signal: a sequence number per commit, the last one per worker, and the
 * waiters per worker. Memory is one number per worker that ever got work in this process.
 */
export interface InProcessAssignments {
  committed(project: string, workerIds: Iterable<string>): void
  mark(): number
  next(project: string, workerId: string, since: number, abort: AbortSignal): Promise<boolean>
}

export function inProcessAssignments(): InProcessAssignments {
  let seq = 0
  const last = new Map<string, number>()
  const waiters = new Map<string, Set<(woken: boolean) => void>>()
  const keyOf = (project: string, workerId: string) => `${project}/${workerId}`
  return {
    committed(project, workerIds) {
      seq++
      for (const id of workerIds) {
        const key = keyOf(project, id)
        last.set(key, seq)
        for (const wake of waiters.get(key) ?? []) wake(true)
      }
    },
    mark: () => seq,
    next(project, workerId, since, abort) {
      const key = keyOf(project, workerId)
      if ((last.get(key) ?? 0) > since) return Promise.resolve(true)
      if (abort.aborted) return Promise.resolve(false)
      return new Promise((resolve) => {
        const set = waiters.get(key) ?? new Set()
        waiters.set(key, set)
        const done = (woken: boolean) => {
          set.delete(done)
          if (!set.size) waiters.delete(key)
          abort.removeEventListener("abort", onAbort)
          resolve(woken)
        }
        const onAbort = () => done(false)
        set.add(done)
        abort.addEventListener("abort", onAbort, { once: true })
      })
    },
  }
}

export interface RuntimeOptions {
  store: StateStore
  queue: ScheduleQueue
  logger: Logger
  pepper: string
  secrets: Secrets
  providers?: Providers
  clock?: Clock
  version?: string
  operatorProject?: string
  /** Offer held heartbeats (see `Runtime.heartbeatHold`); off by default. */
  heartbeatHold?: boolean
}

export const Version = "0.1.0"
export const DefaultOperatorProject = "default"

export function createRuntime(options: RuntimeOptions): Runtime {
  const clock = options.clock ?? systemClock
  const repos = Repos(options.store, clock, options.logger, options.pepper)
  return {
    repos,
    transitions: Transitions(repos, clock),
    queue: options.queue,
    clock,
    logger: options.logger,
    pepper: options.pepper,
    secrets: options.secrets,
    providers: options.providers ?? {},
    assignments: inProcessAssignments(),
    heartbeatHold: options.heartbeatHold ?? false,
    version: options.version ?? Version,
    operatorProject: options.operatorProject ?? DefaultOperatorProject,
  }
}
