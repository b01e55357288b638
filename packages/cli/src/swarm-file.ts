/**
 * Swarm files: swarmplane's own fields (camelCase or snake_case) and domyn-swarm's config format
 * (`gpus_per_replica`, `cpus_per_task`, `mem_per_cpu`, `args` as a string, `backend: { type, ... }`),
 * normalised into a `SwarmRequest` body. The mapping is the table in docs/cli.md. domyn-swarm fields
 * that swarmplane keeps on the registered backend are errors that say where they go (Lepton's are
 * `checks` that `up` compares with the backend it runs on); fields swarmplane cannot honour are errors
 * that say why; fields swarmplane does itself (node packing, nginx, Ray) are ignored with a warning;
 * anything else is an unknown field.
 */
import { asksNothing, type BackendCheck, shapeProblem } from "./backend-fields"
import { isRecord } from "./http"
import { camelize, camelizeField, camelKey, type Issue, Origins, type Path, sameField } from "./normalize"
import { placementOf } from "./sizing"
import { BackendRules, type Rule, type ServingType, ServingTypes } from "./swarm-rules"

export interface Normalised {
  body: Record<string, unknown>
  origins: Origins
  issues: Issue[]
  /** Values the file gives for fields of the registered backend, for `up` to check against it. */
  checks: BackendCheck[]
}

/** domyn-swarm top-level fields swarmplane does itself: ignored, with a warning. */
const IgnoredTop: Record<string, string> = {
  wait_endpoint_s: "pass swarmplane up --wait --timeout SECONDS instead",
  home_directory: "swarmplane keeps state in its control plane",
  watchdog:
    "swarmplane watches replicas itself: one that exits is restarted, one that keeps failing before it is ready fails the swarm with the reason",
}

/** domyn-swarm's sizing fields: checked together (sizing.ts) and turned into Slurm placement. */
const SizingFields = ["gpus_per_node", "replicas_per_node", "nodes"] as const

export function normaliseSwarm(raw: Record<string, unknown>): Normalised {
  const origins = new Origins()
  const issues: Issue[] = []
  const checks: BackendCheck[] = []
  const body: Record<string, unknown> = {}
  const from = new Map<string, string>() // target field → the key the user wrote
  const put = (field: string, value: unknown, source: Path) => {
    const first = from.get(field)
    if (first !== undefined) {
      issues.push({
        path: source.slice(0, -1),
        key: String(source.at(-1)),
        message: sameField(first, source.join(".")),
      })
      return
    }
    from.set(field, source.join("."))
    origins.set([field], source)
    body[field] = value
  }
  let revision: [unknown, Path] | undefined
  let memPerCpu: [unknown, Path] | undefined
  const sizing: Partial<Record<(typeof SizingFields)[number], unknown>> = {}

  for (const [key, value] of Object.entries(raw)) {
    const source = [key]
    if (key === "backend") continue
    if (IgnoredTop[key]) {
      issues.push({ path: source, message: `ignored: ${IgnoredTop[key]}`, warning: true })
      continue
    }
    if ((SizingFields as readonly string[]).includes(key))
      sizing[key as (typeof SizingFields)[number]] = value
    else if (key === "revision") revision = [value, source]
    else if (key === "mem_per_cpu") memPerCpu = [value, source]
    else if (key === "cpus_per_task") put("cpusPerReplica", value, source)
    else if (key === "mem_per_replica") put("memoryMiBPerReplica", sizeMiB(value, source, issues), source)
    else if (camelKey(key) === "args" && typeof value === "string") put("args", splitArgs(value), source)
    else {
      const field = camelKey(key)
      put(field, camelizeField(field, value, [field], source, origins, issues), source)
    }
  }

  if (memPerCpu) {
    const mib = sizeMiB(memPerCpu[0], memPerCpu[1], issues)
    const cpus = typeof body.cpusPerReplica === "number" ? body.cpusPerReplica : 1
    put("memoryMiBPerReplica", typeof mib === "number" ? Math.ceil(mib * cpus) : mib, memPerCpu[1])
  }
  if (revision) {
    const args = Array.isArray(body.args) ? body.args : []
    body.args = [...args, "--revision", revision[0]]
    origins.set(["args", args.length + 1], revision[1])
  }
  if ("backend" in raw) mapBackend(raw.backend, body, origins, issues, checks, put)
  if ("gpus_per_replica" in raw && body.backendType === "lepton") tensorParallel(body, origins)
  if (Object.keys(sizing).length) applySizing(sizing, body, origins, issues)
  return { body, origins, issues, checks }
}

/** `backend: { type, id?, ... }` → `backendId` and `serving.<type>`, by the rules of that type. */
function mapBackend(
  backend: unknown,
  body: Record<string, unknown>,
  origins: Origins,
  issues: Issue[],
  checks: BackendCheck[],
  put: (field: string, value: unknown, source: Path) => void,
): void {
  if (!isRecord(backend)) {
    issues.push({ path: ["backend"], message: "must be an object such as { type: slurm, partition: gpu }" })
    return
  }
  const { type, id, backend_id, backendId, ...rest } = backend
  const ids = Object.entries({ id, backend_id, backendId }).filter(([, v]) => v !== undefined)
  for (const [key, value] of ids) put("backendId", value, ["backend", key])
  if (type === undefined) {
    if (Object.keys(rest).length)
      issues.push({
        path: ["backend", "type"],
        message: `is required: send one of ${ServingTypes.map((t) => `"${t}"`).join(", ")}, to say which backend these options are for`,
      })
    return
  }
  if (typeof type !== "string" || !(ServingTypes as readonly string[]).includes(type)) {
    issues.push({
      path: ["backend", "type"],
      message: `must be one of ${ServingTypes.map((t) => `"${t}"`).join(", ")}`,
    })
    return
  }
  const kind = type as ServingType
  // The file says where it must run: the API never places it on a backend of another type.
  put("backendType", kind, ["backend", "type"])
  const serving = isRecord(body.serving) ? body.serving : {}
  const options: Record<string, unknown> = isRecord(serving[kind]) ? { ...serving[kind] } : {}
  const apply = (rules: Record<string, Rule> | undefined, fields: Record<string, unknown>, at: Path) => {
    // Nested sections last, so that their env wins over the section around them as in domyn-swarm
    // (`backend.endpoint.env` over `backend.env`) whichever is written first.
    const nested = (key: string) => Number(rules?.[key] !== undefined && "nested" in rules[key])
    const entries = Object.entries(fields).sort(([a], [b]) => nested(a) - nested(b))
    for (const [key, value] of entries) {
      const source = [...at, key]
      const rule = rules ? rules[key] : { serving: camelKey(key) }
      if (!rule) {
        issues.push({
          path: at,
          key,
          message: `unknown field "${key}" for a ${kind} backend: remove it (docs/cli.md lists the domyn-swarm fields swarmplane reads)`,
        })
      } else if ("serving" in rule) {
        if (rule.serving in options) {
          issues.push({ path: at, key, message: `serving.${kind}.${rule.serving} is set twice: keep one` })
          continue
        }
        options[rule.serving] = camelize(value, ["serving", kind, rule.serving], source, origins, issues)
      } else if ("nested" in rule) {
        if (isRecord(value)) apply(rule.nested, value, source)
        else issues.push({ path: source, message: "must be an object" })
      } else if ("top" in rule) mergeTop(rule.top, value, source, body, origins, issues)
      else if ("matches" in rule) {
        if (asksNothing(value)) continue
        const problem = shapeProblem(rule.matches, value)
        if (problem) issues.push({ path: source, message: problem })
        else checks.push({ path: source, field: rule.matches, value })
      } else if ("refused" in rule) {
        if (!(rule.accepts === "empty" && asksNothing(value)))
          issues.push({ path: source, message: rule.refused })
      } else if ("backend" in rule)
        issues.push({
          path: source,
          message: `swarmplane keeps this on the registered ${kind} backend, not on the swarm: set ${rule.backend} in its config (swarmplane backend add -f backend.yaml) and remove it here`,
        })
      else issues.push({ path: source, message: `ignored: ${rule.ignored}`, warning: true })
    }
  }
  apply(BackendRules[kind], rest, ["backend"])
  if (Object.keys(options).length) {
    if (!isRecord(serving[kind])) origins.set(["serving", kind], ["backend"])
    body.serving = { ...serving, [kind]: options }
  }
}

/**
 * domyn-swarm's Lepton backend starts vLLM with `--tensor-parallel-size` = `gpus_per_replica` before
 * the file's `args`; swarmplane's runs the args as given (the resource shape decides the GPUs), so a
 * domyn file gets the flag in `args`, unless it sets one, runs its own command or the echo server.
 */
function tensorParallel(body: Record<string, unknown>, origins: Origins): void {
  const gpus = body.gpusPerReplica
  const args = Array.isArray(body.args) ? body.args : []
  if (typeof gpus !== "number" || !Number.isInteger(gpus) || gpus < 1) return
  if (body.command !== undefined || body.model === "echo") return
  if (args.some((a) => typeof a === "string" && /^--tensor-parallel-size(=|$)|^-tp$/.test(a))) return
  body.args = ["--tensor-parallel-size", String(gpus), ...args]
  // Each argument keeps pointing at what the user wrote: the flag at gpus_per_replica, theirs shifted by 2.
  const shifted = args.map((_, i) => origins.source(["args", i]))
  origins.set(["args", 0], ["gpus_per_replica"])
  origins.set(["args", 1], ["gpus_per_replica"])
  for (const [i, source] of shifted.entries()) origins.set(["args", i + 2], source)
}

/** `image` (only when the swarm names none) and `env` (merged, later wins) from backend sections. */
function mergeTop(
  field: "image" | "env",
  value: unknown,
  source: Path,
  body: Record<string, unknown>,
  origins: Origins,
  issues: Issue[],
): void {
  if (field === "image") {
    if (body.image === undefined) {
      body.image = value
      origins.set(["image"], source)
    }
    return
  }
  if (!isRecord(value)) {
    issues.push({ path: source, message: "must be a map of NAME: value" })
    return
  }
  const env = isRecord(body.env) ? { ...body.env } : {}
  for (const [name, item] of Object.entries(value)) {
    env[name] = item
    origins.set(["env", name], [...source, name])
  }
  body.env = env
}

/**
 * A memory size in MiB: a number is MiB already; a string takes Slurm's units (`16G`, `512M`, `1T`,
 * also `16GB`, `16GiB`), all binary.
 */
export function sizeMiB(value: unknown, source: Path, issues: Issue[]): unknown {
  if (typeof value === "number") return value
  const match = typeof value === "string" ? /^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*$/i.exec(value) : null
  if (!match) {
    issues.push({ path: source, message: "must be a size such as 16G, 512M or a number of MiB" })
    return value
  }
  const factor = { "": 1, K: 1 / 1024, M: 1, G: 1024, T: 1024 * 1024 }[(match[2] ?? "").toUpperCase()] ?? 1
  return Math.ceil(Number(match[1]) * factor)
}

/** Split a command-line string into argv like a POSIX shell would (quotes and backslashes), no expansion. */
export function splitArgs(text: string): string[] {
  const args: string[] = []
  let current = ""
  let started = false
  let quote: '"' | "'" | undefined
  for (let i = 0; i < text.length; i++) {
    const c = text[i] as string
    if (quote) {
      if (c === quote) quote = undefined
      else if (c === "\\" && quote === '"' && /["\\$`]/.test(text[i + 1] ?? "")) current += text[++i]
      else current += c
    } else if (c === "'" || c === '"') {
      quote = c
      started = true
    } else if (c === "\\" && i + 1 < text.length) {
      current += text[++i]
      started = true
    } else if (/\s/.test(c)) {
      if (started) args.push(current)
      current = ""
      started = false
    } else {
      current += c
      started = true
    }
  }
  if (started) args.push(current)
  return args
}

/**
 * domyn's sizing fields, checked together, and the placement they mean on a Slurm backend:
 * `serving.slurm.nodesPerReplica` for a replica larger than a node, `replicasPerNode` for replicas
 * that share one. Other backend types place replicas by their own shapes: the fields are checked, then
 * ignored with a warning.
 */
function applySizing(
  sizing: Partial<Record<(typeof SizingFields)[number], unknown>>,
  body: Record<string, unknown>,
  origins: Origins,
  issues: Issue[],
): void {
  const whole = (field: string, value: unknown, fallback: number | undefined): number | undefined => {
    if (value === undefined) return fallback
    if (typeof value === "number" && Number.isInteger(value) && value >= 0) return value
    issues.push({ path: [field], message: "must be a whole number" })
    return undefined
  }
  const before = issues.length
  const gpusPerNode = whole("gpus_per_node", sizing.gpus_per_node, 4)
  const replicasPerNode = whole("replicas_per_node", sizing.replicas_per_node, undefined)
  const nodes = whole("nodes", sizing.nodes, undefined)
  const replicas = typeof body.replicas === "number" ? body.replicas : 1
  const gpusPerReplica = typeof body.gpusPerReplica === "number" ? body.gpusPerReplica : 0
  if (issues.length > before || gpusPerNode === undefined) return
  const placement = placementOf(
    {
      replicas,
      gpusPerReplica,
      gpusPerNode,
      ...(replicasPerNode !== undefined ? { replicasPerNode } : {}),
      ...(nodes !== undefined ? { nodes } : {}),
    },
    issues,
  )
  if (!placement) return
  const type = body.backendType
  if (type !== undefined && type !== "slurm") {
    for (const field of SizingFields)
      if (sizing[field] !== undefined)
        issues.push({
          path: [field],
          message: `checked, then ignored: a ${String(type)} backend places replicas by its own resource shapes`,
          warning: true,
        })
    return
  }
  const serving = isRecord(body.serving) ? body.serving : {}
  const slurm: Record<string, unknown> = isRecord(serving.slurm) ? { ...serving.slurm } : {}
  if (placement.nodesPerReplica > 1) {
    slurm.nodesPerReplica = placement.nodesPerReplica
    origins.set(["serving", "slurm", "nodesPerReplica"], ["gpus_per_node"])
  }
  if (placement.replicasPerNode !== undefined && sizing.replicas_per_node !== undefined) {
    slurm.replicasPerNode = placement.replicasPerNode
    origins.set(["serving", "slurm", "replicasPerNode"], ["replicas_per_node"])
  }
  if (Object.keys(slurm).length) body.serving = { ...serving, slurm }
}
