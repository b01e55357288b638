/** What the API needs from its composition root, and the per-request values its middleware sets. */

import type { ControlDeps } from "../control/deps"
import type { Caller } from "../model/project"
import type { ScheduleQueue, ScheduleRequest } from "../queue/port"

/**
 * What the API needs: what the control loop works with (it builds backends to fetch logs and status),
 * the schedule queue, the key pepper, its version and the operator project.
 */
export interface ApiDeps extends ControlDeps {
  queue: ScheduleQueue
  /** HMAC pepper for key hashes and the encryption of stored idempotent responses. */
  pepper: string
  version: string
  /** Project whose admin keys may create projects (the one bootstrap makes first). */
  operatorProject: string
  /**
   * Requests per key (`DefaultRateLimit` when absent; `false`: none). Counted in this API process: per
   * instance, so on Lambda per concurrent instance.
   */
  rateLimit?: Partial<RateLimitOptions> | false
  /**
   * Hold a worker's heartbeat open until new work is placed on it, when it asks (`?waitS`). Off when
   * absent: the answer then carries no `holdS` and agents heartbeat at their interval.
   */
  heartbeatHold?: boolean
}

/** A token bucket per key id (and per worker credential, for heartbeats). */
export interface RateLimitOptions {
  /** Sustained requests per second. */
  perSecond: number
  /** Requests that may come at once after a quiet spell (the bucket's size). */
  burst: number
  /** Buckets kept at most; idle ones go first, so memory stays bounded whatever the number of keys. */
  maxBuckets: number
}

export const DefaultRateLimit: RateLimitOptions = { perSecond: 50, burst: 100, maxBuckets: 10_000 }

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
