/** The repositories over a StateStore: one bundle the API and the control loop share. */
import type { Clock } from "../util/clock"
import type { Logger } from "../util/logger"
import { Active } from "./active"
import { BackendState } from "./backend-state"
import { Backends } from "./backends"
import { EventLog } from "./events"
import { Idempotency } from "./idempotency"
import { Jobs } from "./jobs"
import { Leases } from "./leases"
import type { StateStore } from "./port"
import { Projects } from "./projects"
import { settledWrites } from "./settled"
import { Swarms } from "./swarms"
import { Workers } from "./workers"

export function Repos(given: StateStore, clock: Clock, logger: Logger, pepper: string) {
  // A write whose answer was lost is settled by reading it back, never taken for a failure.
  const store = settledWrites(given)
  const events = EventLog(store, clock, logger)
  return {
    store,
    events,
    active: Active(store),
    backendState: BackendState(store),
    projects: Projects(store, clock, pepper),
    backends: Backends(store, clock, events),
    swarms: Swarms(store),
    jobs: Jobs(store, clock),
    workers: Workers(store, clock, events, pepper),
    idempotency: Idempotency(store, clock),
    leases: Leases(store, clock),
  }
}
export type Repos = ReturnType<typeof Repos>
