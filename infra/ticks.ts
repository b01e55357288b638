/**
 * Ticks: the reconcile and autoscale crons (EventBridge Scheduler via `sst.aws.CronV2`),
 * DESIGN.md §4.
 *
 * - `Reconcile` fires every minute. With active work it keeps ticking every few seconds inside
 *   one invocation; with none it returns after one cheap query. The handler loops until its
 *   deadline minus `IntervalMs + MarginMs` (5 s + 15 s in `functions/reconcile.ts`), so the
 *   timeout is the loop's budget: 80 s gives about 60 s of ticking, handing over to the next
 *   invocation as it fires, with at most ~20 s of overlap when a last pass runs long. A timeout
 *   of several minutes would keep that many loops running side by side (safe, since every
 *   backend is reconciled under a lease, but each extra loop is paid for and polls for nothing).
 * - `Autoscale` fires every minute and does one pass.
 *
 * No retries anywhere: EventBridge Scheduler's are off (`retries` defaults to 0) and Lambda's
 * own async retries are turned off (`retries: 0` on the function). A failed tick is repaired by
 * the next one a minute later; retrying an old one only adds load.
 *
 * Both are linked to the pepper as well because `functions/deps.ts` builds the same
 * dependencies for every handler.
 */
import { functionDefaults } from "./functions"

export const reconcile = new sst.aws.CronV2("Reconcile", {
  schedule: "rate(1 minute)",
  function: {
    ...functionDefaults,
    handler: "functions/reconcile.handler",
    timeout: "80 seconds",
    retries: 0,
    memory: "512 MB",
  },
})

export const autoscale = new sst.aws.CronV2("Autoscale", {
  schedule: "rate(1 minute)",
  function: {
    ...functionDefaults,
    handler: "functions/autoscale.handler",
    timeout: "2 minutes",
    retries: 0,
    memory: "512 MB",
  },
})
