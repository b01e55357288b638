/**
 * The schedule consumer's core: handle a batch of schedule requests. Malformed messages are dropped
 * (logged; retrying cannot fix them); retryable failures are returned so the edge reports them as
 * batch item failures and the queue redelivers them (after `maxReceiveCount`, to the dead-letter queue).
 *
 * A batch runs one pass per backend, however many of its requests name that backend: a pass reads the
 * backend's whole active index, so a burst of submissions (hundreds a second on the local plane)
 * costs a pass per batch, not a pass per job.
 */
import { randomUUID } from "node:crypto"
import { parseScheduleRequest, type ScheduleRequest } from "../queue/port"
import { BackendError, isRetryable } from "../util/errors"
import { warnOnChange } from "../util/log-on-change"
import type { ControlDeps } from "./deps"
import { reconcilePass } from "./reconcile"
import { TickReason } from "./ticks"

export interface ScheduleMessage {
  id: string
  body: string
  receiveCount: number
}

export type ScheduleOutcome = "gone" | "passed" | "deferred"

/** The backend a request's object lives on; a request without it (sent by an older version) is looked up. */
async function backendOf(rt: ControlDeps, request: ScheduleRequest): Promise<string | undefined> {
  if (request.backendId) return request.backendId
  switch (request.kind) {
    case "job":
      return (await rt.repos.jobs.get(request.project, request.id))?.backendId
    case "swarm":
      return (await rt.repos.swarms.get(request.project, request.id))?.backendId
    case "backend":
      return request.id
  }
}

/**
 * Move a backend's objects toward their desired state now, rather than at the next tick: run a
 * control-loop pass over it. When another pass holds the backend's lease, that pass, or the next of
 * the backend's ticks (every few seconds while it has work: every second locally, every 5 s deployed
 * once the reconcile cron has seen the work), picks the objects up.
 */
async function passOver(rt: ControlDeps, project: string, backendId: string): Promise<ScheduleOutcome> {
  const backend = await rt.repos.backends.get(project, backendId)
  if (!backend) return "gone"
  const pass = await reconcilePass(rt, backend, `schedule-${process.pid}-${randomUUID().slice(0, 8)}`)
  if (pass.error) throw new BackendError(pass.error, true)
  return pass.ran ? "passed" : "deferred"
}

/** Look at one object and move it toward its desired state now (a pass over its backend). */
export async function scheduleOne(rt: ControlDeps, request: ScheduleRequest): Promise<ScheduleOutcome> {
  const backendId = await backendOf(rt, request)
  return backendId ? passOver(rt, request.project, backendId) : "gone"
}

interface Group {
  project: string
  backendId: string
  messages: { message: ScheduleMessage; request: ScheduleRequest }[]
}

/** Handle a batch: one pass per backend named in it. Returns the ids of messages to retry. */
export async function handleScheduleBatch(
  rt: ControlDeps,
  messages: ScheduleMessage[],
): Promise<{ retry: string[] }> {
  const retry: string[] = []
  const failed = (error: unknown, items: Group["messages"]) => {
    const retryable = isRetryable(error)
    for (const { message, request } of items) {
      rt.logger.error(`schedule ${request.kind} ${request.id} failed${retryable ? "; will retry" : ""}`, {
        project: request.project,
        receiveCount: message.receiveCount,
        error: error instanceof Error ? error.message : String(error),
      })
      if (retryable) retry.push(message.id)
    }
  }
  const groups = new Map<string, Group>()
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
      let backendId: string | undefined
      try {
        backendId = await backendOf(rt, request)
      } catch (error) {
        return failed(error, [{ message, request }])
      }
      if (!backendId) {
        rt.logger.debug(`schedule ${request.kind} ${request.id}: gone`, { project: request.project })
        return
      }
      const key = JSON.stringify([request.project, backendId])
      const group = groups.get(key) ?? { project: request.project, backendId, messages: [] }
      group.messages.push({ message, request })
      groups.set(key, group)
    }),
  )
  await Promise.all(
    [...groups.values()].map(async (group) => {
      try {
        const outcome = await passOver(rt, group.project, group.backendId)
        rt.logger.debug(
          `schedule pass over backend ${group.backendId} for ${group.messages.length} request(s): ${outcome}`,
          { project: group.project, reasons: [...new Set(group.messages.map((m) => m.request.reason))] },
        )
      } catch (error) {
        // A backend's tick that fails is not retried: its error is in the backend's status, and its
        // next tick is a few seconds away (a retried tick would only fill the dead-letter queue).
        const ticks = group.messages.filter((m) => m.request.reason === TickReason)
        if (ticks.length)
          warnOnChange(
            rt.logger,
            `backend ${group.project}/${group.backendId}`,
            `tick failed: ${error instanceof Error ? error.message : String(error)}`,
          )
        failed(
          error,
          group.messages.filter((m) => m.request.reason !== TickReason),
        )
      }
    }),
  )
  return { retry }
}
