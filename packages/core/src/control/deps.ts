/** What the control loop works with: what its backends are built with (it builds them, one per pass). */
import type { BackendDeps } from "../backends/protocol"
import type { AssignmentSignal } from "../backends/workers/assignment-signal"

/** `assignments`: told of each pass's committed placements, so heartbeats held in this process answer. */
export type ControlDeps = BackendDeps & { assignments?: AssignmentSignal }
