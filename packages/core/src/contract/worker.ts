/**
 * The worker protocol as the agent uses it at run time (`@swarmplane/core/contract/worker`): the types
 * of register and heartbeat, what an agent sends and what it is told, and two pure helpers, with no
 * schema behind them. Importing it loads no zod, so an agent (and each batch shard it starts) does not
 * pay for the API's schemas at every start. The contract's index re-exports all of it, with the
 * schemas that check these messages.
 */
export { fileSafe, progressCounters } from "../model/progress"
export type {
  DesiredAttempt,
  HeartbeatRequest,
  HeartbeatResponse,
  ObservedAttempt,
  Progress,
  RegisterWorkerRequest,
  RegisterWorkerResponse,
  RouterCounters,
} from "../model/worker"
export { WorkerCredentialHeader } from "../model/worker-credential"
