/**
 * The lepton backend's node group: the configured `nodeGroup` (its name or its id) resolved to the
 * group Lepton places by, once per invocation, and the group as `backend status` shows it.
 */
import { LeptonApiError, type LeptonClient } from "./client"
import type { LeptonConfig } from "./spec"
import type { DedicatedNodeGroup } from "./types"

/** One contact with Lepton, recorded as the backend's health (the backend's `contacting`). */
type Contact = <T>(use: (c: LeptonClient) => Promise<T>) => Promise<T>

export function LeptonNodeGroups(config: LeptonConfig, contacting: Contact) {
  let resolved: Promise<DedicatedNodeGroup> | undefined

  /**
   * The configured group, looked up once: Lepton places jobs and swarms' deployments by id. A group
   * the workspace does not have is an error naming the groups it has; it is retryable, so attempts
   * and swarms wait (the group may be being made, or the config fixed).
   */
  function resolve(): Promise<DedicatedNodeGroup> {
    resolved ??= contacting(async (c) => {
      const groups = await c.nodeGroups.list()
      const wanted = config.nodeGroup
      const found =
        groups.find((g) => g.metadata.id === wanted) ?? groups.find((g) => g.metadata.name === wanted)
      if (found) return found
      const there = groups.map((g) =>
        g.metadata.name ? `${g.metadata.name} (${g.metadata.id})` : g.metadata.id,
      )
      throw new LeptonApiError(
        `Lepton workspace ${config.workspaceId} has no node group ${wanted}; its node groups: ${there.join(", ") || "none"}`,
        true,
        "GET",
        "/dedicated-node-groups",
      )
    })
    return resolved
  }

  /** The group as `status()` shows it: two reads besides its lookup, none per node. */
  async function status(): Promise<Record<string, unknown>> {
    const group = await resolve()
    const id = group.metadata.id
    const [nodes, shapes] = await contacting((c) => Promise.all([c.nodeGroups.nodes(id), c.shapes.list(id)]))
    const gpus = { allocated: 0, total: 0 }
    for (const node of nodes) {
      gpus.allocated += node.spec?.resource?.gpu?.allocated ?? 0
      gpus.total += node.spec?.resource?.gpu?.total ?? 0
    }
    return {
      id,
      name: group.metadata.name ?? undefined,
      gpuProduct: group.spec?.gpu_product ?? undefined,
      nodes: {
        ready: group.status?.ready_nodes ?? undefined,
        desired: group.spec?.desired_nodes ?? undefined,
      },
      gpus,
      shapes: [...new Set(shapes.map((s) => s.spec.name))].sort(),
    }
  }

  return { resolve, status }
}
