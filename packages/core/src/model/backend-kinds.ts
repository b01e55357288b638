/**
 * Which kind each backend type is: `workers` runs swarmplane's scheduler; the others delegate
 * placement. Plain data, apart from the config schemas (`backend.ts`), so the store can stamp a
 * backend's kind without loading every backend's schema.
 */
import type { BackendKinds } from "./states"

export const kindOfType = {
  slurm: "delegated",
  lepton: "delegated",
  eks: "delegated",
  workers: "worker-daemon",
} as const satisfies Record<string, (typeof BackendKinds)[number]>
