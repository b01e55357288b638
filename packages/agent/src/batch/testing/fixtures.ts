/** Test inputs: the same rows as JSONL, CSV (quoted, a header row) and Parquet (hyparquet-writer). */
import { parquetWriteBuffer } from "hyparquet-writer"

export interface FixtureRow {
  id: string | number
  prompt: string
}

/** `n` rows; every fifth id is a number, prompts carry commas, quotes, newlines and non-ASCII text. */
export function fixtureRows(n: number, prefix = "p"): FixtureRow[] {
  return Array.from({ length: n }, (_, i) => ({
    id: i % 5 === 0 ? i : `r${i}`,
    prompt: i % 50 === 7 ? `${prefix} ${i}, "quoted"\nnext line é` : `${prefix} ${i}`,
  }))
}

export function toJsonl(rows: readonly object[]): string {
  return rows.map((r) => `${JSON.stringify(r)}\n`).join("")
}

export function toCsv(rows: readonly FixtureRow[]): string {
  const quote = (v: string | number) => `"${String(v).replace(/"/g, '""')}"`
  return `id,prompt\r\n${rows.map((r) => `${quote(r.id)},${quote(r.prompt)}\r\n`).join("")}`
}

/**
 * Parquet ids are all strings (a column has one type), REQUIRED; the prompt column is OPTIONAL.
 * The writer's defaults stay on (SNAPPY pages, statistics), as in files from real pipelines.
 */
export function toParquet(rows: readonly FixtureRow[], rowGroupSize = 1000): Uint8Array {
  const buffer = parquetWriteBuffer({
    columnData: [
      { name: "id", type: "STRING", nullable: false, data: rows.map((r) => String(r.id)) },
      { name: "prompt", type: "STRING", nullable: true, data: rows.map((r) => r.prompt) },
    ],
    rowGroupSize,
  })
  return new Uint8Array(buffer)
}
