/** The scheduler's public surface: `place()` over a `Snapshot`, its types, and constraint evaluation. */
export { type CompiledConstraint, compileConstraint, holds, type Norm, normalize } from "./constraints"
export { place } from "./place"
export type * from "./types"
