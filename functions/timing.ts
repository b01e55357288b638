/**
 * How long each deployed function may run, from the leases its passes hold and the crons' period. The
 * handlers loop by these numbers and `infra/` computes the functions' timeouts from them (the
 * arithmetic is explained in `infra/ticks.ts`), so the two cannot disagree.
 *
 * Plain data with no imports: `infra/` is type-checked against SST's types alone and bundled by SST
 * into its deploy-time program, so it cannot import core's control code (that would take in the
 * backends, ssh2 and the SDKs). The lease lengths are therefore restated here, and
 * `test/infra-wiring.test.ts` holds them equal to core's own: `LeaseTtlMs`
 * (`packages/core/src/control/reconcile.ts`) and `AutoscaleLeaseTtlMs` (`control/ticks.ts`).
 */

/** The crons fire this often (`rate(1 minute)` in `infra/ticks.ts`). */
export const CronPeriodMs = 60_000

/** A reconcile pass's lease (core's `LeaseTtlMs`): every pass runs in the schedule consumer. */
export const ReconcileLeaseMs = 60_000

/** An autoscale pass's lease (core's `AutoscaleLeaseTtlMs`). */
export const AutoscaleLeaseMs = 60_000

/**
 * Time kept after a pass's lease has run out: its release (a read and a write), the handler's answer,
 * and the difference between Lambda's clock and the store's.
 */
export const EndMarginMs = 10_000

/** A backend with work gets a pass this often: the delay between the ticks the reconcile cron sends it. */
export const ReconcileIntervalMs = 5_000

/** The reconcile cron sends each backend its ticks for this long ahead: until the next cron sends more. */
export const ReconcileWindowMs = CronPeriodMs

/**
 * The reconcile function's timeout. It runs no pass (the consumer does, under their leases): it lists
 * the backends, asks each whether it has work (a query or two) and sends its ticks, 10 to a call. A
 * minute covers thousands of backends, and it ends before the next cron fires.
 */
export const ReconcileTimeoutMs = CronPeriodMs

/** The autoscale function's timeout: its one pass, under one lease, and the margin. */
export const AutoscaleTimeoutMs = AutoscaleLeaseMs + EndMarginMs

/** The schedule consumer's timeout: its passes (one per backend, side by side), under one lease, and the margin. */
export const ScheduleTimeoutMs = ReconcileLeaseMs + EndMarginMs
