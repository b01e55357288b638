/**
 * Progress lines on stdout (`SWARMPLANE_PROGRESS_STDOUT=1`): a backend that reads the task's log rather
 * than a file of its (Lepton) finds the shard's counters there, ending with the final ones; without the
 * variable the runner prints nothing, as on Slurm and the workers.
 */
import { afterEach, describe, expect, it } from "vitest"
import { silentLogger } from "../logger"
import { parseRunBatch } from "./options"
import { type BatchProgress, ProgressLineMarker, progressPrinter } from "./progress"
import { runBatch } from "./runner"
import { closeEchoServers, config, echo, input } from "./testing/runs"

afterEach(closeEchoServers)

/** The documents of the progress lines printed. */
const documents = (printed: string[]): BatchProgress[] =>
  printed.map((line) => {
    expect(line.startsWith(`${ProgressLineMarker} `)).toBe(true)
    expect(line.endsWith("\n")).toBe(true)
    expect(line.trimEnd()).not.toContain("\n")
    return JSON.parse(line.slice(ProgressLineMarker.length + 1)) as BatchProgress
  })

describe("progress lines", () => {
  it("with progressStdout, the counters are printed as they move, the last line the final ones", async () => {
    const { endpoint } = await echo()
    const { file } = input(120)
    const c = {
      ...config(file, endpoint, { attemptUid: "att/1" }),
      checkpointEvery: 10,
      progressStdout: true,
    }
    const printed: string[] = []
    const result = await runBatch(c, { log: silentLogger, print: (line) => printed.push(line) })
    expect(result.outcome).toBe("succeeded")
    const docs = documents(printed)
    expect(docs.length).toBeGreaterThan(2)
    // Each line names the attempt, and done never goes back.
    expect(new Set(docs.map((d) => d.runId))).toEqual(new Set(["att_1"]))
    for (const [i, d] of docs.entries()) if (i > 0) expect(d.done).toBeGreaterThanOrEqual(docs[i - 1]!.done)
    expect(docs.some((d) => d.state === "running" && d.done > 0 && d.done < 120)).toBe(true)
    expect(docs.at(-1)).toMatchObject({ state: "succeeded", done: 120, total: 120, failed: 0 })
  })

  it("without progressStdout, nothing is printed", async () => {
    const { endpoint } = await echo()
    const { file } = input(20)
    const printed: string[] = []
    const result = await runBatch(config(file, endpoint), {
      log: silentLogger,
      print: (l) => printed.push(l),
    })
    expect(result.outcome).toBe("succeeded")
    expect(printed).toEqual([])
  })

  it("a report whose counters did not move prints no new line", () => {
    const printed: string[] = []
    const print = progressPrinter((line) => printed.push(line))
    const doc: BatchProgress = {
      shardId: 0,
      nshards: 1,
      runId: "r",
      state: "running",
      total: 5,
      done: 1,
      failed: 0,
      retries: 0,
      skipped: 0,
      sent: 2,
      resent: 0,
      updatedAt: "2026-01-01T00:00:00.000Z",
    }
    print(doc)
    print({ ...doc, updatedAt: "2026-01-01T00:00:02.000Z" })
    print({ ...doc, done: 2 })
    print({ ...doc, done: 2, state: "succeeded" })
    expect(documents(printed).map((d) => [d.done, d.state])).toEqual([
      [1, "running"],
      [2, "running"],
      [2, "succeeded"],
    ])
  })

  it("SWARMPLANE_PROGRESS_STDOUT=1 turns it on; anything else leaves it off", () => {
    const args = ["--input", "in.jsonl", "--output", "out"]
    const env = { SWARM_ENDPOINT: "http://e" }
    expect(parseRunBatch(args, { ...env, SWARMPLANE_PROGRESS_STDOUT: "1" })).toMatchObject({
      progressStdout: true,
    })
    expect(parseRunBatch(args, { ...env, SWARMPLANE_PROGRESS_STDOUT: "0" })).not.toHaveProperty(
      "progressStdout",
    )
    expect(parseRunBatch(args, env)).not.toHaveProperty("progressStdout")
  })
})
