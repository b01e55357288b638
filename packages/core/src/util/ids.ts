/** Identifiers: lowercase, DNS-safe, time-sortable (so listings by id follow creation order). */
import { createHash, randomBytes, randomFillSync } from "node:crypto"

const alphabet = "0123456789abcdefghjkmnpqrstvwxyz" // Crockford base32, lowercase

function encodeTime(ms: number, length = 10): string {
  let out = ""
  let value = Math.max(0, Math.floor(ms))
  for (let i = 0; i < length; i++) {
    out = alphabet[value % 32] + out
    value = Math.floor(value / 32)
  }
  return out
}

function encodeBytes(bytes: Uint8Array, length: number): string {
  let out = ""
  for (let i = 0; i < length; i++) out += alphabet[(bytes[i] ?? 0) % 32]
  return out
}

let lastMs = -1
let sequence = 0

/**
 * Random bytes for ids, drawn from a pool refilled 4 KiB at a time: asking the system for 6 bytes per
 * id was a tenth of the local API's CPU per submitted job (a job, its tasks' attempts and events each
 * take an id). The bytes are the same kind (the system's CSPRNG); only the calls are fewer.
 */
const pool = Buffer.alloc(4096)
let poolAt = pool.length
function random6(): Uint8Array {
  if (poolAt + 6 > pool.length) {
    randomFillSync(pool)
    poolAt = 0
  }
  poolAt += 6
  return pool.subarray(poolAt - 6, poolAt)
}

/**
 * `prefix-<10 time chars><4 sequence chars><6 random chars>`, e.g. `job-01kb2x9q3v0000d4m8n0`. Ids made
 * by one process sort in the order they were made, even within one millisecond (events rely on it).
 */
export function newId(prefix: string, nowMs: number): string {
  const ms = Math.max(Math.floor(nowMs), lastMs)
  sequence = ms === lastMs ? sequence + 1 : 0
  lastMs = ms
  return `${prefix}-${encodeTime(ms)}${encodeTime(sequence, 4)}${encodeBytes(random6(), 6)}`
}

/**
 * Like `newId`, but the same (`ms`, `seed`) always gives the same id. An idempotent request reuses its
 * seed when it is retried, so a retry after a crash finds the object the first try began.
 */
export function seededId(prefix: string, ms: number, seed: string): string {
  return `${prefix}-${encodeTime(ms)}${encodeBytes(createHash("sha256").update(seed).digest(), 10)}`
}

/**
 * The same (`ms`, `seed`) always gives the same id, shaped as `newId`'s and sorting just before every id
 * `newId` makes in millisecond `ms` (as the last of the millisecond before): a job's `created` event
 * comes before its other events, however fast they follow.
 */
export function seededFirstId(prefix: string, ms: number, seed: string): string {
  const hash = encodeBytes(createHash("sha256").update(seed).digest(), 6)
  return `${prefix}-${encodeTime(ms - 1)}${encodeTime(32 ** 4 - 1, 4)}${hash}`
}

/** A random secret in base64url (no padding). */
export function randomToken(bytes = 32): string {
  return randomBytes(bytes).toString("base64url")
}
