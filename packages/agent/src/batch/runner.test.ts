/**
 * The batch runner of one shard against a real echo server on loopback: every row answered once, a
 * crash after N rows resumed without redoing them, injected 429/500s retried, a stop keeps the finished
 * rows, and rows the endpoint refuses are written with their error and retried by the next attempt.
 */
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { silentLogger } from "../logger"
import { main } from "../main"
import { parseRunBatch } from "./options"
import { runBatch } from "./runner"
import { hashShard } from "./shard"
import { toJsonl } from "./testing/fixtures"
import { closeEchoServers, config, echo, input, type Line, lines, replyOf } from "./testing/runs"

afterEach(closeEchoServers)

describe("runBatch", () => {
  it("answers every row of the shard once, in input order, with the echo response and usage", async () => {
    const { server, endpoint } = await echo()
    const { file, rows } = input(300)
    const c = config(file, endpoint, { shardId: 1, nshards: 3 })
    const result = await runBatch(c, { log: silentLogger })
    const mine = rows.filter((r) => hashShard(String(r.id), 3) === 1)
    expect(result.outcome).toBe("succeeded")
    const out = lines(join(c.output, "shard-1.jsonl"))
    expect(out.map((l) => l.id)).toEqual(mine.map((r) => String(r.id)))
    for (const [i, line] of out.entries()) {
      expect(line.error).toBeNull()
      expect(replyOf(line)).toBe(`echo: ${mine[i]?.prompt}`)
      expect(line.usage?.total_tokens).toBeGreaterThan(0)
    }
    expect(server.requests).toHaveLength(mine.length)
    expect(result.progress).toMatchObject({ total: mine.length, done: mine.length, failed: 0, skipped: 0 })
    const done = JSON.parse(readFileSync(join(c.output, "shard-1", "done.json"), "utf8"))
    expect(done).toMatchObject({
      state: "succeeded",
      total: mine.length,
      done: mine.length,
      output: "shard-1.jsonl",
    })
  })

  it("the completions API sends the prompt and keeps the text answer", async () => {
    const { endpoint } = await echo()
    const { file } = input(20)
    const c = config(file, endpoint, { api: "completions", maxTokens: 3 })
    await runBatch(c, { log: silentLogger })
    const out = lines(join(c.output, "shard-0.jsonl"))
    expect(out).toHaveLength(20)
    expect(out[1]?.request).toEqual({ model: "echo", prompt: "p 1", max_tokens: 3 })
    expect(replyOf(out[1] as Line)).toBe("echo: p 1")
  })

  it("a crash after 100 rows is resumed by the next attempt without redoing a done row", async () => {
    const { server, endpoint } = await echo()
    const { file, rows } = input(400)
    const first = config(file, endpoint, { failAfter: 100, attemptUid: "a1", concurrency: 4 })
    const crashed = await runBatch(first, { log: silentLogger })
    expect(crashed.outcome).toBe("injected")
    const doneFirst = crashed.progress.done
    expect(doneFirst).toBeGreaterThanOrEqual(100)
    expect(doneFirst).toBeLessThan(400)
    expect(readdirSync(join(first.output, "shard-0"))).not.toContain("done.json")

    const second = await runBatch({ ...first, failAfter: undefined, attemptUid: "a2" }, { log: silentLogger })
    expect(second.outcome).toBe("succeeded")
    expect(second.progress).toMatchObject({ total: 400, done: 400, skipped: doneFirst })
    // What the first had sent past its last checkpoint, this one sent again, and says so: as far as the
    // first's last progress document knew (it is written at checkpoints and every 2 s), so never more.
    expect(second.progress.resent).toBeGreaterThan(0)
    expect(second.progress.resent).toBeLessThanOrEqual(crashed.progress.sent - doneFirst)
    const out = lines(join(first.output, "shard-0.jsonl"))
    expect(out.map((l) => l.id)).toEqual(rows.map((r) => String(r.id)))
    // The second attempt asked only for the rows the first did not checkpoint: none was done twice.
    // (Rows answered after the last checkpoint of the crashed attempt were lost with it, as in a crash.)
    const checkpointed = new Set(
      readdirSync(join(first.output, "shard-0"))
        .filter((n) => n.startsWith("part-a1-"))
        .flatMap((n) => lines(join(first.output, "shard-0", n)).map((l) => l.id)),
    )
    expect(checkpointed.size).toBe(doneFirst)
    const promptOf = new Map(rows.map((r) => [String(r.id), r.prompt]))
    const asked = new Map<string, number>()
    for (const p of server.requests) asked.set(p, (asked.get(p) ?? 0) + 1)
    expect(asked.size).toBe(400)
    const askedTwice = [...checkpointed].filter((id) => asked.get(promptOf.get(id) ?? "") !== 1)
    expect(askedTwice).toEqual([])
    const parts = readdirSync(join(first.output, "shard-0")).filter((n) => n.startsWith("part-"))
    expect(parts.some((n) => n.startsWith("part-a1-"))).toBe(true)
    expect(parts.some((n) => n.startsWith("part-a2-"))).toBe(true)
  })

  it("with 10% of answers 429 or 500, every row completes and the retries are counted", async () => {
    const { server, endpoint } = await echo({ failRate: 0.1, seed: 7 })
    const { file } = input(500)
    const c = config(file, endpoint, { concurrency: 16 })
    const result = await runBatch(c, { log: silentLogger })
    expect(result.outcome).toBe("succeeded")
    expect(result.progress.done).toBe(500)
    // ~10% of ~550 tries fail; the bounds are loose but would catch retries not being counted.
    expect(result.progress.retries).toBeGreaterThan(20)
    expect(result.progress.retries).toBeLessThan(120)
    expect(server.requests).toHaveLength(500)
    expect(server.stats.requests).toBe(500 + result.progress.retries + 1) // + GET /v1/models
    const progress = JSON.parse(readFileSync(join(c.output, "shard-0", "progress.json"), "utf8"))
    expect(progress).toMatchObject({ state: "succeeded", done: 500, retries: result.progress.retries })
  })

  it("a row the endpoint refuses is written with its error; the next attempt retries only that row", async () => {
    const { server, endpoint } = await echo()
    const dir = mkdtempSync(join(tmpdir(), "swarmplane-runner-in-"))
    const file = join(dir, "in.jsonl")
    writeFileSync(file, toJsonl([{ id: "a", prompt: "x" }, { id: "b" }, { id: "c", messages: [] }]))
    const c = config(file, endpoint)
    const first = await runBatch(c, { log: silentLogger })
    expect(first.outcome).toBe("failed")
    const out = lines(join(c.output, "shard-0.jsonl"))
    expect(out.map((l) => [l.id, l.error?.status ?? null])).toEqual([
      ["a", null],
      ["b", null],
      ["c", 400],
    ])
    expect(out[1]?.error?.message).toContain('no text in column "prompt"')
    expect(out[2]?.error?.message).toContain("messages")
    expect(out[2]?.error?.attempts).toBe(1) // a 400 is final, not retried

    const before = server.stats.requests
    const second = await runBatch(c, { log: silentLogger })
    expect(second.progress).toMatchObject({ skipped: 1, done: 1, failed: 2 })
    expect(server.stats.requests - before).toBe(2) // GET /v1/models and row c again; not row a
  })

  it("a stop keeps the finished rows and merges nothing; the rerun finishes", async () => {
    const { endpoint } = await echo()
    const { file } = input(200)
    const c = config(file, endpoint, { concurrency: 2, checkpointEvery: 10 })
    const stop = new AbortController()
    let seen = 0
    const log = { ...silentLogger, info: () => (++seen === 4 ? stop.abort() : undefined) }
    const stopped = await runBatch(c, { log, signal: stop.signal })
    expect(stopped.outcome).toBe("stopped")
    expect(stopped.progress.done).toBeGreaterThan(0)
    expect(stopped.progress.done).toBeLessThan(200)
    expect(readdirSync(c.output)).not.toContain("shard-0.jsonl")
    const rerun = await runBatch(c, { log: silentLogger })
    expect(rerun.progress).toMatchObject({ done: 200, skipped: stopped.progress.done })
  })

  it("an unreachable endpoint fails the rows after the retries, each with the reason", async () => {
    const { file } = input(3)
    const { server, endpoint } = await echo()
    await server.close()
    const c = config(file, endpoint, { model: "m", retry: { maxRetries: 2, initialMs: 1, maxMs: 1 } })
    const result = await runBatch(c, { log: silentLogger })
    expect(result.outcome).toBe("failed")
    const out = lines(join(c.output, "shard-0.jsonl"))
    expect(out).toHaveLength(3)
    expect(out[0]?.error).toMatchObject({ attempts: 3 })
    expect(out[0]?.error?.message).toMatch(/request failed: .*ECONNREFUSED.*after 3 tries/)
  })
})

describe("swarmplane-agent run-batch", () => {
  it("flags and environment become the config; SHARD_ID and NSHARDS select the shard", () => {
    const c = parseRunBatch(
      [
        "--input",
        "in.csv",
        "--output",
        "out",
        "--concurrency",
        "64",
        "--id-column",
        "key",
        "--api",
        "completions",
      ],
      { SWARM_ENDPOINT: "http://e:8000", SHARD_ID: "2", NSHARDS: "4", ATTEMPT_UID: "at-1" },
    )
    expect(c).toMatchObject({
      format: "csv",
      concurrency: 64,
      idColumn: "key",
      api: "completions",
      shardId: 2,
      nshards: 4,
      attemptUid: "at-1",
      endpoint: "http://e:8000",
    })
    const env = { SWARM_ENDPOINT: "http://e" }
    expect(parseRunBatch(["--input", "s3://b/in.jsonl", "--output", "s3://b/out/"], env)).toMatchObject({
      input: "s3://b/in.jsonl",
      output: "s3://b/out/",
    })
  })

  const usage: [string[], Record<string, string>, RegExp][] = [
    [["--output", "o"], { SWARM_ENDPOINT: "http://e" }, /--input is required/],
    [
      ["--input", "x.txt", "--output", "o"],
      { SWARM_ENDPOINT: "http://e" },
      /--format: cannot tell.*add --format/,
    ],
    [["--input", "x.jsonl", "--output", "o"], {}, /set SWARM_ENDPOINT/],
    [
      ["--input", "x.jsonl", "--output", "s3://"],
      { SWARM_ENDPOINT: "http://e" },
      /--output.*s3:\/\/bucket\/prefix/,
    ],
    [
      ["--input", "x.jsonl", "--output", "o", "--concurrency", "0"],
      { SWARM_ENDPOINT: "http://e" },
      /--concurrency/,
    ],
    [
      ["--input", "x.jsonl", "--output", "o", "--api", "embed"],
      { SWARM_ENDPOINT: "http://e" },
      /--api.*chat/,
    ],
    [
      ["--input", "x.jsonl", "--output", "o"],
      { SWARM_ENDPOINT: "http://e", SHARD_ID: "4", NSHARDS: "4" },
      /SHARD_ID/,
    ],
  ]
  for (const [args, env, message] of usage)
    it(`refuses ${args.slice(-2).join(" ")} ${JSON.stringify(env)}`, () =>
      expect(() => parseRunBatch(args, env)).toThrow(message))

  it("exits 0 after a whole shard, 3 when the test hook fires, and 2 on bad usage", async () => {
    const { endpoint } = await echo()
    const { file } = input(60)
    const out = mkdtempSync(join(tmpdir(), "swarmplane-runner-out-"))
    const args = ["run-batch", "--input", file, "--output", out, "--checkpoint-every", "10"]
    const stderr = process.stderr.write
    process.stderr.write = () => true
    try {
      expect(await main(args, { SWARM_ENDPOINT: endpoint, SWARMPLANE_BATCH_FAIL_AFTER: "20" })).toBe(3)
      expect(await main(args, { SWARM_ENDPOINT: endpoint })).toBe(0)
      expect(await main(["run-batch", "--output", out], {})).toBe(2)
    } finally {
      process.stderr.write = stderr
    }
    expect(lines(join(out, "shard-0.jsonl"))).toHaveLength(60)
  })
})
