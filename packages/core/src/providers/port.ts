/**
 * The scale-group provider port: what starts and stops a group's worker agents. `local` runs them as
 * processes of the local control plane; a `slurm` provider will run them as pilot jobs. A provider
 * knows only instances; workers register with their `instanceId`, which ties the two together.
 */
import type { ScaleGroup } from "../model/backend"

export interface ScaleTarget {
  project: string
  backendId: string
  group: ScaleGroup
}

export interface ProviderInstance {
  id: string
  /** Epoch ms when it was started. */
  startedAt: number
}

export interface ScaleGroupProvider {
  /** Start `count` workers of the group; returns the new instance ids. Throws on failure (the autoscaler backs off). */
  start(target: ScaleTarget, count: number): Promise<string[]>
  /** Stop these instances (idempotent: unknown or gone ones are ignored). */
  stop(target: ScaleTarget, instanceIds: string[]): Promise<void>
  /** Instances of the group that the provider runs (started and not yet gone). */
  list(target: ScaleTarget): Promise<ProviderInstance[]>
}

export type ProviderType = ScaleGroup["provider"]["type"]
export type Providers = Partial<Record<ProviderType, ScaleGroupProvider>>
