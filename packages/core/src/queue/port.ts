/**
 * The ScheduleQueue port: schedule requests from API writes to the schedule consumer. At-least-once;
 * a message that is not deleted comes back after its visibility timeout and, past the queue's
 * `maxReceiveCount`, moves to the dead-letter queue. Adapters: `MemoryQueue()` and `SqsQueue()`.
 */
import { z } from "zod"

/** What a schedule request asks for: look at this object and move it toward its desired state. */
export const ScheduleRequest = z
  .object({
    kind: z.enum(["job", "swarm", "backend"]).describe("Kind of object to schedule."),
    project: z.string().min(1).max(63).describe("Project the object belongs to."),
    id: z.string().min(1).max(128).describe("Job id, swarm name or backend id."),
    reason: z.string().max(200).describe("Why the request was sent, for logs (e.g. `job.created`)."),
    backendId: z
      .string()
      .min(1)
      .max(63)
      .optional()
      .describe("The object's backend, so the consumer need not read the object back to find it."),
  })
  .strict()
export type ScheduleRequest = z.infer<typeof ScheduleRequest>

export interface ReceivedMessage {
  /** Queue message id. */
  id: string
  /** Handle for `delete`/`release`. */
  receipt: string
  /** Raw message body (JSON text); parse with `parseScheduleRequest`. */
  body: string
  /** How many times this message has been received, this time included. */
  receiveCount: number
}

export interface ReceiveOptions {
  /** 1..10, default 10. */
  max?: number
  /** Long-poll wait, 0..20 s. Default 0. */
  waitS?: number
  /** Visibility timeout for the received messages, seconds. Default: the queue's. */
  visibilityS?: number
}

export interface ScheduleQueue {
  /**
   * Send requests, 10 per batch call. Throws `BackendError` if any entry could not be sent.
   * `delaysS[i]` (0..900 s, SQS's `DelaySeconds`): request `i` cannot be received before then.
   */
  send(requests: ScheduleRequest[], delaysS?: readonly number[]): Promise<void>
  /** Receive up to `max` messages (an SQS queue gives 10 at most); they stay invisible for the visibility timeout. */
  receive(options?: ReceiveOptions): Promise<ReceivedMessage[]>
  /** Delete handled messages, 10 per batch call. Idempotent. */
  delete(receipts: string[]): Promise<void>
  /** Make a message visible again now, so a retry happens without waiting out the visibility timeout. */
  release(receipt: string): Promise<void>
}

/** Parse a message body; undefined when it is not a valid schedule request (a poison message). */
export function parseScheduleRequest(body: string): ScheduleRequest | undefined {
  try {
    const parsed = ScheduleRequest.safeParse(JSON.parse(body))
    return parsed.success ? parsed.data : undefined
  } catch {
    return undefined
  }
}

/** SQS's bounds of `DelaySeconds`: a whole number of seconds, 0 to 900. */
export const MaxDelayS = 900

/** Check `send`'s delays before anything is sent: a bad one is a programming error, named. */
export function checkDelays(delaysS: readonly number[]): void {
  for (const [i, d] of delaysS.entries())
    if (!Number.isInteger(d) || d < 0 || d > MaxDelayS)
      throw new RangeError(
        `delaysS[${i}] is ${d}: a delay is a whole number of seconds from 0 to ${MaxDelayS}`,
      )
}
