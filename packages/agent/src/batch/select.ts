/**
 * The rows of one shard, in input order: one pass over the input for `hash`, two for `range` (the
 * first counts the rows, unless the format knows the count). Only the shard's rows are kept, and of
 * each only its id, position and prompt or messages.
 */
import { UsageError } from "../cli"
import type { RowSource } from "./input"
import { type BatchRow, idOf, type RowColumns, toRow } from "./rows"
import { type ShardBy, type ShardSpec, shardFilter } from "./shard"

export interface Selection {
  /** The shard's rows in input order. */
  rows: BatchRow[]
  /** Rows in the whole input. */
  inputRows: number
}

export async function selectShard(
  source: RowSource,
  by: ShardBy,
  spec: ShardSpec,
  columns: RowColumns,
): Promise<Selection> {
  const total = by === "range" ? await source.count() : undefined
  const inShard = shardFilter(by, spec, total)
  const rows: BatchRow[] = []
  const seen = new Map<string, number>()
  let position = 0
  for await (const record of source.rows()) {
    const pos = position++
    // Range sharding needs no id to decide, so a row outside the range is not even looked at.
    if (by === "range" && !inShard("", pos)) continue
    const id = idOf(record, columns.idColumn, pos, source.name)
    if (!inShard(id, pos)) continue
    // Ids are the resume key: two rows with one id could not be told apart in the parts.
    const earlier = seen.get(id)
    if (earlier !== undefined)
      throw new UsageError(
        `${source.name}: rows ${earlier + 1} and ${pos + 1} have the same id "${id}"; ids must be unique`,
      )
    seen.set(id, pos)
    rows.push(toRow(record, columns, pos, source.name))
  }
  return { rows, inputRows: position }
}
