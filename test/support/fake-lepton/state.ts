/**
 * The fake Lepton's in-memory workspace: what deployments and jobs share (the capacity of the fake's
 * "node group", the clock, the user secrets, the process runner) and the small helpers of the wire
 * contract (errors as `{code, message}`, JSON merge patch, ids, metadata).
 */
import { randomBytes } from "node:crypto"
import type { LocalProcess, ProcessRunner } from "../local-processes"

/** A Lepton error: the status and the `{code, message}` body the API answers with. */
export class LeptonError extends Error {
  constructor(
    readonly status: 400 | 401 | 403 | 404 | 409 | 429 | 500 | 503,
    readonly code: string,
    message: string,
  ) {
    super(message)
  }
}

export const invalid = (message: string) => new LeptonError(400, "InvalidRequest", message)
export const notFound = (what: string) => new LeptonError(404, "NotFound", `${what} not found`)

/** A replica's log as far as it goes, and its process while it still runs (the log then stays open). */
export interface ReplicaLog {
  text: string
  live?: LocalProcess
}

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json }
export type JsonObject = { [key: string]: Json }

export const isObject = (v: unknown): v is JsonObject =>
  typeof v === "object" && v !== null && !Array.isArray(v)

/** RFC 7396: objects merge key by key, `null` removes a key, anything else replaces. */
export function mergePatch(target: Json | undefined, patch: Json): Json {
  if (!isObject(patch)) return patch
  const result: JsonObject = isObject(target) ? { ...target } : {}
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key]
    else result[key] = mergePatch(result[key], value)
  }
  return result
}

/** A short random suffix, as Lepton appends to job and replica ids. */
export const suffix = (chars = 5) => randomBytes(8).toString("hex").slice(0, chars)

/** Lepton's `Metadata`; times are epoch milliseconds. */
export function metadata(id: string, name: string, nowMs: number): JsonObject {
  return {
    id,
    name,
    created_at: nowMs,
    last_modified_at: nowMs,
    version: 1,
    created_by: "fake@lepton.local",
    last_modified_by: "fake@lepton.local",
    owner: "fake@lepton.local",
    visibility: "private",
  }
}

/**
 * What deployments and jobs share. `capacity` counts processes (a replica or a job worker each uses
 * one slot), standing in for the GPUs of a node group; `pump` is called whenever a slot may have freed.
 */
export class Workspace {
  capacity = Number.POSITIVE_INFINITY
  private readonly holders = new Set<object>()
  private readonly waiters: (() => void)[] = []

  constructor(
    readonly id: string,
    readonly runner: ProcessRunner,
    readonly now: () => number,
    readonly secrets: Map<string, string>,
    /** The base URL of the fake's HTTP server (for endpoints), set once it listens. */
    public origin = "",
  ) {}

  /** The environment every process starts from: enough to find programs, nothing of the test's own. */
  baseEnv(): Record<string, string> {
    const env: Record<string, string> = {}
    for (const key of ["PATH", "HOME", "TMPDIR", "LANG"]) {
      const value = process.env[key]
      if (value !== undefined) env[key] = value
    }
    return env
  }

  /** A spec's `envs`: plain values, and `value_from.secret_name_ref` resolved from the user secrets. */
  resolveEnvs(envs: Json | undefined): Record<string, string> {
    const out: Record<string, string> = {}
    for (const e of Array.isArray(envs) ? envs : []) {
      if (!isObject(e) || typeof e.name !== "string") throw invalid("envs: each entry needs a name")
      const ref = isObject(e.value_from) ? e.value_from.secret_name_ref : undefined
      if (typeof ref === "string") {
        const secret = this.secrets.get(ref)
        if (secret === undefined) throw invalid(`envs: ${e.name}: secret ${ref} not found`)
        out[e.name] = secret
      } else out[e.name] = typeof e.value === "string" ? e.value : String(e.value ?? "")
    }
    return out
  }

  /** Take a slot for `holder` if one is free (taking one already held is a no-op that succeeds). */
  take(holder: object): boolean {
    if (this.holders.has(holder)) return true
    if (this.holders.size >= this.capacity) return false
    this.holders.add(holder)
    return true
  }

  release(holder: object): void {
    if (this.holders.delete(holder)) this.pump()
  }

  used(): number {
    return this.holders.size
  }

  free(): number {
    return this.capacity - this.holders.size
  }

  /** Register a callback that tries again to place waiting work when capacity frees or grows. */
  onCapacity(waiter: () => void): void {
    this.waiters.push(waiter)
  }

  pump(): void {
    for (const w of this.waiters) w()
  }
}
