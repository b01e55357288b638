/**
 * Parsers for what the Slurm CLI prints about the cluster: partitions and CPUs (`sinfo`), queue depth
 * (`squeue ... | sort | uniq -c`) and the version. Pure; re-exported by parse.ts.
 */
import { gpuCount, isNoValue, lines, parseError, parseSlurmDuration } from "./parse-fields"

/** `sinfo -h -o '<SINFO_FORMAT>'`: partition | avail | nodes | node state | CPUs A/I/O/T | GRES | max time. */
export const SINFO_FORMAT = "%P|%a|%D|%t|%C|%G|%l"

/** A partition, summed over sinfo's lines (sinfo prints one line per partition and node state). */
export interface SinfoPartition {
  /** Without the default marker `*`. */
  name: string
  isDefault: boolean
  /** `up`, `down`, `drain` or `inact`. */
  available: string
  nodes: number
  /** Node counts by short state (`idle`, `mix`, `alloc`, `comp`, `drng`, `drain`, `down`, ...), flags dropped. */
  nodesByState: Record<string, number>
  /** `other` counts CPUs of drained and down nodes. */
  cpus: { allocated: number; idle: number; other: number; total: number }
  /** Distinct node GRES (`gpu:fake:2`). */
  gres: string[]
  gpus: number
  /** `undefined` when infinite. */
  maxTimeS?: number
}

export function parseSinfo(text: string): SinfoPartition[] {
  const partitions = new Map<string, SinfoPartition>()
  for (const line of lines(text)) {
    const [rawName = "", available = "", count = "", state = "", cpus = "", gres = "", limit = ""] =
      line.split("|")
    const cpu = /^(\d+)\/(\d+)\/(\d+)\/(\d+)$/.exec(cpus)
    if (!rawName || !/^\d+$/.test(count) || !cpu) throw parseError("sinfo line", line)
    const name = rawName.replace(/\*$/, "")
    const part = partitions.get(name) ?? {
      name,
      isDefault: rawName.endsWith("*"),
      available,
      nodes: 0,
      nodesByState: {},
      cpus: { allocated: 0, idle: 0, other: 0, total: 0 },
      gres: [],
      gpus: 0,
      maxTimeS: parseSlurmDuration(limit),
    }
    const nodes = Number(count)
    const baseState = state.replace(/[*~#!%$@^-]+$/, "") // `idle*`: not responding; `idle~`: powered down
    part.nodes += nodes
    part.nodesByState[baseState] = (part.nodesByState[baseState] ?? 0) + nodes
    part.cpus.allocated += Number(cpu[1])
    part.cpus.idle += Number(cpu[2])
    part.cpus.other += Number(cpu[3])
    part.cpus.total += Number(cpu[4])
    if (!isNoValue(gres) && !part.gres.includes(gres)) part.gres.push(gres)
    part.gpus += gpuCount(gres) * nodes
    partitions.set(name, part)
  }
  return [...partitions.values()]
}

/** `sinfo -h -N -o '<SINFO_NODE_FORMAT>'`: node | CPUs A/I/O/T | memory MB | GRES | state (one line per node and partition). */
export const SINFO_NODE_FORMAT = "%N|%C|%m|%G|%t"

export interface SinfoNode {
  name: string
  cpus: { allocated: number; idle: number; other: number; total: number }
  memoryMiB: number
  gpus: number
  state: string
}

/**
 * Nodes, each once: sinfo prints a node once per partition it is in, so capacity summed over
 * partitions would count a node in two partitions twice.
 */
export function parseSinfoNodes(text: string): SinfoNode[] {
  const nodes = new Map<string, SinfoNode>()
  for (const line of lines(text)) {
    const [name = "", cpus = "", memory = "", gres = "", state = ""] = line.split("|")
    const cpu = /^(\d+)\/(\d+)\/(\d+)\/(\d+)$/.exec(cpus)
    if (!name || !cpu) throw parseError("sinfo node line", line)
    if (nodes.has(name)) continue
    nodes.set(name, {
      name,
      cpus: { allocated: Number(cpu[1]), idle: Number(cpu[2]), other: Number(cpu[3]), total: Number(cpu[4]) },
      memoryMiB: /^\d+$/.test(memory) ? Number(memory) : 0,
      gpus: isNoValue(gres) ? 0 : gpuCount(gres),
      state: state.replace(/[*~#!%$@^-]+$/, ""),
    })
  }
  return [...nodes.values()]
}

/** Queue depth: `squeue -h -o '%T' | sort | uniq -c`, or with `-o '%P|%T|%r'` per partition and reason. */
export interface QueueDepthEntry {
  count: number
  state: string
  partition?: string
  reason?: string
}

export function parseQueueDepth(text: string): QueueDepthEntry[] {
  return lines(text).map((line) => {
    const match = /^\s*(\d+) (.+)$/.exec(line)
    const fields = match?.[2]?.split("|") ?? []
    if (fields.length === 1) return { count: Number(match?.[1]), state: fields[0]! }
    if (fields.length === 3) {
      const [partition, state = "", reason] = fields
      return { count: Number(match?.[1]), partition, state, reason }
    }
    throw parseError("queue depth line", line)
  })
}

export interface SlurmVersion {
  major: number
  minor: number
  patch: number
}

/** `squeue --version` / `sinfo --version`: `slurm-wlm 22.05.8` (Debian), `slurm 23.11.4`. */
export function parseVersion(text: string): SlurmVersion {
  const match = /^slurm(?:-wlm)?\s+(\d+)\.(\d+)\.(\d+)/m.exec(text.trim())
  if (!match) throw parseError("version", text)
  return { major: Number(match[1]), minor: Number(match[2]), patch: Number(match[3]) }
}
