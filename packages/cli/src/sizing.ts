/**
 * domyn-swarm's sizing of a swarm: `gpus_per_node`, `nodes`, `replicas_per_node` and
 * `gpus_per_replica`, checked as domyn does (its `validate_resource_allocations`) and turned into
 * placement a backend can carry out: replicas that span several nodes (`nodesPerReplica`) or share
 * one (`replicasPerNode`). Impossible combinations are refused with the arithmetic that shows why.
 * Defaults are domyn's: 4 GPUs per node; replicas per node as many as fit, at most `replicas`.
 * swarmplane's own default for `gpus_per_replica` stays (0, for models such as the built-in echo).
 */
import type { Issue } from "./normalize"

export interface Sizing {
  replicas: number
  gpusPerReplica: number
  gpusPerNode: number
  replicasPerNode?: number
  nodes?: number
}

export interface Placement {
  /** Nodes one replica spans (its GPUs over whole nodes); 1 when it fits on one. */
  nodesPerReplica: number
  /** Replicas that share a node; absent when a replica spans nodes. */
  replicasPerNode?: number
  /** Nodes the swarm takes in all. */
  nodes: number
}

const at = (field: string) => [field]

/** domyn's arithmetic; issues name the field and show the numbers. */
export function placementOf(s: Sizing, issues: Issue[]): Placement | undefined {
  const before = issues.length
  if (s.gpusPerNode < 1) issues.push({ path: at("gpus_per_node"), message: "must be at least 1" })
  if (s.gpusPerReplica > s.gpusPerNode && s.gpusPerReplica % s.gpusPerNode !== 0)
    issues.push({
      path: at("gpus_per_replica"),
      message: `${s.gpusPerReplica} GPUs per replica on ${s.gpusPerNode}-GPU nodes: a replica larger than a node takes whole nodes, so use a multiple of ${s.gpusPerNode} (${s.gpusPerNode * 2}, ${s.gpusPerNode * 3}, ...) or at most ${s.gpusPerNode}`,
    })
  if (s.replicasPerNode !== undefined) {
    if (s.gpusPerReplica > s.gpusPerNode)
      issues.push({
        path: at("replicas_per_node"),
        message: `a replica of ${s.gpusPerReplica} GPUs spans ${Math.ceil(s.gpusPerReplica / s.gpusPerNode)} nodes of ${s.gpusPerNode} GPUs: replicas cannot share a node; remove replicas_per_node`,
      })
    else if (s.replicasPerNode * s.gpusPerReplica > s.gpusPerNode)
      issues.push({
        path: at("replicas_per_node"),
        message: `${s.replicasPerNode} replicas × ${s.gpusPerReplica} GPUs = ${s.replicasPerNode * s.gpusPerReplica} GPUs, more than a node's ${s.gpusPerNode}: at most ${Math.floor(s.gpusPerNode / Math.max(1, s.gpusPerReplica))}`,
      })
  }
  if (issues.length > before) return undefined
  const fits = s.gpusPerReplica <= s.gpusPerNode
  const perNode = fits
    ? (s.replicasPerNode ??
      Math.min(
        s.gpusPerReplica === 0 ? s.replicas : Math.floor(s.gpusPerNode / s.gpusPerReplica),
        s.replicas,
      ))
    : undefined
  const nodesPerReplica = fits ? 1 : s.gpusPerReplica / s.gpusPerNode
  const nodes = perNode ? Math.ceil(s.replicas / perNode) : s.replicas * nodesPerReplica
  if (s.nodes !== undefined && s.nodes !== nodes)
    issues.push({
      path: at("nodes"),
      message: perNode
        ? `${s.replicas} replicas at ${perNode} per node take ${nodes} nodes, not ${s.nodes}: set nodes to ${nodes}, or change replicas or replicas_per_node`
        : `${s.replicas} replicas × ${nodesPerReplica} nodes each take ${nodes} nodes, not ${s.nodes}: set nodes to ${nodes}, or change replicas or gpus_per_replica`,
    })
  if (issues.length > before) return undefined
  return { nodesPerReplica, ...(perNode ? { replicasPerNode: perNode } : {}), nodes }
}
