/** What the control loop works with: what its backends are built with (it builds them, one per pass). */
import type { BackendDeps } from "../backends/protocol"

export type ControlDeps = BackendDeps
