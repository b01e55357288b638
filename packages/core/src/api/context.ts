/** What the API needs from its composition root, and the per-request values its middleware sets. */
import type { Caller } from "../model/project"
import type { ScheduleQueue, ScheduleRequest } from "../queue/port"
import type { Repos } from "../store"
import type { Clock } from "../util/clock"
import type { Logger } from "../util/logger"

export interface ApiDeps {
  repos: Repos
  queue: ScheduleQueue
  clock: Clock
  logger: Logger
  /** HMAC pepper for key hashes and the encryption of stored idempotent responses. */
  pepper: string
  version: string
  /** Project whose admin keys may create projects (the one `npm start` makes first). */
  operatorProject: string
}

export interface ApiEnv {
  Variables: {
    caller: Caller
    /** Set when the request carries an Idempotency-Key: derive object ids from it (`seededId`). */
    idempotency?: { seed: string; createdAt: number }
  }
}

/** Enqueue schedule requests; a failure is logged, not returned: the reconcile tick picks the work up anyway. */
export async function enqueue(deps: ApiDeps, requests: ScheduleRequest[]): Promise<void> {
  try {
    await deps.queue.send(requests)
  } catch (error) {
    deps.logger.warn("could not enqueue schedule request; the reconcile tick will pick the work up", {
      error: error instanceof Error ? error.message : String(error),
      requests,
    })
  }
}
