/**
 * What a shard's results answer: the input (where it is and its rows' content) and the request made
 * of each row (API, model, token limit, columns). Recorded as `shard-<ID>/fingerprint.json` next to
 * the parts, so a later run into the same output resumes only work of the same question: a changed
 * prompt, another input or another model is never answered from an old part. A run whose fingerprint
 * differs refuses, unless told to start the shard over (`--overwrite`): then the parts there are
 * set aside by name (listed as `superseded`) and never read again, while the new run's own retries
 * still resume from the parts they write.
 */
import { createHash } from "node:crypto"
import type { OutputStore } from "./output-port"
import type { BatchRow } from "./rows"

export interface FingerprintInput {
  input: string
  idColumn: string
  promptColumn: string
  api: string
  model?: string
  maxTokens?: number
}

export interface Fingerprint {
  fingerprint: string
  /** What went into it, for the message that says what changed. */
  input: string
  rows: number
  rowsHash: string
  request: {
    api: string
    model: string | null
    maxTokens: number | null
    idColumn: string
    promptColumn: string
  }
  /** Parts of earlier fingerprints in this folder: never read. */
  superseded: string[]
}

export const fingerprintName = (shardDir: string) => `${shardDir}/fingerprint.json`

/** The fingerprint of a shard's rows (in order) and the request made of them. */
export function fingerprintOf(
  config: FingerprintInput,
  rows: readonly BatchRow[],
): Omit<Fingerprint, "superseded"> {
  const rowsHash = createHash("sha256")
  for (const row of rows) rowsHash.update(`${JSON.stringify(row)}\n`)
  const request = {
    api: config.api,
    model: config.model ?? null,
    maxTokens: config.maxTokens ?? null,
    idColumn: config.idColumn,
    promptColumn: config.promptColumn,
  }
  const rowsDigest = rowsHash.digest("hex")
  const fingerprint = createHash("sha256")
    .update(JSON.stringify({ input: config.input, rowsHash: rowsDigest, request }))
    .digest("hex")
    .slice(0, 16)
  return { fingerprint, input: config.input, rows: rows.length, rowsHash: rowsDigest, request }
}

export async function readFingerprint(
  store: OutputStore,
  shardDir: string,
): Promise<Fingerprint | undefined> {
  const text = await store.read(fingerprintName(shardDir))
  if (!text) return undefined
  try {
    const doc = JSON.parse(text) as Fingerprint
    return typeof doc.fingerprint === "string" ? { ...doc, superseded: doc.superseded ?? [] } : undefined
  } catch {
    return undefined
  }
}

export async function writeFingerprint(store: OutputStore, shardDir: string, fp: Fingerprint): Promise<void> {
  await store.write(fingerprintName(shardDir), `${JSON.stringify(fp, null, 2)}\n`)
}

/** In words, what differs between the fingerprint found and this run's. */
export function differences(
  found: Omit<Fingerprint, "superseded">,
  now: Omit<Fingerprint, "superseded">,
): string {
  const out: string[] = []
  if (found.input !== now.input) out.push(`input ${found.input} → ${now.input}`)
  if (found.rowsHash !== now.rowsHash)
    out.push(found.rows !== now.rows ? `rows ${found.rows} → ${now.rows}` : "the rows' content changed")
  for (const key of Object.keys(now.request) as (keyof Fingerprint["request"])[])
    if (found.request?.[key] !== now.request[key])
      out.push(`${key} ${JSON.stringify(found.request?.[key])} → ${JSON.stringify(now.request[key])}`)
  return out.join(", ") || "the fingerprint changed"
}
