/**
 * Ticks: the reconcile and autoscale crons (EventBridge Scheduler via `sst.aws.CronV2`), both every
 * minute, DESIGN.md §4. Their timeouts are computed from `functions/timing.ts`, the numbers the
 * handlers run by:
 *
 * - `Reconcile`. With active work it ticks every 5 s (`ReconcileIntervalMs`) inside one invocation;
 *   with none it returns after one cheap query. A pass holds its backend's lease for up to 60 s
 *   (`ReconcileLeaseMs`, core's `LeaseTtlMs`) and acts under it until 5 s before it runs out; a Lambda
 *   killed in the middle of a pass would leave the lease held and the backend unattended until it
 *   expires. So the loop starts no pass with less than a whole lease and a 10 s margin
 *   (`EndMarginMs`: the release, the answer, clock skew) left: 70 s (`ReconcilePassBudgetMs`). To go
 *   on starting passes for the whole minute until the next invocation fires (`ReconcileLoopWindowMs`,
 *   60 s), the timeout is that window plus the budget:
 *     60 s window + 60 s lease + 10 s margin = 130 s.
 *   Invocations overlap by up to 70 s, while the last pass of one finishes; each backend's lease
 *   keeps two passes off the same backend. A longer timeout would only keep more loops running side by
 *   side, each paid for and polling for nothing.
 * - `Autoscale` does one pass per invocation, each backend's under its own 60 s lease
 *   (`AutoscaleLeaseMs`, core's `AutoscaleLeaseTtlMs`), all side by side from the start. Its timeout is
 *   that lease and the same margin, 60 s + 10 s = 70 s: the pass is never cut off holding its lease, and an
 *   invocation ends at most 10 s after the next one starts.
 *
 * No retries anywhere: EventBridge Scheduler's are off (`retries` defaults to 0) and Lambda's
 * own async retries are turned off (`retries: 0` on the function). A failed tick is repaired by
 * the next one a minute later; retrying an old one only adds load.
 *
 * What they use (`functions/deps.ts`): reconcile, the table, backend secrets and EKS clusters (its
 * passes reach the backends' systems; `controlRuntime()`); autoscale, the table alone (deployed, only
 * worker-daemon backends autoscale, and that reaches no backend system; `autoscaleRuntime()`).
 */
import { AutoscaleTimeoutMs, ReconcileTimeoutMs } from "../functions/timing"
import { functionArgs } from "./functions"
import { table } from "./storage"

export const reconcile = new sst.aws.CronV2("Reconcile", {
  schedule: "rate(1 minute)",
  function: {
    ...functionArgs({ link: [table], secrets: true, clusters: true }),
    handler: "functions/reconcile.handler",
    timeout: `${ReconcileTimeoutMs / 1000} seconds`,
    retries: 0,
    memory: "512 MB",
  },
})

export const autoscale = new sst.aws.CronV2("Autoscale", {
  schedule: "rate(1 minute)",
  function: {
    ...functionArgs({ link: [table], secrets: false, clusters: false }),
    handler: "functions/autoscale.handler",
    timeout: `${AutoscaleTimeoutMs / 1000} seconds`,
    retries: 0,
    memory: "512 MB",
  },
})
