/**
 * The batch runner with `--output s3://bucket/prefix`, against the fake S3 (pages of 4 keys, so
 * reading a shard's parts follows continuation tokens) and a real echo server: the same layout and
 * the same resume as a local folder, the progress file still local, and S3 errors as one line.
 */
import { mkdtempSync, readdirSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { UsageError } from "../cli"
import { silentLogger } from "../logger"
import { main } from "../main"
import { runBatch } from "./runner"
import { hashShard } from "./shard"
import { type FakeS3, startFakeS3 } from "./testing/fake-s3"
import { closeEchoServers, config, echo, input, parseLines, replyOf } from "./testing/runs"

const PageSize = 4
let s3: FakeS3
const env = () => s3.env()
beforeAll(async () => {
  s3 = await startFakeS3({ buckets: ["results"], maxKeys: PageSize })
})
afterAll(() => s3.close())
afterEach(closeEchoServers)

let jobs = 0
const freshOutput = () => `s3://results/jobs/${++jobs}`

/** The text of the object at an `s3://` URL, undefined when there is none. */
function object(url: string): string | undefined {
  const bytes = s3.objects.get(url.replace(/^s3:\/\//, ""))
  return bytes && new TextDecoder().decode(bytes)
}

/** The names of the objects under an `s3://` prefix. */
const namesUnder = (url: string) =>
  [...s3.objects.keys()]
    .filter((k) => k.startsWith(`${url.replace(/^s3:\/\//, "")}/`))
    .map((k) => k.slice(url.length - "s3://".length + 1))
    .sort()

describe("runBatch --output s3://", () => {
  it("writes every row of the shard once to the merged object, with done.json and progress", async () => {
    const { server, endpoint } = await echo()
    const { file, rows } = input(300)
    const progressFile = join(mkdtempSync(join(tmpdir(), "swarmplane-progress-")), "progress.json")
    const out = freshOutput()
    const c = config(file, endpoint, {
      output: out,
      shardId: 1,
      nshards: 3,
      checkpointEvery: 10,
      progressFile,
    })
    const result = await runBatch(c, { log: silentLogger, env: env() })

    expect(result.outcome).toBe("succeeded")
    expect(result.merged).toBe(`${out}/shard-1.jsonl`)
    const mine = rows.filter((r) => hashShard(String(r.id), 3) === 1)
    const merged = parseLines(object(`${out}/shard-1.jsonl`) ?? "")
    expect(merged.map((l) => l.id)).toEqual(mine.map((r) => String(r.id)))
    for (const [i, line] of merged.entries()) expect(replyOf(line)).toBe(`echo: ${mine[i]?.prompt}`)
    expect(server.requests).toHaveLength(mine.length)

    const names = namesUnder(out)
    const parts = names.filter((n) => n.startsWith("shard-1/part-"))
    expect(parts.length).toBeGreaterThan(PageSize)
    expect(parts.flatMap((n) => parseLines(object(`${out}/${n}`) ?? "")).length).toBe(mine.length)
    expect(names.filter((n) => !parts.includes(n))).toEqual([
      "shard-1.jsonl",
      "shard-1/done.json",
      "shard-1/fingerprint.json",
      "shard-1/progress.json",
    ])
    expect(JSON.parse(object(`${out}/shard-1/done.json`) ?? "")).toMatchObject({
      state: "succeeded",
      done: mine.length,
      output: "shard-1.jsonl",
    })
    // SWARMPLANE_PROGRESS_FILE stays a local file, the same document as the one on S3.
    const progress = readFileSync(progressFile, "utf8")
    expect(object(`${out}/shard-1/progress.json`)).toBe(progress)
    expect(JSON.parse(progress)).toMatchObject({ state: "succeeded", total: mine.length, done: mine.length })
    expect(readdirSync(".")).not.toContain("s3:")
  })

  it("a crash, then a rerun that reads the parts across ListObjectsV2 pages and skips their rows", async () => {
    const { server, endpoint } = await echo()
    const { file, rows } = input(400)
    const out = freshOutput()
    const first = config(file, endpoint, {
      output: out,
      failAfter: 100,
      attemptUid: "a1",
      concurrency: 4,
      checkpointEvery: 10,
    })
    const crashed = await runBatch(first, { log: silentLogger, env: env() })
    expect(crashed.outcome).toBe("injected")
    const doneFirst = crashed.progress.done
    const partsFirst = namesUnder(out).filter((n) => n.startsWith("shard-0/part-a1-"))
    // More parts (and progress.json) than one page holds.
    expect(partsFirst.length).toBeGreaterThan(2 * PageSize)
    expect(namesUnder(out)).not.toContain("shard-0/done.json")
    const checkpointed = new Set(
      partsFirst.flatMap((n) => parseLines(object(`${out}/${n}`) ?? "").map((l) => l.id)),
    )
    expect(checkpointed.size).toBe(doneFirst)

    const logBefore = s3.log.length
    const second = await runBatch(
      { ...first, failAfter: undefined, attemptUid: "a2" },
      { log: silentLogger, env: env() },
    )
    expect(second.outcome).toBe("succeeded")
    expect(second.progress).toMatchObject({ total: 400, done: 400, skipped: doneFirst })
    // Reading the parts at the start and again for the merge: each listing took every page.
    const lists = s3.log.slice(logBefore).filter((l) => l === "GET /results/").length
    expect(lists).toBeGreaterThanOrEqual(2 * Math.ceil((partsFirst.length + 1) / PageSize))

    expect(parseLines(object(`${out}/shard-0.jsonl`) ?? "").map((l) => l.id)).toEqual(
      rows.map((r) => String(r.id)),
    )
    // No row a part of the crashed attempt holds was asked for again. (Rows answered after its last
    // checkpoint were lost with it, as in a crash, and asked for twice.)
    const promptOf = new Map(rows.map((r) => [String(r.id), r.prompt]))
    const asked = new Map<string, number>()
    for (const p of server.requests) asked.set(p, (asked.get(p) ?? 0) + 1)
    expect(asked.size).toBe(400)
    expect([...checkpointed].filter((id) => asked.get(promptOf.get(id) ?? "") !== 1)).toEqual([])
  })

  const failures: Record<string, [string, RegExp]> = {
    "a missing bucket": [
      "s3://nobucket/out",
      /^--output s3:\/\/nobucket\/out: NoSuchBucket on GetObject of s3:\/\/nobucket\/out\/shard-0\/fingerprint.json: the bucket does not exist/,
    ],
    "a bucket that refuses writes": [
      "s3://frozen/out",
      /^--output s3:\/\/frozen\/out: AccessDenied on PutObject of s3:\/\/frozen\/out\/shard-0\/fingerprint.json: check the credentials/,
    ],
  }
  for (const [name, [out, message]] of Object.entries(failures))
    it(`${name} ends the run with one line naming the output and the S3 error code (exit 2)`, async () => {
      s3.buckets.add("frozen")
      s3.readOnly.add("frozen")
      const { server, endpoint } = await echo()
      const { file } = input(5)
      const error = await runBatch(config(file, endpoint, { output: out }), {
        log: silentLogger,
        env: env(),
      }).then(
        () => undefined,
        (e: unknown) => e as Error,
      )
      expect(error).toBeInstanceOf(UsageError)
      expect(error?.message).toMatch(message)

      let stderr = ""
      const write = process.stderr.write
      process.stderr.write = (chunk: string | Uint8Array) => {
        stderr += String(chunk)
        return true
      }
      try {
        const code = await main(["run-batch", "--input", file, "--output", out], {
          ...env(),
          SWARM_ENDPOINT: endpoint,
        })
        expect(code).toBe(2)
      } finally {
        process.stderr.write = write
      }
      const [line, ...rest] = stderr
        .split("\n")
        .filter((l) => l.startsWith("swarmplane-agent run-batch: --output"))
      expect(line?.replace("swarmplane-agent run-batch: ", "")).toMatch(message)
      expect(rest).toEqual([])
      expect(stderr).not.toMatch(/\n\s+at /) // no stack trace
      expect(server.requests).toEqual([])
    })
})
