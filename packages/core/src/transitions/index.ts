/** Transitions: the rules applied to stored items, for the API, the control loop and the workers backend. */
import type { Repos } from "../store"
import type { Clock } from "../util/clock"
import { JobTransitions } from "./jobs"
import { SwarmTransitions } from "./swarms"

export function Transitions(repos: Pick<Repos, "jobs" | "swarms" | "events">, clock: Clock) {
  return {
    jobs: JobTransitions({ jobs: repos.jobs, events: repos.events, clock }),
    swarms: SwarmTransitions({ swarms: repos.swarms, events: repos.events, clock }),
  }
}
export type Transitions = ReturnType<typeof Transitions>
