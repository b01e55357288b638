/**
 * The wire contract: everything the CLI and the worker agent share with the control plane, and the
 * only part of core they import (`@swarmplane/core/contract`). It holds what crosses the wire and
 * nothing that runs the plane:
 * - the API's request and response schemas and their types, with the state names (model/);
 * - the worker protocol: register, heartbeat, desired and observed attempts, progress (model/worker.ts);
 * - how an attempt's files are named and its progress counters read (`fileSafe`, `progressCounters`);
 * - a backend's status, capacity, autoscaler decisions and output tails (model/wire.ts);
 * - wire errors: the `{ error: { code, message, details } }` body (`ErrorBody`), the `FieldIssue`s of
 *   `request.invalid`, and `friendlyMessage`, the API's wording of a schema issue.
 *
 * It imports only model/ and the pure parts of util/; never api/, backends/, store/, control/ or the
 * local control plane.
 */
export * from "../model/index"
export { friendlyMessage } from "../model/issues"
export { fileSafe, progressCounters } from "../model/progress"
export type {
  BackendDescriptor,
  BackendStatus,
  LogTail,
  ResourceCapacity,
  ScaleGroupStatus,
} from "../model/wire"
export type { FieldIssue } from "../util/errors"
