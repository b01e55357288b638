/**
 * Lambda entry of the reconcile tick (cron, every minute). It runs no pass itself: each backend with
 * work gets its passes for the coming minute as schedule requests, one every 5 s, held back by the
 * queue until due (`fanOutTicks`), and the schedule consumer runs them. So each backend's passes go at
 * their own pace, side by side with other backends' in as many consumer invocations as the queue's
 * depth calls for; a slow backend holds up no other, and no invocation sleeps between passes. The
 * numbers, and the timeout `infra/ticks.ts` computes from them, are in `./timing.ts`.
 */
import { fanOutTicks } from "@swarmplane/core/control/ticks"
import type { ScheduledEvent } from "aws-lambda"
import { tickRuntime } from "./deps"
import { ReconcileIntervalMs, ReconcileWindowMs } from "./timing"

export const handler = async (_event: ScheduledEvent) => {
  const rt = tickRuntime()
  const { sent, busy, backends } = await fanOutTicks(rt, rt.queue, {
    windowMs: ReconcileWindowMs,
    intervalMs: ReconcileIntervalMs,
  })
  return { sent, busy, backends: backends.length }
}
