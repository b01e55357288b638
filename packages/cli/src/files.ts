/**
 * Spec files (YAML or JSON) for swarms, jobs and backends: read, parse with positions, tell the kind
 * apart, normalise field names (snake_case, domyn-swarm's swarm format) and validate offline with the
 * same zod schemas and the same wording as the API (`SwarmRequest`, `JobRequest`, `CreateBackendRequest`
 * and `friendlyMessage`, from the wire contract). Every error carries the path the user wrote and its
 * line:column.
 */
import { readFile } from "node:fs/promises"
import type { z } from "@hono/zod-openapi"
import {
  BackendTypes,
  CreateBackendRequest,
  friendlyMessage,
  JobRequest,
  SwarmRequest,
} from "@swarmplane/core/contract"
import { isMap, isScalar, isSeq, LineCounter, type Node, parseDocument } from "yaml"
import type { BackendCheck } from "./backend-fields"
import { CliError, ExitCode } from "./errors"
import { isRecord } from "./http"
import { camelize, type Issue, Origins, type Path } from "./normalize"
import { normaliseSwarm } from "./swarm-file"

export const Kinds = ["swarm", "job", "backend"] as const
export type Kind = (typeof Kinds)[number]

export interface Located extends Issue {
  line?: number
  col?: number
}

export interface SpecFile {
  file: string
  /** Undefined when the file could not be read as one object. */
  kind?: Kind
  /** The body to send: normalised field names, defaults left to the API. */
  body: Record<string, unknown>
  /** Swarm name, job name or backend id, as written. */
  name?: string
  errors: Located[]
  warnings: Located[]
  /** Where each field of `body` was written in the file. */
  origins: Origins
  /** Values a domyn-swarm file gives for fields of the registered backend: `up` checks them against it. */
  backendChecks: (BackendCheck & { line?: number; col?: number })[]
}

const schemas: Record<Kind, z.ZodType> = {
  swarm: SwarmRequest,
  job: JobRequest,
  backend: CreateBackendRequest,
}

/** The text of `file`; `-` reads stdin. */
export async function readSpecText(file: string, readStdin: () => Promise<string>): Promise<string> {
  if (file === "-") return readStdin()
  try {
    return await readFile(file, "utf8")
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === "ENOENT")
      throw new CliError(`file ${file} does not exist`, ExitCode.usage, "check the path given to -f")
    throw new CliError(`cannot read ${file}: ${(error as Error).message}`, ExitCode.usage)
  }
}

/** Parse, normalise and validate a spec file. Never throws for bad content: see `errors`. */
export function parseSpec(text: string, file: string, kind?: Kind): SpecFile {
  const lines = new LineCounter()
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false, uniqueKeys: true })
  const at = (offset: number | undefined) => (offset === undefined ? {} : lines.linePos(offset))
  const result: SpecFile = {
    file,
    body: {},
    errors: [],
    warnings: [],
    origins: new Origins(),
    backendChecks: [],
  }
  if (doc.errors.length) {
    result.errors = doc.errors.map((e) => ({
      path: [],
      message: `not valid YAML: ${e.message.split("\n")[0] ?? e.message}`,
      ...at(e.pos[0]),
    }))
    return result
  }
  const raw: unknown = doc.toJS()
  if (!isRecord(raw)) {
    result.errors = [{ path: [], message: "must hold one object (a map of fields)", line: 1, col: 1 }]
    return result
  }
  const { kind: declared, ...fields } = raw
  const named = typeof declared === "string" ? Kinds.find((k) => k === declared.toLowerCase()) : undefined
  if (declared !== undefined && !named)
    result.errors = [{ path: ["kind"], message: `must be one of ${Kinds.map((k) => `"${k}"`).join(", ")}` }]
  result.kind = kind ?? named ?? detectKind(fields)
  if (!result.kind) {
    result.errors.push({
      path: [],
      message:
        "cannot tell whether this is a swarm (has model), job (has command) or backend (has type or config) file: pass --kind swarm|job|backend",
    })
  } else {
    const { body, origins, issues, checks } = normalise(result.kind, fields)
    result.body = body
    result.origins = origins
    const name = result.kind === "backend" ? body.id : body.name
    if (typeof name === "string") result.name = name
    const all = [...issues, ...validateBody(result.kind, body, origins)]
    result.errors.push(...all.filter((i) => !i.warning))
    result.warnings = all.filter((i) => i.warning)
    result.backendChecks = checks
  }
  const place = (issue: Located): Located => ({
    ...issue,
    ...(issue.line ? {} : positionOf(doc.contents, issue, at)),
  })
  const byPosition = (a: Located, b: Located) => (a.line ?? 0) - (b.line ?? 0) || (a.col ?? 0) - (b.col ?? 0)
  result.errors = result.errors.map(place).sort(byPosition)
  result.warnings = result.warnings.map(place).sort(byPosition)
  result.backendChecks = result.backendChecks.map((check) => ({
    ...check,
    ...positionOf(
      doc.contents,
      { path: check.path.slice(0, -1), key: String(check.path.at(-1)), message: "" },
      at,
    ),
  }))
  return result
}

/** The kind a file's fields suggest. */
export function detectKind(fields: Record<string, unknown>): Kind | undefined {
  if ("model" in fields) return "swarm"
  if ("command" in fields || "batch" in fields) return "job"
  if ("config" in fields) return "backend"
  if (typeof fields.type === "string" && (BackendTypes as readonly string[]).includes(fields.type))
    return "backend"
  return undefined
}

function normalise(
  kind: Kind,
  fields: Record<string, unknown>,
): { body: Record<string, unknown>; origins: Origins; issues: Issue[]; checks: BackendCheck[] } {
  if (kind === "swarm") return normaliseSwarm(fields)
  const origins = new Origins()
  const issues: Issue[] = []
  if (kind === "backend" && !("config" in fields)) {
    // `id` plus the config's fields at the top level.
    const { id, ...config } = fields
    origins.set(["id"], ["id"])
    const body = {
      ...(id === undefined ? {} : { id }),
      config: camelize(config, ["config"], [], origins, issues),
    }
    return { body, origins, issues, checks: [] }
  }
  const body = camelize(fields, [], [], origins, issues) as Record<string, unknown>
  return { body, origins, issues, checks: [] }
}

/** Schema issues at the paths the user wrote, in the API's words; one per unknown field. */
export function validateBody(kind: Kind, body: unknown, origins = new Origins()): Issue[] {
  const parsed = schemas[kind].safeParse(body)
  if (parsed.success) return []
  return parsed.error.issues.flatMap((issue): Issue[] => {
    const path = origins.source(issue.path as Path)
    if (issue.code === "unrecognized_keys")
      return issue.keys.map((name) => {
        const key = origins.sourceKey(issue.path as Path, name)
        return { path, key, message: friendlyMessage({ ...issue, keys: [key] }) }
      })
    return [{ path, message: friendlyMessage(issue) }]
  })
}

/** Line and column of the node at `issue.path` (or its key `issue.key`), else its nearest ancestor. */
function positionOf(
  root: Node | null,
  issue: Issue,
  at: (offset: number | undefined) => { line?: number; col?: number },
): { line?: number; col?: number } {
  let node: unknown = root
  let best: Node | null = root
  const find = (map: unknown, key: string | number) =>
    isMap(map)
      ? map.items.find((pair) => isScalar(pair.key) && String(pair.key.value) === String(key))
      : undefined
  for (const segment of issue.path) {
    if (isMap(node)) {
      const pair = find(node, segment)
      if (!pair) break
      node = pair.value
      best =
        (isScalar(pair.value) || isMap(pair.value) || isSeq(pair.value) ? pair.value : (pair.key as Node)) ??
        best
    } else if (isSeq(node) && typeof segment === "number" && node.items[segment]) {
      node = node.items[segment]
      best = node as Node
    } else break
  }
  if (issue.key !== undefined) {
    const pair = find(node, issue.key)
    if (pair && isScalar(pair.key)) return at(pair.key.range?.[0])
  }
  return at(best?.range?.[0] ?? 0)
}

/** `file:line:col: path: message` (the path as the API prints it: dotted, indices as numbers). */
export function formatIssue(file: string, issue: Located): string {
  const where = issue.line ? `${file}:${issue.line}:${issue.col ?? 1}` : file
  const path = issue.path.join(".")
  return `${where}: ${issue.warning ? "warning: " : ""}${path ? `${path}: ` : ""}${issue.message}`
}
