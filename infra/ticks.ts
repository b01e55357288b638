/**
 * Ticks: the reconcile and autoscale crons (EventBridge Scheduler via `sst.aws.CronV2`), both every
 * minute, DESIGN.md §4. Their timeouts are computed from `functions/timing.ts`, the numbers the
 * handlers run by:
 *
 * - `Reconcile` fans the passes out instead of running them: each backend with work gets its ticks
 *   for the coming minute as schedule requests, one every 5 s (`ReconcileIntervalMs`), held back by
 *   the queue (`DelaySeconds`) until due; the schedule consumer runs them, one pass per backend per
 *   batch, under the backend's 60 s lease (its timeout, `ScheduleTimeoutMs`, is that lease and a
 *   margin). So each backend is passed over at its own pace in as many consumer invocations as the
 *   queue's depth calls for: a slow backend (an SSH round trip, a stalled API) holds up no other, and no
 *   invocation is paid for sleeping between passes. The reconcile function itself lists the backends,
 *   asks each whether it has work and sends the ticks; its timeout is the cron's period, 60 s.
 * - `Autoscale` does one pass per invocation, each backend's under its own 60 s lease
 *   (`AutoscaleLeaseMs`, core's `AutoscaleLeaseTtlMs`), all side by side from the start. Its timeout is
 *   that lease and the same margin, 60 s + 10 s = 70 s: the pass is never cut off holding its lease, and an
 *   invocation ends at most 10 s after the next one starts.
 *
 * No retries anywhere: EventBridge Scheduler's are off (`retries` defaults to 0) and Lambda's
 * own async retries are turned off (`retries: 0` on the function). A failed tick is repaired by
 * the next one a minute later; retrying an old one only adds load. A tick request whose pass fails is
 * not retried by the consumer either (the next is 5 s away).
 *
 * What they use (`functions/deps.ts`): reconcile, the table and the queue (`tickRuntime()`); autoscale,
 * the table alone (deployed, only worker-daemon backends autoscale, and that reaches no backend system;
 * `autoscaleRuntime()`). The passes' backend secrets and EKS access are the consumer's.
 */
import { AutoscaleTimeoutMs, ReconcileTimeoutMs } from "../functions/timing"
import { functionArgs } from "./functions"
import { queue } from "./queue"
import { table } from "./storage"

export const reconcile = new sst.aws.CronV2("Reconcile", {
  schedule: "rate(1 minute)",
  function: {
    ...functionArgs({ link: [table, queue], secrets: false, clusters: false }),
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
