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
    version: options.version ?? Version,
    operatorProject: options.operatorProject ?? DefaultOperatorProject,
  }
}
