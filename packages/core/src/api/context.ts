/** What the API needs from its composition root, and the per-request values its middleware sets. */
import type { Caller } from "../model/project"
import type { ScheduleRequest } from "../queue/port"
import type { Runtime } from "../runtime"

/** What the API needs: the runtime (the API builds backends to fetch logs). */
export type ApiDeps = Runtime

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
