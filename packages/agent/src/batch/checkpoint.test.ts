import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import {
  listParts,
  mergeParts,
  nextSeq,
  PartWriter,
  partName,
  type ResultRow,
  readParts,
  runIdOf,
  shardDir,
  type Winner,
  wins,
} from "./checkpoint"
import { LocalOutput, writeFileAtomic } from "./output-store"

const scratch = () => mkdtempSync(join(tmpdir(), "swarmplane-checkpoint-"))

/** A result row builder: a response unless `error` is given. */
function result(id: string, at: number, error?: string): ResultRow {
  return {
    id,
    request: { prompt: id },
    response: error ? null : { text: `answer ${id} @${at}` },
    usage: null,
    error: error ? { message: error, attempts: 3 } : null,
    finishedAt: new Date(Date.UTC(2030, 0, 1, 0, 0, at)).toISOString(),
  }
}

const readJsonl = (file: string) =>
  readFileSync(file, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as ResultRow)

describe("names", () => {
  it("numbers parts so that names sort in write order, per run id", () => {
    expect(partName("att-1", 7)).toBe("part-att-1-000007.jsonl")
    const parts = [partName("att-1", 1), partName("att-1", 12), partName("att-2", 30)]
    expect(nextSeq(parts, "att-1")).toBe(13)
    expect(nextSeq(parts, "att-2")).toBe(31)
    expect(nextSeq(parts, "att-3")).toBe(1)
  })

  it("keeps an attempt uid that is safe in a file name, and invents one when there is none", () => {
    expect(runIdOf("0b6c-4f.x_Y")).toBe("0b6c-4f.x_Y")
    expect(runIdOf("a/../b c")).toBe("a_.._b_c")
    expect(runIdOf(undefined)).toMatch(/^local[0-9a-f]{12}$/)
    expect(runIdOf(undefined)).not.toBe(runIdOf(undefined))
  })
})

describe("wins (last write wins, a response is never replaced by an error)", () => {
  const w = (ok: boolean, at: string): Winner => ({ ok, finishedAt: at })
  const cases: Record<string, [Winner, Winner | undefined, boolean]> = {
    "first seen": [w(false, "1"), undefined, true],
    "a later response": [w(true, "2"), w(true, "1"), true],
    "an earlier response read later": [w(true, "1"), w(true, "2"), false],
    "the same time, read later": [w(true, "1"), w(true, "1"), true],
    "a response after an error": [w(true, "2"), w(false, "1"), true],
    "a response, even timed before an error": [w(true, "1"), w(false, "2"), true],
    "an error after a response": [w(false, "2"), w(true, "1"), false],
    "a later error after an error": [w(false, "2"), w(false, "1"), true],
  }
  for (const [name, [candidate, current, expected]] of Object.entries(cases))
    it(name, () => expect(wins(candidate, current)).toBe(expected))
})

describe("parts", () => {
  it("writes whole parts (no .tmp left) and reads the winner per id across attempts", async () => {
    const out = scratch()
    const store = LocalOutput(out)
    const dir = shardDir(2)
    const first = new PartWriter(store, dir, "att-1", 1)
    await first.write([result("a", 1), result("b", 1, "HTTP 500"), result("c", 1)])
    await first.write([result("d", 2, "HTTP 429")])
    const second = new PartWriter(store, dir, "att-2", nextSeq(await listParts(store, dir), "att-2"))
    await second.write([result("b", 5), result("d", 5, "HTTP 503"), result("a", 0, "late error")])
    expect(readdirSync(join(out, dir)).sort()).toEqual([
      "part-att-1-000001.jsonl",
      "part-att-1-000002.jsonl",
      "part-att-2-000001.jsonl",
    ])
    const { winners, parts, unreadable } = await readParts(store, dir)
    expect(parts).toHaveLength(3)
    expect(unreadable).toBe(0)
    expect(Object.fromEntries([...winners].map(([id, v]) => [id, v.ok]))).toEqual({
      a: true,
      b: true,
      c: true,
      d: false,
    })
    expect(winners.get("d")?.finishedAt).toBe(result("d", 5).finishedAt)
  })

  it("ignores temporary files, other files and lines that do not parse", async () => {
    const out = scratch()
    const dir = join(out, shardDir(0))
    mkdirSync(join(dir, "part-sub-000003.jsonl"), { recursive: true })
    writeFileSync(join(dir, "part-x-000001.jsonl.123.tmp"), `${JSON.stringify(result("t", 1))}\n`)
    writeFileSync(join(dir, "notes.jsonl"), `${JSON.stringify(result("n", 1))}\n`)
    writeFileSync(join(dir, "part-x-000002.jsonl"), `${JSON.stringify(result("ok", 1))}\n{"id":\n[]\n\n`)
    const { winners, unreadable } = await readParts(LocalOutput(out), shardDir(0))
    expect([...winners.keys()]).toEqual(["ok"])
    expect(unreadable).toBe(2)
  })

  it("reads nothing from a shard that has no folder yet", async () => {
    const { winners, parts } = await readParts(LocalOutput(join(scratch(), "absent")), shardDir(9))
    expect(winners.size).toBe(0)
    expect(parts).toEqual([])
  })
})

describe("mergeParts", () => {
  it("writes the winner of every id in input order, and counts what is missing or stale", async () => {
    const out = scratch()
    const store = LocalOutput(out)
    const dir = shardDir(1)
    await new PartWriter(store, dir, "b", 1).write([
      result("z", 3),
      result("x", 1, "HTTP 500"),
      result("gone", 1),
    ])
    await new PartWriter(store, dir, "a", 1).write([
      result("x", 2),
      result("y", 2, "HTTP 400"),
      result("z", 1),
    ])
    const merged = await mergeParts(store, 1, ["x", "y", "z", "w"])
    expect(merged).toMatchObject({ rows: 3, done: 2, failed: 1, missing: 1, stale: 1 })
    expect(merged.name).toBe("shard-1.jsonl")
    expect(merged.where).toBe(join(out, "shard-1.jsonl"))
    const rows = readJsonl(merged.where)
    expect(rows.map((r) => r.id)).toEqual(["x", "y", "z"])
    expect(rows[0]?.response).toEqual({ text: "answer x @2" })
    expect(rows[1]?.error).toEqual({ message: "HTTP 400", attempts: 3 })
    // z: the later write (finishedAt 3, in part "b") wins over the one read after it.
    expect(rows[2]?.response).toEqual({ text: "answer z @3" })
    expect(readdirSync(out).sort()).toEqual(["shard-1", "shard-1.jsonl"])
  })
})

describe("writeFileAtomic", () => {
  it("replaces a file whole and leaves no temporary file", async () => {
    const dir = scratch()
    const file = join(dir, "progress.json")
    await writeFileAtomic(file, "one")
    await writeFileAtomic(file, "two")
    expect(readFileSync(file, "utf8")).toBe("two")
    expect(readdirSync(dir)).toEqual(["progress.json"])
  })
})
