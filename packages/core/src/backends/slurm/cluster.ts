/**
 * The cluster as the status command shows it: partitions (and whether the ones the config names
 * exist), nodes, queue depth; and capacity from the nodes, each counted once. Pure.
 */
import type { BackendConfigOf } from "../../model/backend"
import type { BackendStatus, ResourceCapacity } from "../protocol"
import { parseQueueDepth, parseSinfo, parseSinfoNodes, type SinfoNode } from "./parse"
import { sections } from "./remote"

/** The backend's status from the status command's stdout: unhealthy when a configured partition is missing. */
export function clusterStatus(
  config: Pick<BackendConfigOf<"slurm">, "partition" | "gpuPartition" | "loginHost">,
  stdout: string,
  version: string | undefined,
): BackendStatus {
  const parts = sections(stdout)
  const partitions = parseSinfo(parts.main)
  const known = new Set(partitions.map((p) => p.name))
  const missing = [
    ...new Set([config.partition, ...(config.gpuPartition ? [config.gpuPartition] : [])]),
  ].filter((name) => !known.has(name))
  const message = missing.length
    ? `partition ${missing.map((m) => `"${m}"`).join(", ")} does not exist on ${config.loginHost} (it has ${[...known].join(", ") || "none"}); fix the backend's partition`
    : undefined
  return {
    healthy: !message,
    ...(message ? { message } : {}),
    detail: { version, partitions, nodes: parseSinfoNodes(parts.nodes), queue: parseQueueDepth(parts.queue) },
  }
}

/** Total and free resources of the nodes, each once (a node is often in several partitions). */
export function capacityOf(nodes: SinfoNode[]): ResourceCapacity {
  const up = nodes.filter((n) => !/^(down|drain|drng|fail|maint|inval)/.test(n.state))
  const sum = (f: (n: SinfoNode) => number, of = nodes) => of.reduce((t, n) => t + f(n), 0)
  return {
    total: { cpu: sum((n) => n.cpus.total), memoryMiB: sum((n) => n.memoryMiB), gpu: sum((n) => n.gpus) },
    free: {
      cpu: sum((n) => n.cpus.idle, up),
      memoryMiB: 0,
      gpu: sum((n) => (n.cpus.allocated === 0 ? n.gpus : 0), up),
    },
  }
}
