/**
 * Lambda entry of the reconcile tick (cron, every minute). While there is active work it ticks every
 * few seconds, starting a pass only while a whole lease (and a margin) is left of the invocation, so no
 * pass is cut off holding its lease; with none it returns after one pass. The numbers, and the
 * timeout `infra/ticks.ts` computes from them, are in `./timing.ts`.
 */
import { reconcileTick, tickWhileBusy } from "@swarmplane/core/control/ticks"
import type { Context, ScheduledEvent } from "aws-lambda"
import { controlRuntime } from "./deps"
import { ReconcileIntervalMs, ReconcilePassBudgetMs } from "./timing"

export const handler = async (_event: ScheduledEvent, context: Context) => {
  const rt = controlRuntime()
  const deadlineMs = rt.clock.now() + context.getRemainingTimeInMillis()
  const { passes, last } = await tickWhileBusy(rt, reconcileTick, {
    deadlineMs,
    intervalMs: ReconcileIntervalMs,
    marginMs: ReconcilePassBudgetMs,
  })
  return { passes, busy: last.busy, backends: last.backends.length }
}
