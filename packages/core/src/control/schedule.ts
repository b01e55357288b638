/**
 * The schedule consumer's core: handle a batch of schedule requests. Malformed messages are dropped
 * (logged; retrying cannot fix them); retryable failures are returned so the edge reports them as
 * batch item failures and the queue redelivers them (after `maxReceiveCount`, to the dead-letter queue).
 */
import { randomUUID } from "node:crypto"
import { parseScheduleRequest, type ScheduleRequest } from "../queue/port"
import { BackendError, isRetryable } from "../util/errors"
import type { ControlDeps } from "./deps"
import { reconcilePass } from "./reconcile"

export interface ScheduleMessage {
  id: string
  body: string
  receiveCount: number
}

export type ScheduleOutcome = "gone" | "passed" | "deferred"

/**
 * Look at one object and move it toward its desired state now, rather than at the next tick: run a
 * control-loop pass over its backend. When another pass holds the backend's lease, that pass (which
 * repeats every few seconds while there is work) picks the object up.
 */
export async function scheduleOne(rt: ControlDeps, request: ScheduleRequest): Promise<ScheduleOutcome> {
  const { repos } = rt
  // Requests name their object's backend; one without it (sent by an older version) is looked up.
  let backendId: string | undefined = request.backendId
  if (!backendId)
    switch (request.kind) {
      case "job":
        backendId = (await repos.jobs.get(request.project, request.id))?.backendId
        break
      case "swarm":
        backendId = (await repos.swarms.get(request.project, request.id))?.backendId
        break
      case "backend":
        backendId = request.id
        break
    }
  const backend = backendId ? await repos.backends.get(request.project, backendId) : undefined
  if (!backend) return "gone"
  const pass = await reconcilePass(rt, backend, `schedule-${process.pid}-${randomUUID().slice(0, 8)}`)
  if (pass.error) throw new BackendError(pass.error, true)
  return pass.ran ? "passed" : "deferred"
}

/** Handle a batch; returns the ids of messages to retry. */
export async function handleScheduleBatch(
  rt: ControlDeps,
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
