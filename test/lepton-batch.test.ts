/**
 * Batch inference on the `lepton` backend end to end: an echo swarm served by a Lepton deployment, and
 * a batch job whose shards are Lepton jobs running the agent's batch runner (the backend's
 * `agentCommand` is how the job's image runs the agent; here, Node and the repo's agent). One shard's
 * worker is killed mid-run, as the loss of its node would: swarmplane retries that task as a new
 * attempt, whose runner resumes from the killed one's checkpoints, and every row is in the output once.
 * The shards' progress counters, which the backend reads from their logs, show while the job runs and
 * add up to the rows at its end.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, expect, test } from "vitest"
import { type LeptonPlane, leptonPlane } from "./support/lepton-plane"
import { agentBin, until } from "./support/plane"

let l: LeptonPlane
const scratch = mkdtempSync(join(tmpdir(), "swarmplane-lepton-batch-"))

beforeAll(async () => {
  l = await leptonPlane()
  await l.register("lep-batch", { agentCommand: [process.execPath, agentBin] })
}, 60_000)

afterAll(async () => {
  await l?.stop()
  rmSync(scratch, { recursive: true, force: true })
})

interface OutLine {
  id: string
  error: unknown
  response: { choices: { message: { content: string } }[] } | null
}
interface Attempt {
  attemptUid: string
  state: string
  target?: string
  progress?: { done: number; failed: number; total?: number }
}

const ended = (status: string) => ["SUCCEEDED", "FAILED", "CANCELLED"].includes(status)
/** Rows done across a job's shards, as the API shows them: each task's last attempt's counters. */
const rowsDone = (job: { tasks: { attempts: Attempt[] }[] }) =>
  job.tasks.reduce((n, t) => n + (t.attempts.at(-1)?.progress?.done ?? 0), 0)

const readLines = (file: string): OutLine[] =>
  readFileSync(file, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as OutLine)

/** The rows an attempt checkpointed in its shard's folder (its `part-<attemptUid>-<seq>.jsonl` files). */
function checkpointed(out: string, shard: number, attemptUid: string): OutLine[] {
  const dir = join(out, `shard-${shard}`)
  if (!existsSync(dir)) return []
  return readdirSync(dir)
    .filter((name) => name.startsWith(`part-${attemptUid}-`) && name.endsWith(".jsonl"))
    .flatMap((name) => readLines(join(dir, name)))
}

test("batch inference on Lepton: 1,000 rows over 4 shards, each once, after one shard's worker is killed mid-run; progress shows as it runs", {
  timeout: 90_000,
}, async () => {
  await l.applySwarm("lep-batch", { name: "lep-batch-echo", model: "echo", replicas: 1 })

  // Long prompts and one request in flight per shard keep each shard running long enough to be killed
  // between its first checkpoint and its end.
  const pad = "x".repeat(4_000)
  const rows = Array.from({ length: 1000 }, (_, i) => ({ id: `l-${i}`, prompt: `lepton prompt ${i} ${pad}` }))
  const input = join(scratch, "rows.jsonl")
  writeFileSync(input, rows.map((r) => `${JSON.stringify(r)}\n`).join(""))
  const out = join(scratch, "out")
  // Submitted while the swarm may still start: the tasks wait for it rather than run without an endpoint.
  const id = await l.submit("lep-batch", {
    swarm: "lep-batch-echo",
    tasks: 4,
    batch: { input, output: out, concurrency: 1, checkpointEvery: 10 },
  })
  // Watched from the start: the first time rows show as done, or the job's end if it comes first.
  const whileRunning = until(
    "the job's progress to show, or its end",
    async () => {
      const j = await l.job(id)
      const done = rowsDone(j)
      return (done > 0 || ended(j.status)) && { done, status: j.status as string }
    },
    80_000,
  )
  whileRunning.catch(() => {}) // awaited below; not an unhandled rejection meanwhile

  // Shard 0's first attempt, once its Lepton job is known and it has checkpointed rows.
  const first = await until(
    "shard 0 to checkpoint rows",
    async () => {
      const a: Attempt | undefined = (await l.job(id)).tasks[0].attempts[0]
      return a?.target !== undefined && checkpointed(out, 0, a.attemptUid).length > 0 && a
    },
    45_000,
  )
  // The shard's Lepton job runs the batch runner the way the backend says its image runs the agent.
  const onLepton = await l.lepton("GET", `/jobs/${first.target}?job_query_mode=alive_and_archive`)
  expect(onLepton.body.spec.container.command.slice(0, 3)).toEqual([process.execPath, agentBin, "run-batch"])
  // Throws if the worker is gone already: the kill must land mid-run for this test to mean anything.
  l.fake.killJobWorker(first.target!)

  const done = await l.finished(id, 60_000)
  expect(done.status, JSON.stringify(done.tasks)).toBe("SUCCEEDED")

  // Progress showed before the job ended, and at its end every shard's counters are whole: 1,000 rows.
  const shown = await whileRunning
  expect(ended(shown.status), `progress first seen with the job ${shown.status}`).toBe(false)
  expect(shown.done).toBeGreaterThan(0)
  expect(shown.done).toBeLessThan(1000)
  const last = (done.tasks as { attempts: Attempt[] }[]).map((t) => t.attempts.at(-1)?.progress)
  expect(
    last.every((pr) => pr && pr.done === pr.total && pr.failed === 0),
    JSON.stringify(last),
  ).toBe(true)
  expect(rowsDone(done)).toBe(1000)
  const attempts: Attempt[] = done.tasks[0].attempts
  expect(attempts.map((a) => a.state)).toEqual(["FAILED", "SUCCEEDED"])
  for (const task of done.tasks.slice(1) as { attempts: Attempt[] }[])
    expect(task.attempts.map((a) => a.state)).toEqual(["SUCCEEDED"])

  // Every row once across the merged shard outputs, each answered by the swarm.
  const lines = [0, 1, 2, 3].flatMap((i) => readLines(join(out, `shard-${i}.jsonl`)))
  expect(lines.map((line) => line.id).sort()).toEqual(rows.map((r) => r.id).sort())
  const prompt = new Map(rows.map((r) => [r.id, r.prompt]))
  expect(
    lines.filter(
      (line) =>
        line.error !== null || line.response?.choices[0]?.message.content !== `echo: ${prompt.get(line.id)}`,
    ),
  ).toEqual([])

  // The killed attempt stopped part way, and the retry resumed: it did not redo a checkpointed row.
  const before = checkpointed(out, 0, attempts[0]!.attemptUid)
  const after = checkpointed(out, 0, attempts[1]!.attemptUid)
  const shard0 = readLines(join(out, "shard-0.jsonl")).length
  expect(before.length).toBeGreaterThan(0)
  expect(before.length).toBeLessThan(shard0)
  const redone = new Set(before.map((line) => line.id))
  expect(after.filter((line) => redone.has(line.id))).toEqual([])
  expect(before.length + after.length).toBe(shard0)

  expect((await l.p.call("DELETE", "/v1/swarms/lep-batch-echo")).status).toBe(202)
})
