/** Lambda entry of the autoscale tick (cron, every minute): one pass over the worker-daemon backends. */
import { autoscaleTick } from "@swarmplane/core/control/ticks"
import type { ScheduledEvent } from "aws-lambda"
import { autoscaleRuntime } from "./deps"

export const handler = async (_event: ScheduledEvent) => {
  const report = await autoscaleTick(autoscaleRuntime())
  return { busy: report.busy, backends: report.backends.length }
}
