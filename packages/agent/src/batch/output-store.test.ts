/**
 * The `OutputStore` contract, run against every implementation: a local folder, and S3 (the fake,
 * through the AWS SDK, with pages of 3 keys so that listing follows continuation tokens), at a
 * prefix and at a bucket's top level. Then what only S3 has: its errors as one line.
 */
import { mkdtempSync, readdirSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { UsageError } from "../cli"
import type { OutputStore } from "./output-port"
import { LocalOutput, openOutput } from "./output-store"
import { type FakeS3, startFakeS3 } from "./testing/fake-s3"

let s3: FakeS3
const env = () => s3.env()
const stores: OutputStore[] = []
beforeAll(async () => {
  s3 = await startFakeS3({ buckets: ["out", "top"], maxKeys: 3 })
})
afterAll(async () => {
  for (const store of stores.splice(0)) store.close()
  await s3.close()
})

let fresh = 0
const implementations: Record<
  string,
  () => Promise<{ store: OutputStore; where: (name: string) => string }>
> = {
  "a local folder": async () => {
    const dir = mkdtempSync(join(tmpdir(), "swarmplane-output-"))
    return { store: LocalOutput(dir), where: (name) => join(dir, name) }
  },
  "an S3 prefix": async () => {
    const url = `s3://out/run-${++fresh}/`
    const store = await openOutput(url, env())
    stores.push(store)
    return { store, where: (name) => `s3://out/run-${fresh}/${name}` }
  },
  "an S3 bucket's top level": async () => {
    for (const key of s3.objects.keys()) if (key.startsWith("top/")) s3.objects.delete(key)
    const store = await openOutput("s3://top", env())
    stores.push(store)
    return { store, where: (name) => `s3://top/${name}` }
  },
}

for (const [kind, open] of Object.entries(implementations))
  describe(`OutputStore on ${kind}`, () => {
    it("writes whole texts, replaces them, and reads them back (undefined when absent)", async () => {
      const { store, where } = await open()
      expect(await store.read("shard-0/progress.json")).toBeUndefined()
      await store.write("shard-0/progress.json", '{"done":1}\n')
      await store.write("shard-0/progress.json", '{"done":2}\n')
      expect(await store.read("shard-0/progress.json")).toBe('{"done":2}\n')
      await store.write("shard-0.jsonl", "")
      expect(await store.read("shard-0.jsonl")).toBe("")
      await store.write("shard-0/ü.jsonl", "é\n")
      expect(await store.read("shard-0/ü.jsonl")).toBe("é\n")
      expect(store.where("shard-0.jsonl")).toBe(where("shard-0.jsonl"))
    })

    it("lists the files directly in a folder, in UTF-8 byte order, across pages", async () => {
      const { store } = await open()
      expect(await store.list("shard-1")).toEqual([])
      const names = Array.from({ length: 11 }, (_, i) => `part-a-${String(i).padStart(6, "0")}.jsonl`)
      for (const name of [...names].reverse()) await store.write(`shard-1/${name}`, `${name}\n`)
      // Not in shard-1: a deeper file, a sibling folder whose name starts the same, the folder itself.
      await store.write("shard-1/sub/deeper.jsonl", "x\n")
      await store.write("shard-10/part-a-000001.jsonl", "x\n")
      await store.write("shard-1.jsonl", "x\n")
      await store.write("shard-1/\u{1F600}", "x\n")
      await store.write("shard-1/\uFFFD", "x\n")
      expect(await store.list("shard-1")).toEqual([...names, "\uFFFD", "\u{1F600}"])
      expect(await store.list("")).toEqual(["shard-1.jsonl"])
    })
  })

describe("S3 output", () => {
  it("sends pages of at most 3 keys, so listing 11 parts took several ListObjectsV2 calls", async () => {
    const store = await openOutput("s3://out/paged", env())
    stores.push(store)
    for (let i = 0; i < 11; i++) await store.write(`shard-0/part-x-${i}.jsonl`, "")
    const before = s3.log.length
    expect(await store.list("shard-0")).toHaveLength(11)
    expect(s3.log.slice(before)).toEqual(Array(4).fill("GET /out/"))
  })

  const failures: Record<string, [string, (s: OutputStore) => Promise<unknown>, RegExp]> = {
    "a missing bucket": [
      "s3://nobucket/out",
      (s) => s.list("shard-0"),
      /^--output s3:\/\/nobucket\/out: NoSuchBucket on ListObjectsV2 of s3:\/\/nobucket\/out\/shard-0\/: the bucket does not exist/,
    ],
    "a refused write": [
      "s3://frozen/out",
      (s) => s.write("shard-0/progress.json", "{}"),
      /^--output s3:\/\/frozen\/out: AccessDenied on PutObject of s3:\/\/frozen\/out\/shard-0\/progress.json: check the credentials/,
    ],
  }
  for (const [name, [url, act, message]] of Object.entries(failures))
    it(`${name} is a one-line UsageError naming the output and the S3 error code`, async () => {
      s3.buckets.add("frozen")
      s3.readOnly.add("frozen")
      const store = await openOutput(url, env())
      stores.push(store)
      const error = await act(store).then(
        () => undefined,
        (e: unknown) => e as Error,
      )
      expect(error).toBeInstanceOf(UsageError)
      expect(error?.message).toMatch(message)
      expect(error?.message).not.toContain("\n")
    })

  it("an unreachable endpoint is a one-line error with the connection's code", async () => {
    const down = await startFakeS3()
    await down.close()
    const store = await openOutput("s3://out/x", { ...env(), AWS_ENDPOINT_URL_S3: down.url })
    stores.push(store)
    const error = await store.read("shard-0/progress.json").then(
      () => undefined,
      (e: unknown) => e as Error,
    )
    expect(error).not.toBeInstanceOf(UsageError)
    expect(error?.message).toMatch(
      /^--output s3:\/\/out\/x: ECONNREFUSED on GetObject of s3:\/\/out\/x\/shard-0\/progress.json/,
    )
    expect(error?.message).not.toContain("\n")
  })

  it("refuses an s3:// URL without a bucket", async () => {
    await expect(openOutput("s3:///x", env())).rejects.toThrow(UsageError)
  })

  it("is not a local folder named s3:", () => {
    expect(readdirSync(".")).not.toContain("s3:")
  })
})
