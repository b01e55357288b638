/**
 * A shard's output answers one question (its input and request): the same question resumes, another
 * refuses before anything is sent, and `--overwrite` starts over without reading the old parts, while
 * its own retries still resume. Against a real echo server on loopback.
 */
import { copyFileSync, mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { UsageError } from "../cli"
import { silentLogger } from "../logger"
import { runBatch } from "./runner"
import { toJsonl } from "./testing/fixtures"
import { closeEchoServers, config, echo, input, lines, replyOf } from "./testing/runs"

afterEach(closeEchoServers)

const refusal = (run: Promise<unknown>) =>
  run.then(
    () => undefined,
    (e: unknown) => e as Error,
  )

describe("the question a shard's output answers", () => {
  it("the same input and request again: resumed, nothing asked twice", async () => {
    const { server, endpoint } = await echo()
    const { file } = input(50)
    const c = config(file, endpoint)
    await runBatch(c, { log: silentLogger })
    const again = await runBatch({ ...c, attemptUid: "a-2" }, { log: silentLogger })
    expect(again.progress).toMatchObject({ skipped: 50, done: 50 })
    expect(server.requests).toHaveLength(50)
  })

  it("changed prompts with the same ids, another input file, another model: refused before anything is sent", async () => {
    const { server, endpoint } = await echo()
    const { file, rows } = input(50)
    const c = config(file, endpoint)
    await runBatch(c, { log: silentLogger })
    const changed = join(mkdtempSync(join(tmpdir(), "swarmplane-fp-")), "in.jsonl")
    writeFileSync(changed, toJsonl(rows.map((r) => ({ ...r, prompt: `new ${r.prompt}` }))))
    const moved = join(mkdtempSync(join(tmpdir(), "swarmplane-fp-")), "in.jsonl")
    copyFileSync(file, moved)
    const cases: [string, typeof c, RegExp][] = [
      ["changed prompts", { ...c, input: changed }, /the rows' content changed/],
      ["another input file", { ...c, input: moved }, /input .*in\.jsonl → .*in\.jsonl/],
      ["another model", { ...c, model: "other" }, /model null → "other"/],
    ]
    for (const [name, run, what] of cases) {
      const error = await refusal(runBatch({ ...run, attemptUid: `a-${name}` }, { log: silentLogger }))
      expect(error, name).toBeInstanceOf(UsageError)
      expect(error?.message, name).toMatch(
        /^the output holds results of another input or request for shard 0/,
      )
      expect(error?.message, name).toMatch(what)
      expect(error?.message, name).toMatch(/pass --overwrite/)
    }
    expect(server.requests).toHaveLength(50)
  })

  it("--overwrite starts over (no old answer is kept), and its own retries resume from its own parts", async () => {
    const { server, endpoint } = await echo()
    const { file, rows } = input(200)
    const c = config(file, endpoint, { checkpointEvery: 10, concurrency: 2 })
    await runBatch(c, { log: silentLogger })
    const changed = join(mkdtempSync(join(tmpdir(), "swarmplane-fp-")), "in.jsonl")
    writeFileSync(changed, toJsonl(rows.map((r) => ({ ...r, prompt: `new ${r.prompt}` }))))
    const fresh = { ...c, input: changed, overwrite: true }
    const crashed = await runBatch({ ...fresh, attemptUid: "b-1", failAfter: 50 }, { log: silentLogger })
    expect(crashed.outcome).toBe("injected")
    const resumed = await runBatch({ ...fresh, attemptUid: "b-2" }, { log: silentLogger })
    expect(resumed.outcome).toBe("succeeded")
    expect(resumed.progress.skipped).toBe(crashed.progress.done)
    const out = lines(join(c.output, "shard-0.jsonl"))
    expect(out).toHaveLength(200)
    for (const [i, line] of out.entries()) expect(replyOf(line)).toBe(`echo: new ${rows[i]?.prompt}`)
    // 200 old answers, then each new prompt once (plus what the crash lost in flight).
    const asked = server.requests.filter((p) => p.startsWith("new "))
    expect(new Set(asked).size).toBe(200)
    expect(asked.length - 200).toBeLessThanOrEqual(10 + 2)
  })
})
