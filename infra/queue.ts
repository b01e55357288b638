/**
 * Schedule requests: the `ScheduleQueue` that the API enqueues into, its dead-letter queue, and
 * the consumer (`infra/schedule.ts`) runs `functions/schedule.handler` (DESIGN.md §4).
 *
 * Timing contract:
 * - the consumer has `consumerTimeout`; the queue's visibility timeout is six times that (AWS's
 *   guidance for Lambda event sources), so a message is never redelivered while a consumer
 *   still works on it, even after throttling retries;
 * - a message the consumer reports in `batchItemFailures` becomes visible again after the
 *   visibility timeout, so `maxReceiveCount` (5) receives take about 35 minutes before the
 *   message lands in `ScheduleDlq`, where it is kept 14 days for inspection.
 */
import { ScheduleTimeoutMs } from "../functions/timing"

/**
 * The consumer's timeout, seconds (`infra/schedule.ts`): a pass's lease and a margin
 * (`functions/timing.ts`, 70 s); the queue's visibility timeout is six times it.
 */
export const consumerTimeoutS = ScheduleTimeoutMs / 1000

export const dlq = new sst.aws.Queue("ScheduleDlq", {
  transform: {
    queue: (args) => {
      args.messageRetentionSeconds = 14 * 24 * 60 * 60
    },
  },
})

/** Receives before a message moves to the dead-letter queue. */
export const maxReceiveCount = 5

export const queue = new sst.aws.Queue("ScheduleQueue", {
  visibilityTimeout: `${consumerTimeoutS * 6} seconds`,
  dlq: { queue: dlq.arn, retry: maxReceiveCount },
})
