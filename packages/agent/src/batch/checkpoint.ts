/**
 * The durable state of a shard: parts of finished rows under `shard-<ID>/` of the output store, each
 * written whole (an `OutputStore` write: tmp + fsync + rename locally, one PutObject on S3) so a part
 * that exists is complete. Parts of every attempt stay side by side (`part-<runId>-<seq>.jsonl`);
 * reading them all tells which rows are done, and merging them gives `shard-<ID>.jsonl`.
 *
 * Which write wins for an id seen more than once: the one finished last (`finishedAt`, then the later
 * part in name order and the later line), except that a response is never replaced by an error (an
 * error row is only ever retried, so an error after a response can only come from a stray concurrent
 * attempt, and it must not erase a result).
 */
import { randomBytes } from "node:crypto"
import { fileSafe } from "@swarmplane/core/contract/worker"
import type { RowError } from "./client"
import type { OutputStore } from "./output-port"

/** One line of a part and of the merged output. */
export interface ResultRow {
  id: string
  /** The body sent (null when the row had nothing to send). */
  request: unknown
  /** The endpoint's answer, null on error. */
  response: unknown
  /** `response.usage`, when the endpoint reported it. */
  usage: unknown
  /** Why the row failed for good, null when it has a response. */
  error: RowError | null
  finishedAt: string
}

/** What the parts say about one id: the winning line, and whether it has a response. */
export interface Winner {
  ok: boolean
  finishedAt: string
  /** The winning line's text (kept only when reading for a merge). */
  line?: string
}

const PartName = /^part-(.+)-(\d+)\.jsonl$/

/** Reads of parts in flight at once (on S3, a GetObject each). */
const ReadAhead = 8

/** The shard's folder in the output store. */
export const shardDir = (shardId: number) => `shard-${shardId}`
/** The shard's merged results in the output store. */
export const mergedName = (shardId: number) => `shard-${shardId}.jsonl`

/** `part-<runId>-<seq>.jsonl`, with the sequence zero-padded so names sort in write order. */
export function partName(runId: string, seq: number): string {
  return `part-${runId}-${String(seq).padStart(6, "0")}.jsonl`
}

/** A run id safe in a file name: the attempt uid with anything but [A-Za-z0-9._-] replaced by `_`. */
export function runIdOf(attemptUid: string | undefined): string {
  const clean = attemptUid === undefined ? undefined : fileSafe(attemptUid)
  return clean || `local${randomBytes(6).toString("hex")}`
}

/** Does `candidate` (read after `current`) replace it? See the module header. */
export function wins(candidate: Winner, current: Winner | undefined): boolean {
  if (!current) return true
  if (candidate.ok !== current.ok) return candidate.ok
  return candidate.finishedAt >= current.finishedAt
}

/** The parts in a shard folder, in name order (none when it does not exist yet). */
export async function listParts(store: OutputStore, dir: string): Promise<string[]> {
  return (await store.list(dir)).filter((n) => PartName.test(n))
}

/** The next sequence number for `runId`: after its highest part, so a rerun never overwrites one. */
export function nextSeq(parts: readonly string[], runId: string): number {
  let max = 0
  for (const name of parts) {
    const m = PartName.exec(name)
    if (m?.[1] === runId) max = Math.max(max, Number(m[2]))
  }
  return max + 1
}

/**
 * Read every part of a shard: the winner per id. Lines that do not parse are counted, not fatal
 * (parts are written whole, so there should be none).
 */
export async function readParts(
  store: OutputStore,
  dir: string,
  { keepLines = false, skip }: { keepLines?: boolean; skip?: ReadonlySet<string> } = {},
): Promise<{ winners: Map<string, Winner>; parts: string[]; unreadable: number }> {
  // Parts set aside by an `--overwrite` (see fingerprint.ts) are never read.
  const parts = (await listParts(store, dir)).filter((name) => !skip?.has(name))
  const winners = new Map<string, Winner>()
  let unreadable = 0
  // Read a few parts ahead (S3 round trips), but apply them in name order: ties go to the later part.
  const texts: Promise<string | undefined>[] = []
  for (let i = 0; i < parts.length; i++) {
    while (texts.length < Math.min(parts.length, i + ReadAhead)) {
      const text = store.read(`${dir}/${parts[texts.length]}`)
      text.catch(() => {}) // awaited in turn below; a failure ahead must not go unhandled meanwhile
      texts.push(text)
    }
    const text = await texts[i]
    for (const line of text?.split(/\r?\n/) ?? []) {
      if (!line.trim()) continue
      const row = parseResult(line)
      if (!row) {
        unreadable++
        continue
      }
      const candidate: Winner = { ok: row.error === null, finishedAt: row.finishedAt }
      if (keepLines) candidate.line = line
      if (wins(candidate, winners.get(row.id))) winners.set(row.id, candidate)
    }
  }
  return { winners, parts, unreadable }
}

function parseResult(line: string): Pick<ResultRow, "id" | "error" | "finishedAt"> | undefined {
  try {
    const v: unknown = JSON.parse(line)
    if (typeof v !== "object" || v === null) return undefined
    const { id, error, finishedAt } = v as Record<string, unknown>
    if (typeof id !== "string" || typeof finishedAt !== "string") return undefined
    return { id, error: error === null || error === undefined ? null : (error as RowError), finishedAt }
  } catch {
    return undefined
  }
}

/** Writes this run's parts, numbered on from what is already there. */
export class PartWriter {
  private seq: number

  constructor(
    readonly store: OutputStore,
    readonly dir: string,
    readonly runId: string,
    firstSeq: number,
  ) {
    this.seq = firstSeq
  }

  /** Write `rows` as the next part; returns its name (in the shard folder). */
  async write(rows: readonly ResultRow[]): Promise<string> {
    const name = partName(this.runId, this.seq++)
    await this.store.write(`${this.dir}/${name}`, rows.map((r) => `${JSON.stringify(r)}\n`).join(""))
    return name
  }
}

/**
 * Merge every part of the shard into `shard-<ID>.jsonl`: one line per id of `order` (the shard's
 * ids in input order) that has a result, the winner of each. Ids in parts but not in `order` (an
 * input that changed between attempts) are left out and counted. Returns the merged output's name
 * in the store and where it is (a path or an `s3://` URL).
 */
export async function mergeParts(
  store: OutputStore,
  shardId: number,
  order: readonly string[],
  skip?: ReadonlySet<string>,
): Promise<{
  name: string
  where: string
  rows: number
  done: number
  failed: number
  missing: number
  stale: number
}> {
  const { winners } = await readParts(store, shardDir(shardId), {
    keepLines: true,
    ...(skip ? { skip } : {}),
  })
  const lines: string[] = []
  let done = 0
  let failed = 0
  for (const id of order) {
    const w = winners.get(id)
    if (!w?.line) continue
    lines.push(`${w.line}\n`)
    if (w.ok) done++
    else failed++
    winners.delete(id)
  }
  const name = mergedName(shardId)
  await store.write(name, lines.join(""))
  const missing = order.length - lines.length
  return { name, where: store.where(name), rows: lines.length, done, failed, missing, stale: winners.size }
}
