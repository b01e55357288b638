/**
 * Lambda entry of the reconcile tick (cron, every minute). While there is active work it ticks every
 * few seconds until close to the invocation's deadline; with none it returns after one pass.
 */
import { reconcileTick, tickWhileBusy } from "@swarmplane/core/control/ticks"
import type { Context, ScheduledEvent } from "aws-lambda"
import { runtime } from "./deps"

export const IntervalMs = 5_000
export const MarginMs = 15_000

export const handler = async (_event: ScheduledEvent, context: Context) => {
  const rt = runtime()
  const deadlineMs = rt.clock.now() + context.getRemainingTimeInMillis()
  const { passes, last } = await tickWhileBusy(rt, reconcileTick, {
    deadlineMs,
    intervalMs: IntervalMs,
    marginMs: MarginMs,
  })
  return { passes, busy: last.busy, backends: last.backends.length }
}
