import { mkdtempSync, readdirSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parquetMetadata } from "hyparquet"
import { parquetWriteBuffer } from "hyparquet-writer"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { UsageError } from "../cli"
import { formatOf, type InputFormat, openSource } from "./input"
import { requestBody, toRow } from "./rows"
import { selectShard } from "./select"
import { type FakeS3, startFakeS3 } from "./testing/fake-s3"
import { fixtureRows, toCsv, toJsonl, toParquet } from "./testing/fixtures"

const dir = mkdtempSync(join(tmpdir(), "swarmplane-batch-input-"))
const columns = { idColumn: "id", promptColumn: "prompt" }
const rows = fixtureRows(2500)
const files: Record<InputFormat, string> = {
  jsonl: join(dir, "in.jsonl"),
  csv: join(dir, "in.csv"),
  parquet: join(dir, "in.parquet"),
}
writeFileSync(files.jsonl, toJsonl(rows))
writeFileSync(files.csv, `\ufeff${toCsv(rows)}`)
const parquet = toParquet(rows, 1000)
writeFileSync(files.parquet, parquet)

const downloads = mkdtempSync(join(tmpdir(), "swarmplane-batch-downloads-"))

async function select(location: string, format: InputFormat, by: "hash" | "range" = "hash", env = {}) {
  const source = await openSource(location, format, ["id", "prompt", "messages"], { env, tmpDir: downloads })
  try {
    return await selectShard(source, by, { shardId: 1, nshards: 3 }, columns)
  } finally {
    await source.close()
  }
}

const failure = (promise: Promise<unknown>) =>
  promise.then(
    () => {
      throw new Error("expected a rejection")
    },
    (error: unknown) => error as Error,
  )

describe("formatOf", () => {
  const cases: Record<string, InputFormat | undefined> = {
    "a/b.parquet": "parquet",
    "s3://b/k/x.PARQUET": "parquet",
    "x.csv": "csv",
    "x.jsonl": "jsonl",
    "x.ndjson": "jsonl",
    "x.json": "jsonl",
    "x.txt": undefined,
    "s3://bucket/part-0000": undefined,
  }
  for (const [name, format] of Object.entries(cases)) it(name, () => expect(formatOf(name)).toBe(format))
})

describe("readers", () => {
  it("JSONL, CSV (with a BOM) and Parquet (3 row groups) give the same shard, in input order", async () => {
    expect(parquetMetadata(parquet.buffer as ArrayBuffer).row_groups.map((g) => g.num_rows)).toEqual([
      1000n,
      1000n,
      500n,
    ])
    const jsonl = await select(files.jsonl, "jsonl")
    expect(jsonl.inputRows).toBe(2500)
    expect(jsonl.rows.length).toBeGreaterThan(700)
    expect(jsonl.rows[0]).toMatchObject({ id: expect.any(String), prompt: expect.any(String) })
    expect(jsonl.rows.map((r) => r.position)).toEqual(
      [...jsonl.rows.map((r) => r.position)].sort((a, b) => a - b),
    )
    expect(await select(files.csv, "csv")).toEqual(jsonl)
    expect(await select(files.parquet, "parquet")).toEqual(jsonl)
    const multiline = jsonl.rows.find((r) => r.prompt?.includes("\n"))
    expect(multiline?.prompt).toMatch(/, "quoted"\nnext line é$/)
  })

  it("range sharding counts the rows (Parquet from its footer) and takes the middle third", async () => {
    for (const format of ["jsonl", "csv", "parquet"] as const) {
      const { rows: got } = await select(files[format], format, "range")
      expect(got.map((r) => r.position)).toEqual(Array.from({ length: 833 }, (_, i) => 833 + i))
    }
  })

  it("reads Parquet INT64 ids as decimal text and a null prompt as no prompt", async () => {
    const file = join(dir, "int-ids.parquet")
    const buffer = parquetWriteBuffer({
      columnData: [
        { name: "id", type: "INT64", nullable: false, data: [7n, 8n, 9n] },
        { name: "prompt", type: "STRING", nullable: true, data: ["a", null, "c"] },
        { name: "other", type: "STRING", nullable: false, data: ["x", "y", "z"] },
      ],
    })
    writeFileSync(file, new Uint8Array(buffer))
    const source = await openSource(file, "parquet", ["id", "prompt", "messages"])
    const got = await selectShard(source, "hash", { shardId: 0, nshards: 1 }, columns)
    expect(got.rows).toEqual([
      { id: "7", position: 0, prompt: "a" },
      { id: "8", position: 1 },
      { id: "9", position: 2, prompt: "c" },
    ])
  })

  const bad: Record<string, { format: InputFormat; text: string; message: string }> = {
    "a JSONL line that is not JSON": {
      format: "jsonl",
      text: '{"id":1}\n\n{oops\n',
      message: "line 3 is not JSON",
    },
    "a JSONL line that is an array": {
      format: "jsonl",
      text: "[1]\n",
      message: "line 1 is not a JSON object",
    },
    "a CSV row with too many fields": { format: "csv", text: "id,prompt\n1,a,b\n", message: "not valid CSV" },
    "a row without an id": {
      format: "jsonl",
      text: '{"key":1,"prompt":"p"}\n',
      message: 'no id in column "id"',
    },
    "two rows with one id": {
      format: "jsonl",
      text: '{"id":1}\n{"id":"1"}\n',
      message: 'rows 1 and 2 have the same id "1"',
    },
    "a file that is not Parquet": { format: "parquet", text: "id,prompt\n", message: "not a Parquet file" },
  }
  for (const [name, tc] of Object.entries(bad))
    it(`rejects ${name} with a UsageError`, async () => {
      const file = join(dir, `bad-${name.replace(/\W+/g, "-")}`)
      writeFileSync(file, tc.text)
      const error = await failure(select(file, tc.format))
      expect(error).toBeInstanceOf(UsageError)
      expect(error.message).toContain(tc.message)
    })

  it("rejects a missing file", async () => {
    const error = await failure(openSource(join(dir, "nope.jsonl"), "jsonl", []))
    expect(error).toBeInstanceOf(UsageError)
    expect(error.message).toContain("is not a readable file")
  })
})

describe("s3:// inputs (fake S3)", () => {
  let s3: FakeS3
  const env = () => s3.env()
  beforeAll(async () => {
    s3 = await startFakeS3()
    s3.objects.set("data/in.jsonl", new TextEncoder().encode(toJsonl(rows)))
    s3.objects.set("data/nested/in.csv", new TextEncoder().encode(toCsv(rows)))
    s3.objects.set("data/in.parquet", toParquet(rows, 700))
  })
  afterAll(() => s3.close())

  it("streams JSONL and CSV and downloads Parquet, with the same rows as local files", async () => {
    const local = await select(files.jsonl, "jsonl")
    expect(await select("s3://data/in.jsonl", "jsonl", "hash", env())).toEqual(local)
    expect(await select("s3://data/nested/in.csv", "csv", "hash", env())).toEqual(local)
    expect(await select("s3://data/in.parquet", "parquet", "range", env())).toEqual(
      await select(files.parquet, "parquet", "range"),
    )
    // The downloaded copy is removed on close.
    expect(readdirSync(downloads)).toEqual([])
    expect(s3.log).toContain("GET /data/nested/in.csv")
  })

  it("turns NoSuchKey and NoSuchBucket into UsageErrors that name the object", async () => {
    const key = await failure(select("s3://data/missing.jsonl", "jsonl", "hash", env()))
    expect(key).toBeInstanceOf(UsageError)
    expect(key.message).toBe("--input: s3://data/missing.jsonl does not exist (NoSuchKey)")
    const bucket = await failure(select("s3://nobucket/x.csv", "csv", "hash", env()))
    expect(bucket.message).toBe("--input: bucket nobucket does not exist")
  })
})

describe("requestBody", () => {
  const base = { model: "m", promptColumn: "prompt" }
  it("sends a prompt as one user message, or the row's messages as they are", () => {
    expect(
      requestBody({ id: "1", position: 0, prompt: "hi" }, { ...base, api: "chat", maxTokens: 5 }),
    ).toEqual({
      body: { model: "m", messages: [{ role: "user", content: "hi" }], max_tokens: 5 },
    })
    const messages = [
      { role: "system", content: "s" },
      { role: "user", content: "u" },
    ]
    expect(requestBody({ id: "1", position: 0, prompt: "p", messages }, { ...base, api: "chat" })).toEqual({
      body: { model: "m", messages },
    })
    expect(
      requestBody({ id: "1", position: 0, prompt: "p", messages }, { ...base, api: "completions" }),
    ).toEqual({
      body: { model: "m", prompt: "p" },
    })
  })

  it("keeps a messages column given as JSON text (CSV), and ignores text that is not an array", () => {
    const messages = [{ role: "user", content: "x" }]
    expect(toRow({ id: 3, prompt: 4, messages: JSON.stringify(messages) }, columns, 0, "f")).toEqual({
      id: "3",
      position: 0,
      prompt: "4",
      messages,
    })
    expect(toRow({ id: "a", messages: "[not json" }, columns, 1, "f")).toEqual({ id: "a", position: 1 })
  })

  it("explains a row it cannot send", () => {
    expect(requestBody({ id: "1", position: 0 }, { ...base, api: "chat" })).toEqual({
      error: 'no "messages" array and no text in column "prompt"',
    })
    expect(requestBody({ id: "1", position: 0 }, { ...base, api: "completions" })).toEqual({
      error: 'no text in column "prompt"',
    })
  })
})
