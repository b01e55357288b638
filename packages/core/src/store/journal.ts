/**
 * A durable StateStore for one process: the MemoryStore's semantics (and code), with every write
 * appended to a journal file before it is acknowledged. Opening replays the journal; once the journal
 * has grown well past the live data it is compacted (the live items written to a new file that then
 * replaces it). The local control plane keeps its state in one, in its data folder.
 *
 * One JSON line per change: `{"put":item}` or `{"delete":{"pk","sk"}}`. A write's lines go out in one
 * `write` call before its promise settles; a crash can tear only the last line, which the next open
 * drops (and cuts from the file). Writes reach the operating system, not the disk (no fsync per write,
 * as LevelDB's default): a process that dies loses nothing acknowledged, a machine that loses power
 * may lose the last writes. Compaction does sync, so it never loses what was there before.
 */
import {
  closeSync,
  existsSync,
  fsyncSync,
  ftruncateSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  writeSync,
} from "node:fs"
import { dirname } from "node:path"
import { BackendError } from "../util/errors"
import { type Change, MemoryStore } from "./memory"
import type { StoredItem } from "./port"

export interface JournalStoreOptions {
  /** The journal file; created when missing (its folder must exist). */
  path: string
  /**
   * Compact once the journal is larger than this many bytes and than `compactRatio` times the live
   * data. Default 16 MB.
   */
  compactMinBytes?: number
  /** Default 2. */
  compactRatio?: number
}

export interface JournalStore extends MemoryStore {
  /** The journal's size and the live items' share of it, in bytes. */
  sizes(): { journalBytes: number; liveBytes: number }
  /** Rewrite the journal as the live items alone, now. */
  compact(): void
  /** Close the file; the store refuses writes afterwards. */
  close(): void
}

export function JournalStore(options: JournalStoreOptions): JournalStore {
  const { path } = options
  const compactMinBytes = options.compactMinBytes ?? 16 * 1024 * 1024
  const compactRatio = options.compactRatio ?? 2
  const replayed = replay(path)
  /** The bytes of the line that last stored each live item, by key: the size a compaction keeps. */
  const lineBytes = new Map<string, number>()
  for (const [id, line] of replayed.lines) lineBytes.set(id, line)
  let liveBytes = [...lineBytes.values()].reduce((a, b) => a + b, 0)

  let fd: number | undefined = openSync(path, "a")
  ftruncateSync(fd, replayed.goodBytes)
  let journalBytes = replayed.goodBytes

  function append(changes: Change[]): void {
    if (fd === undefined) throw new BackendError(`the journal ${path} is closed`, false)
    const lines = changes.map(line)
    const text = lines.map((l) => l.text).join("")
    const bytes = Buffer.from(text, "utf8")
    try {
      let written = 0
      while (written < bytes.length) written += writeSync(fd, bytes, written)
    } catch (error) {
      // Cut what part of the write reached the file, so no torn line stays in the middle of it.
      try {
        ftruncateSync(fd, journalBytes)
      } catch {}
      throw new BackendError(`could not append to the journal ${path}: ${(error as Error).message}`, true)
    }
    journalBytes += bytes.length
    for (const l of lines) {
      liveBytes -= lineBytes.get(l.id) ?? 0
      if (l.put) lineBytes.set(l.id, l.bytes)
      else lineBytes.delete(l.id)
      if (l.put) liveBytes += l.bytes
    }
  }

  let compactQueued = false
  const store = MemoryStore({
    initial: replayed.items.values(),
    beforeWrite: (changes) => {
      append(changes)
      if (compactQueued || journalBytes <= compactMinBytes || journalBytes <= compactRatio * liveBytes) return
      compactQueued = true
      // Once this write is applied (the store applies it when this returns), not before.
      queueMicrotask(() => {
        compactQueued = false
        try {
          compact()
        } catch {
          // Left as it was, whole; the next write that finds it too large tries again.
        }
      })
    },
  })

  /**
   * Write the live items to a new file, sync it, and put it in the journal's place. It blocks the
   * event loop while it writes (tens of ms for megabytes of live items): writes stay in order.
   */
  function compact(): void {
    if (fd === undefined) return
    const next = `${path}.compacting`
    let bytes = 0
    try {
      const out = openSync(next, "w")
      try {
        let chunk = ""
        const flush = () => {
          const buffer = Buffer.from(chunk, "utf8")
          let written = 0
          while (written < buffer.length) written += writeSync(out, buffer, written)
          bytes += buffer.length
          chunk = ""
        }
        for (const item of store.items()) {
          chunk += line({ put: item }).text
          if (chunk.length > 1024 * 1024) flush()
        }
        flush()
        fsyncSync(out)
      } finally {
        closeSync(out)
      }
    } catch (error) {
      // The journal as it was is still whole: keep appending to it.
      rmSync(next, { force: true })
      throw new BackendError(`could not compact the journal ${path}: ${(error as Error).message}`, true)
    }
    renameSync(next, path)
    syncFolder(dirname(path))
    const old = fd
    // Appends must go to the new file: until it is open, none may go to the old one (now unlinked).
    fd = undefined
    closeSync(old)
    fd = openSync(path, "a")
    journalBytes = bytes
    liveBytes = bytes
  }

  return Object.assign(store, {
    sizes: () => ({ journalBytes, liveBytes }),
    compact,
    close() {
      if (fd !== undefined) closeSync(fd)
      fd = undefined
    },
  })
}

interface Line {
  id: string
  put: boolean
  text: string
  bytes: number
}

function line(change: Change): Line {
  const put = "put" in change
  const key = put ? change.put : change.delete
  const text = `${JSON.stringify(put ? { put: change.put } : { delete: { pk: key.pk, sk: key.sk } })}\n`
  return { id: keyId(key), put, text, bytes: Buffer.byteLength(text, "utf8") }
}

function keyId(key: { pk: string; sk: string }): string {
  return JSON.stringify([key.pk, key.sk])
}

/**
 * The items a journal leaves, the bytes of the line that stored each, and how much of the file is
 * whole lines. A last line that does not parse (a crash tore it) is dropped; any other is corruption
 * and refuses the open, naming the line.
 */
function replay(path: string): {
  items: Map<string, StoredItem>
  lines: Map<string, number>
  goodBytes: number
} {
  const items = new Map<string, StoredItem>()
  const lines = new Map<string, number>()
  if (!existsSync(path)) return { items, lines, goodBytes: 0 }
  const content = readFileSync(path)
  let start = 0
  let lineNumber = 0
  while (start < content.length) {
    lineNumber++
    const end = content.indexOf(0x0a, start)
    const last = end === -1 || end === content.length - 1
    const stop = end === -1 ? content.length : end + 1
    let change: Change | undefined
    try {
      change = parseChange(JSON.parse(content.toString("utf8", start, stop)))
    } catch {}
    if (!change || end === -1) {
      if (last) break
      throw new BackendError(
        `the journal ${path} is damaged at line ${lineNumber}: it is not a change`,
        false,
      )
    }
    if ("put" in change) {
      const id = keyId(change.put)
      items.set(id, change.put)
      lines.set(id, stop - start)
    } else {
      items.delete(keyId(change.delete))
      lines.delete(keyId(change.delete))
    }
    start = stop
  }
  return { items, lines, goodBytes: start }
}

function parseChange(value: unknown): Change | undefined {
  if (!value || typeof value !== "object") return undefined
  const record = value as { put?: StoredItem; delete?: { pk: string; sk: string } }
  const key = record.put ?? record.delete
  if (!key || typeof key.pk !== "string" || typeof key.sk !== "string") return undefined
  if (record.put) return typeof record.put.version === "number" ? { put: record.put } : undefined
  return { delete: { pk: key.pk, sk: key.sk } }
}

/** Sync a folder, so a rename in it survives a power loss (where the platform allows it). */
function syncFolder(folder: string): void {
  try {
    const dir = openSync(folder, "r")
    try {
      fsyncSync(dir)
    } finally {
      closeSync(dir)
    }
  } catch {}
}
