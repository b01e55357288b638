/**
 * The schedule consumer's core: handle a batch of schedule requests. Malformed messages are dropped
 * (logged; retrying cannot fix them); retryable failures are returned so the edge reports them as
 * batch item failures and the queue redelivers them (after `maxReceiveCount`, to the dead-letter queue).
 */
import { parseScheduleRequest, type ScheduleRequest } from "../queue/port"
import type { Runtime } from "../runtime"
import { isRetryable } from "../util/errors"

export interface ScheduleMessage {
  id: string
  body: string
  receiveCount: number
}

export type ScheduleOutcome = "dropped" | "gone" | "noted"

/**
 * Look at one object and move it toward its desired state. Placement and submission belong to the
 * backends (`TaskBackend.schedule`, `ServingBackend.createOrUpdate`); until a backend implements them,
 * the request is only checked against the store, and the reconcile tick finds the work in the active
 * index.
 */
export async function scheduleOne(rt: Runtime, request: ScheduleRequest): Promise<ScheduleOutcome> {
  const { repos } = rt
  switch (request.kind) {
    case "job":
      return (await repos.jobs.get(request.project, request.id)) ? "noted" : "gone"
    case "swarm":
      return (await repos.swarms.get(request.project, request.id)) ? "noted" : "gone"
    case "backend":
      return (await repos.backends.get(request.project, request.id)) ? "noted" : "gone"
  }
}

/** Handle a batch; returns the ids of messages to retry. */
export async function handleScheduleBatch(
  rt: Runtime,
  messages: ScheduleMessage[],
): Promise<{ retry: string[] }> {
  const retry: string[] = []
  await Promise.all(
    messages.map(async (message) => {
      const request = parseScheduleRequest(message.body)
      if (!request) {
        rt.logger.warn("dropping a malformed schedule request", {
          messageId: message.id,
          body: message.body.slice(0, 200),
        })
        return
      }
      try {
        const outcome = await scheduleOne(rt, request)
        rt.logger.debug(`schedule ${request.kind} ${request.id}: ${outcome}`, {
          project: request.project,
          reason: request.reason,
        })
      } catch (error) {
        const retryable = isRetryable(error)
        rt.logger.error(`schedule ${request.kind} ${request.id} failed${retryable ? "; will retry" : ""}`, {
          project: request.project,
          receiveCount: message.receiveCount,
          error: error instanceof Error ? error.message : String(error),
        })
        if (retryable) retry.push(message.id)
      }
    }),
  )
  return { retry }
}
