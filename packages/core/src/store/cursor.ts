/**
 * Cursors and key order shared by the store adapters. A cursor is the last evaluated key, as
 * base64url JSON, and is accepted only for the partition (and key range) it was issued for: DynamoDB
 * itself would happily start in another partition's key space, and this check is what keeps a
 * hand-made cursor from reading another tenant's partition.
 */
import { InvalidCursorError } from "./port"

export function encodeCursor(position: Record<string, unknown>): string {
  return Buffer.from(JSON.stringify(position)).toString("base64url")
}

/**
 * A cursor is only accepted for the partition (and key range) it was issued for: a caller must not
 * be able to hand-craft one that reads another tenant's partition.
 */
export function decodeCursor(
  cursor: string,
  keys: string[],
  attrs: { pk: string; sk: string },
  pk: string,
  inRange: (sk: string) => boolean,
): Record<string, string> {
  let value: unknown
  try {
    if (!/^[A-Za-z0-9_-]+$/.test(cursor)) throw new InvalidCursorError()
    value = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"))
  } catch {
    throw new InvalidCursorError()
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new InvalidCursorError()
  const record = value as Record<string, unknown>
  const names = Object.keys(record)
  const wellFormed =
    names.length === keys.length &&
    keys.every((k) => typeof record[k] === "string" && record[k] !== "") &&
    record[attrs.pk] === pk &&
    inRange(record[attrs.sk] as string)
  if (!wellFormed) throw new InvalidCursorError()
  return record as Record<string, string>
}

/**
 * Compare strings in UTF-8 byte order, which is code point order. JavaScript's `<` compares UTF-16
 * code units instead, which puts astral characters (surrogate pairs) before U+E000..U+FFFF.
 */
export function compareUtf8(a: string, b: string): number {
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i)
    const y = b.charCodeAt(i)
    if (x === y) continue
    const xSurrogate = x >= 0xd800 && x <= 0xdfff
    const ySurrogate = y >= 0xd800 && y <= 0xdfff
    if (xSurrogate !== ySurrogate) return xSurrogate ? 1 : -1
    return x - y
  }
  return a.length - b.length
}
