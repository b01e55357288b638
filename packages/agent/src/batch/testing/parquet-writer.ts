/**
 * A minimal Parquet writer for test fixtures (no writer package is installed, and the project adds
 * none for tests): uncompressed PLAIN data pages (format v1), one page per column chunk, REQUIRED or
 * OPTIONAL flat columns of UTF-8 strings or INT64, any number of row groups. The footer is Thrift
 * compact protocol, written by hand below. It follows the parquet-format spec (parquet.thrift), so
 * the reader under test (hyparquet) sees a file like any other writer's, minus compression and
 * dictionaries.
 */

export interface ParquetColumn {
  name: string
  type: "string" | "int64"
  /** OPTIONAL (nulls allowed, written with definition levels) instead of REQUIRED. */
  optional?: boolean
  values: (string | bigint | number | null)[]
}

const encoder = new TextEncoder()

// Thrift compact protocol ------------------------------------------------------------------------

type T =
  | { i32: number }
  | { i64: bigint | number }
  | { bin: string | Uint8Array }
  | { list: T[]; elem: number }
  | { struct: [number, T][] }

const type = (v: T): number => ("i32" in v ? 5 : "i64" in v ? 6 : "bin" in v ? 8 : "list" in v ? 9 : 12)

function varint(out: number[], n: bigint): void {
  let v = n
  do {
    const byte = Number(v & 0x7fn)
    v >>= 7n
    out.push(v > 0n ? byte | 0x80 : byte)
  } while (v > 0n)
}

const zigzag = (n: bigint) => (n << 1n) ^ (n >> 63n)

function write(out: number[], v: T): void {
  if ("i32" in v) varint(out, zigzag(BigInt(v.i32)))
  else if ("i64" in v) varint(out, zigzag(BigInt(v.i64)) & 0xffffffffffffffffn)
  else if ("bin" in v) {
    const bytes = typeof v.bin === "string" ? encoder.encode(v.bin) : v.bin
    varint(out, BigInt(bytes.length))
    append(out, bytes)
  } else if ("list" in v) {
    if (v.list.length < 15) out.push((v.list.length << 4) | v.elem)
    else {
      out.push(0xf0 | v.elem)
      varint(out, BigInt(v.list.length))
    }
    for (const item of v.list) write(out, item)
  } else {
    let last = 0
    for (const [id, field] of v.struct) {
      // Field ids here always ascend by 1..15, so the short form (delta in the high nibble) suffices.
      out.push(((id - last) << 4) | type(field))
      last = id
      write(out, field)
    }
    out.push(0)
  }
}

const struct = (...fields: [number, T | undefined][]): T => ({
  struct: fields.filter((f): f is [number, T] => f[1] !== undefined),
})

// Parquet ------------------------------------------------------------------------------------------

const Plain = 0
const Rle = 3

/** Push without spreading: a spread of a large page would overflow the call stack. */
function append(out: number[], bytes: Iterable<number>): void {
  for (const b of bytes) out.push(b)
}

function le32(n: number): number[] {
  return [n & 0xff, (n >>> 8) & 0xff, (n >>> 16) & 0xff, (n >>> 24) & 0xff]
}

/** The page body: definition levels (OPTIONAL only; RLE runs, bit width 1), then the PLAIN values. */
function pageBody(column: ParquetColumn, values: ParquetColumn["values"]): number[] {
  const out: number[] = []
  if (column.optional) {
    const levels: number[] = []
    for (let i = 0; i < values.length; ) {
      const level = values[i] === null ? 0 : 1
      let run = 0
      while (i < values.length && (values[i] === null ? 0 : 1) === level) {
        run++
        i++
      }
      varint(levels, BigInt(run << 1))
      levels.push(level)
    }
    append(out, le32(levels.length))
    append(out, levels)
  }
  for (const value of values) {
    if (value === null) {
      if (!column.optional) throw new Error(`column ${column.name} is REQUIRED but has a null`)
      continue
    }
    if (column.type === "string") {
      const bytes = encoder.encode(String(value))
      append(out, le32(bytes.length))
      append(out, bytes)
    } else {
      const n = BigInt.asUintN(64, BigInt(value))
      for (let b = 0n; b < 64n; b += 8n) out.push(Number((n >> b) & 0xffn))
    }
  }
  return out
}

/** A Parquet file holding `columns` (all of one length), in row groups of `rowGroupSize` rows. */
export function writeParquet(columns: ParquetColumn[], rowGroupSize = 1000): Uint8Array {
  const numRows = columns[0]?.values.length ?? 0
  const out: number[] = [...encoder.encode("PAR1")]
  const rowGroups: T[] = []
  for (let start = 0; start < numRows || (start === 0 && numRows === 0); start += rowGroupSize) {
    const end = Math.min(numRows, start + rowGroupSize)
    const chunks: T[] = []
    let groupBytes = 0
    for (const column of columns) {
      const body = pageBody(column, column.values.slice(start, end))
      const header: number[] = []
      write(
        header,
        struct(
          [1, { i32: 0 }], // DATA_PAGE
          [2, { i32: body.length }],
          [3, { i32: body.length }],
          [5, struct([1, { i32: end - start }], [2, { i32: Plain }], [3, { i32: Rle }], [4, { i32: Rle }])],
        ),
      )
      const offset = out.length
      append(out, header)
      append(out, body)
      const size = header.length + body.length
      groupBytes += size
      const meta = struct(
        [1, { i32: column.type === "string" ? 6 : 2 }], // BYTE_ARRAY | INT64
        [2, { list: [{ i32: Plain }, { i32: Rle }], elem: 5 }],
        [3, { list: [{ bin: column.name }], elem: 8 }],
        [4, { i32: 0 }], // UNCOMPRESSED
        [5, { i64: end - start }],
        [6, { i64: size }],
        [7, { i64: size }],
        [9, { i64: offset }],
      )
      chunks.push(struct([2, { i64: offset }], [3, meta]))
    }
    rowGroups.push(
      struct([1, { list: chunks, elem: 12 }], [2, { i64: groupBytes }], [3, { i64: end - start }]),
    )
    if (numRows === 0) break
  }
  const schema: T[] = [
    struct([4, { bin: "schema" }], [5, { i32: columns.length }]),
    ...columns.map((c) =>
      struct(
        [1, { i32: c.type === "string" ? 6 : 2 }],
        [3, { i32: c.optional ? 1 : 0 }], // OPTIONAL | REQUIRED
        [4, { bin: c.name }],
        [6, c.type === "string" ? { i32: 0 } : undefined], // UTF8
      ),
    ),
  ]
  const footer: number[] = []
  write(
    footer,
    struct(
      [1, { i32: 1 }],
      [2, { list: schema, elem: 12 }],
      [3, { i64: numRows }],
      [4, { list: rowGroups, elem: 12 }],
      [6, { bin: "swarmplane test writer" }],
    ),
  )
  append(out, footer)
  append(out, le32(footer.length))
  append(out, encoder.encode("PAR1"))
  return Uint8Array.from(out)
}
