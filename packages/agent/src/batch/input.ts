/**
 * Input readers: JSONL (one JSON object a line), CSV (a header row, via csv-parse) and Parquet (via
 * hyparquet, one row group at a time), from a local path or an `s3://bucket/key` URL. A source can be
 * read more than once (range sharding counts the rows first); S3 JSONL and CSV are streamed on every
 * read, S3 Parquet is downloaded once to a temporary file that `close()` removes.
 */
import { createReadStream } from "node:fs"
import { mkdtemp, rm, stat } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createInterface } from "node:readline"
import type { Readable } from "node:stream"
import { UsageError } from "../cli"
import { parseS3Url, s3Download, s3Stream } from "./s3"

export const InputFormat = ["jsonl", "csv", "parquet"] as const
export type InputFormat = (typeof InputFormat)[number]

export type InputRecord = Record<string, unknown>

export interface RowSource {
  /** The input as given (path or URL), for messages. */
  readonly name: string
  /** Every row in file order. */
  rows(): AsyncGenerator<InputRecord>
  /** The number of rows (Parquet: from the footer; otherwise one pass). */
  count(): Promise<number>
  /** Remove what opening the source made (a downloaded copy). Idempotent. */
  close(): Promise<void>
}

/** The format named by the file's extension (ignoring `?query`); undefined when it names none. */
export function formatOf(location: string): InputFormat | undefined {
  const path = location.split("?")[0]?.toLowerCase() ?? ""
  if (path.endsWith(".parquet")) return "parquet"
  if (path.endsWith(".csv")) return "csv"
  if (/\.(jsonl|ndjson|json)$/.test(path)) return "jsonl"
  return undefined
}

export interface SourceOptions {
  /** Where S3 settings and credentials are read (default: `process.env`). */
  env?: NodeJS.ProcessEnv
  /** Where an S3 Parquet object is downloaded to (default: the OS temporary folder). */
  tmpDir?: string
}

/**
 * Open an input. `columns` are the columns the runner needs (Parquet reads only those that exist).
 * A missing file or object is a `UsageError`.
 */
export async function openSource(
  location: string,
  format: InputFormat,
  columns: readonly string[],
  { env = process.env, tmpDir = tmpdir() }: SourceOptions = {},
): Promise<RowSource> {
  const s3 = parseS3Url(location)
  if (location.startsWith("s3://") && !s3)
    throw new UsageError(`--input: "${location}" is not an s3://bucket/key URL`)
  let open: () => Promise<Readable>
  let file = location
  let cleanup = async () => {}
  if (s3 && format === "parquet") {
    const dir = await mkdtemp(join(tmpDir, "swarmplane-batch-"))
    cleanup = () => rm(dir, { recursive: true, force: true })
    file = join(dir, "input.parquet")
    await s3Download(s3, file, env).catch(async (error: unknown) => {
      await cleanup()
      throw error
    })
  } else if (!s3) {
    const info = await stat(location).catch(() => undefined)
    if (!info?.isFile()) throw new UsageError(`--input: ${location} is not a readable file`)
  }
  if (s3 && format !== "parquet") open = () => s3Stream(s3, env)
  else open = async () => createReadStream(file)

  const rows =
    format === "jsonl"
      ? () => jsonlRows(open, location)
      : format === "csv"
        ? () => csvRows(open, location)
        : () => parquetRows(file, columns)
  return {
    name: location,
    rows,
    count: async () => {
      if (format === "parquet") return Number((await parquetMeta(file)).metadata.num_rows)
      let n = 0
      for await (const _ of rows()) n++
      return n
    },
    close: async () => {
      await cleanup()
      cleanup = async () => {}
    },
  }
}

async function* jsonlRows(open: () => Promise<Readable>, name: string): AsyncGenerator<InputRecord> {
  const lines = createInterface({ input: await open(), crlfDelay: Number.POSITIVE_INFINITY })
  let line = 0
  try {
    for await (const text of lines) {
      line++
      if (text.trim() === "") continue
      let value: unknown
      try {
        value = JSON.parse(text)
      } catch (error) {
        throw new UsageError(`${name}: line ${line} is not JSON (${(error as Error).message})`)
      }
      if (typeof value !== "object" || value === null || Array.isArray(value))
        throw new UsageError(`${name}: line ${line} is not a JSON object`)
      yield value as InputRecord
    }
  } finally {
    lines.close()
  }
}

async function* csvRows(open: () => Promise<Readable>, name: string): AsyncGenerator<InputRecord> {
  const { parse } = await import("csv-parse")
  const input = await open()
  const parser = input.pipe(parse({ columns: true, bom: true, skip_empty_lines: true }))
  input.once("error", (error) => parser.destroy(error))
  try {
    for await (const record of parser as AsyncIterable<InputRecord>) yield record
  } catch (error) {
    if (error instanceof UsageError) throw error
    throw new UsageError(`${name}: not valid CSV with a header row (${(error as Error).message})`)
  } finally {
    input.destroy()
  }
}

async function parquetMeta(file: string) {
  const { asyncBufferFromFile, parquetMetadataAsync } = await import("hyparquet")
  const buffer = await asyncBufferFromFile(file)
  try {
    return { buffer, metadata: await parquetMetadataAsync(buffer) }
  } catch (error) {
    throw new UsageError(`${file}: not a Parquet file (${(error as Error).message})`)
  }
}

/** Rows one row group at a time, so memory holds one group, not the file. */
async function* parquetRows(file: string, wanted: readonly string[]): AsyncGenerator<InputRecord> {
  const { parquetReadObjects, parquetSchema } = await import("hyparquet")
  const { buffer, metadata } = await parquetMeta(file)
  const top = new Set(parquetSchema(metadata).children.map((c) => c.element.name))
  const columns = wanted.filter((c) => top.has(c))
  let start = 0
  for (const group of metadata.row_groups) {
    const end = start + Number(group.num_rows)
    const rows = await parquetReadObjects({ file: buffer, metadata, columns, rowStart: start, rowEnd: end })
    for (const row of rows) yield row
    start = end
  }
}
