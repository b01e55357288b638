/**
 * Field names in files: snake_case becomes camelCase (`gpus_per_replica` → `gpusPerReplica`,
 * `memory_mib` → `memoryMiB`), except inside maps whose keys are data (`env`, `labels`, attributes).
 * `Origins` remembers where each normalised field came from, so an error about `gpusPerReplica` is
 * reported at the `gpus_per_replica` the user wrote, with its line and column.
 */
import { isRecord } from "./http"

export type Path = (string | number)[]

/** A problem in a file, at the path the user wrote (and, with `key`, at that key of the object). */
export interface Issue {
  path: Path
  message: string
  /** Point at this key of the object at `path` (an unknown or misplaced field). */
  key?: string
  warning?: boolean
}

/** Fields whose keys are data, kept as written. */
export const MapFields = new Set(["env", "labels", "attributes", "nodeSelector", "envSecrets"])

export function camelKey(key: string): string {
  return key.replace(/_+([A-Za-z0-9])/g, (_, c: string) => c.toUpperCase()).replace(/Mib(?=[A-Z]|$)/g, "MiB")
}

const keyOf = (path: Path) => JSON.stringify(path)

/** Where each part of a normalised object came from in the file. */
export class Origins {
  private readonly map = new Map<string, Path>()

  set(out: Path, source: Path): void {
    this.map.set(keyOf(out), source)
  }

  /** The source path of `out`: its own, or its nearest recorded ancestor's plus the rest. */
  source(out: Path): Path {
    for (let i = out.length; i >= 0; i--) {
      const source = this.map.get(keyOf(out.slice(0, i)))
      if (source) return [...source, ...out.slice(i)]
    }
    return out
  }

  /** The name the user wrote for the field `name` of the object at `out`. */
  sourceKey(out: Path, name: string): string {
    const source = this.map.get(keyOf([...out, name]))
    const last = source?.at(-1)
    return typeof last === "string" ? last : name
  }
}

/**
 * Copy `value` with camelCase keys, recording origins. Two spellings of one field (`max_retries` and
 * `maxRetries`) are an issue, not a silent pick.
 */
export function camelize(
  value: unknown,
  out: Path,
  source: Path,
  origins: Origins,
  issues: Issue[],
): unknown {
  origins.set(out, source)
  if (Array.isArray(value))
    return value.map((item, i) => camelize(item, [...out, i], [...source, i], origins, issues))
  if (!isRecord(value)) return value
  const result: Record<string, unknown> = {}
  const seen = new Map<string, string>()
  for (const [key, item] of Object.entries(value)) {
    const name = camelKey(key)
    const first = seen.get(name)
    if (first !== undefined) {
      issues.push({ path: source, key, message: sameField(first, key) })
      continue
    }
    seen.set(name, key)
    result[name] = camelizeField(name, item, [...out, name], [...source, key], origins, issues)
  }
  return result
}

/** One field's value: camelised, unless the field is a map whose keys are data. */
export function camelizeField(
  name: string,
  value: unknown,
  out: Path,
  source: Path,
  origins: Origins,
  issues: Issue[],
): unknown {
  if (!MapFields.has(name)) return camelize(value, out, source, origins, issues)
  origins.set(out, source)
  return value
}

export function sameField(first: string, second: string): string {
  return `"${first}" and "${second}" are the same field: keep one`
}
