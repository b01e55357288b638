/**
 * Batch inference end to end on the local control plane: a 2-replica echo swarm served by real
 * agents, a batch job whose tasks run `swarmplane-agent run-batch` against the swarm's router, and
 * the merged outputs read back from disk. Also: a shard that crashes after 300 rows resumes on its
 * second attempt without redoing a checkpointed row (counted from the replicas' request logs), and an
 * endpoint failing 10% of requests with 429/500 still gets every row done.
 */
import { execFileSync } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, afterEach, beforeAll, describe, expect, test } from "vitest"
import { type Plane, startAgent, startPlane, stopAgents, until } from "./support/plane"

let p: Plane
let backends = 0
const scratch = mkdtempSync(join(tmpdir(), "swarmplane-batch-e2e-"))

beforeAll(async () => {
  p = await startPlane()
})
afterEach(() => stopAgents())
afterAll(() => p.stop())

interface Row {
  id: string
  prompt: string
}
interface OutLine {
  id: string
  response: { choices: { message: { content: string } }[] } | null
  error: unknown
}
interface Task {
  index: number
  state: string
  attempts: { attemptUid: string; state: string; exitCode?: number; progress?: Record<string, number> }[]
}

/** A backend with two agents, and an echo swarm of two replicas on it (extra `args` for the server). */
async function swarm(name: string, args: string[] = []) {
  const id = `batch-${++backends}`
  expect(
    (await p.call("POST", "/v1/backends", { id, config: { type: "workers", heartbeatIntervalS: 1 } })).status,
  ).toBe(201)
  for (const i of [0, 1]) startAgent(p, id, `${id}-agent-${i}`, { cpu: 8 })
  const res = await p.call("POST", "/v1/swarms", {
    name,
    model: "echo",
    replicas: 2,
    memoryMiBPerReplica: 256,
    backendId: id,
    args,
  })
  expect(res.status, JSON.stringify(res.json)).toBe(202)
  const ready = (await p.call("GET", `/v1/swarms/${name}?wait=RUNNING&timeoutS=25`)).json
  expect(ready).toMatchObject({ phase: "RUNNING", replicaStatus: { ready: 2, total: 2 } })
  const replicas: string[] = ready.replicaStatus.items.map((i: { url: string }) => i.url)
  return { backendId: id, replicas }
}

/** `n` rows with unique ids and prompts, as a JSONL file. */
function input(n: number, tag: string): { file: string; rows: Row[] } {
  const rows = Array.from({ length: n }, (_, i) => ({ id: `${tag}-${i}`, prompt: `${tag} prompt ${i}` }))
  const file = join(mkdtempSync(join(scratch, "in-")), "rows.jsonl")
  writeFileSync(file, rows.map((r) => `${JSON.stringify(r)}\n`).join(""))
  return { file, rows }
}

async function runJob(spec: Record<string, unknown>): Promise<{ status: string; tasks: Task[] }> {
  const res = await p.call("POST", "/v1/jobs", spec)
  expect(res.status, JSON.stringify(res.json)).toBe(202)
  const id = res.json.id as string
  return until(
    `batch job ${id} to finish`,
    async () => {
      const j = (await p.call("GET", `/v1/jobs/${id}`)).json
      return ["SUCCEEDED", "FAILED", "CANCELLED"].includes(j.status) && j
    },
    90_000,
  )
}

/** Every line of every merged shard output. */
function merged(output: string, shards: number): OutLine[] {
  const files = readdirSync(output).filter((n) => /^shard-\d+\.jsonl$/.test(n))
  expect(files.sort()).toEqual(Array.from({ length: shards }, (_, i) => `shard-${i}.jsonl`).sort())
  return files.flatMap((f) =>
    readFileSync(join(output, f), "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as OutLine),
  )
}

/** Each row exactly once, answered with the echo of its prompt. */
function expectEveryRowOnce(lines: OutLine[], rows: Row[]) {
  expect(lines.map((l) => l.id).sort()).toEqual(rows.map((r) => r.id).sort())
  const prompt = new Map(rows.map((r) => [r.id, r.prompt]))
  const wrong = lines.filter(
    (l) => l.error !== null || l.response?.choices[0]?.message.content !== `echo: ${prompt.get(l.id)}`,
  )
  expect(wrong).toEqual([])
}

/** The prompts the replicas answered, with how many times each. */
async function answered(replicas: string[]): Promise<Map<string, number>> {
  const counts = new Map<string, number>()
  for (const url of replicas) {
    const prompts = (await fetch(`${url}/requests`).then((r) => r.json())) as string[]
    for (const prompt of prompts) counts.set(prompt, (counts.get(prompt) ?? 0) + 1)
  }
  return counts
}

describe("batch inference on the local control plane", { timeout: 120_000 }, () => {
  test("1,000 rows over 4 shards: every row once in the merged outputs, with the echo response", async () => {
    const { replicas } = await swarm("batch-echo")
    const { file, rows } = input(1000, "a")
    const output = join(scratch, "out-a")
    const job = await runJob({
      name: "infer",
      swarm: "batch-echo",
      tasks: 4,
      batch: { input: file, output, concurrency: 8, checkpointEvery: 50 },
    })
    expect(job.status).toBe("SUCCEEDED")
    expectEveryRowOnce(merged(output, 4), rows)
    // Both replicas served (through the router), and no row was asked twice.
    const counts = await answered(replicas)
    expect(counts.size).toBe(1000)
    expect([...counts.values()].every((n) => n === 1)).toBe(true)
    for (const url of replicas)
      expect(((await fetch(`${url}/requests`).then((r) => r.json())) as string[]).length).toBeGreaterThan(0)
    // The tasks reported their rows: done per shard adds up to the input.
    const progress = job.tasks.map((t) => t.attempts.at(-1)?.progress)
    expect(progress.every((pr) => pr && pr.done === pr.total && pr.failed === 0)).toBe(true)
    expect(progress.reduce((sum, pr) => sum + (pr?.done ?? 0), 0)).toBe(1000)

    // The same output again with changed prompts: refused, nothing sent, the old results untouched.
    const changed = join(mkdtempSync(join(scratch, "in-")), "rows.jsonl")
    writeFileSync(
      changed,
      rows.map((r) => `${JSON.stringify({ ...r, prompt: `changed ${r.prompt}` })}\n`).join(""),
    )
    const refused = await runJob({
      name: "rerun",
      swarm: "batch-echo",
      tasks: 4,
      maxRetriesFailure: 0,
      batch: { input: changed, output, concurrency: 8, checkpointEvery: 50 },
    })
    expect(refused.status).toBe("FAILED")
    const why = (refused.tasks as { attempts: { message?: string }[] }[]).map(
      (t) => t.attempts.at(-1)?.message ?? "",
    )
    expect(why.join("\n")).toMatch(
      /the output holds results of another input or request for shard \d: pass --overwrite to start it over there, or choose another --output \(input /,
    )
    expect([...(await answered(replicas)).keys()].filter((q) => q.startsWith("changed"))).toEqual([])
    expectEveryRowOnce(merged(output, 4), rows)
    await p.call("DELETE", "/v1/swarms/batch-echo")
  })

  test("a shard that crashes after 300 rows resumes on its second attempt without redoing done rows", async () => {
    const { replicas } = await swarm("batch-resume")
    const { file, rows } = input(1000, "b")
    const output = join(scratch, "out-b")
    const job = await runJob({
      name: "resume",
      swarm: "batch-resume",
      tasks: 2,
      maxRetriesFailure: 1,
      env: { SWARMPLANE_BATCH_FAIL_AFTER: "300" },
      batch: { input: file, output, concurrency: 8, checkpointEvery: 50 },
    })
    expect(job.status).toBe("SUCCEEDED")
    // Each shard (~500 rows) failed once at 300 (exit 3) and its second attempt finished it.
    for (const task of job.tasks) {
      expect(task.attempts.map((a) => [a.state, a.exitCode])).toEqual([
        ["FAILED", 3],
        ["SUCCEEDED", 0],
      ])
      const [first, second] = task.attempts
      const parts = readdirSync(join(output, `shard-${task.index}`)).filter((n) => n.startsWith("part-"))
      expect(parts.some((n) => n.startsWith(`part-${first?.attemptUid}-`))).toBe(true)
      expect(parts.some((n) => n.startsWith(`part-${second?.attemptUid}-`))).toBe(true)
      expect(second?.progress?.done).toBe(second?.progress?.total)
    }
    const lines = merged(output, 2)
    expectEveryRowOnce(lines, rows)

    // The rows the first attempts checkpointed were answered exactly once: never redone.
    const checkpointed = job.tasks.flatMap((task) => {
      const dir = join(output, `shard-${task.index}`)
      return readdirSync(dir)
        .filter((n) => n.startsWith(`part-${task.attempts[0]?.attemptUid}-`))
        .flatMap((n) =>
          readFileSync(join(dir, n), "utf8")
            .split("\n")
            .filter(Boolean)
            .map((l) => (JSON.parse(l) as OutLine).id),
        )
    })
    expect(checkpointed.length).toBeGreaterThanOrEqual(600)
    const counts = await answered(replicas)
    const prompt = new Map(rows.map((r) => [r.id, r.prompt]))
    expect(checkpointed.filter((id) => counts.get(prompt.get(id) ?? "") !== 1)).toEqual([])
    // Only rows not yet checkpointed at the crash were sent again, per shard: the buffer (at most a
    // part plus one row per worker, which blocks on a full buffer) and the requests in flight.
    const total = [...counts.values()].reduce((a, b) => a + b, 0)
    expect(total - 1000).toBeLessThanOrEqual(2 * (50 + 8 + 8))
    // The second attempts say how many rows they sent again (at most what the replicas saw again).
    const resent = job.tasks.reduce((n, t) => n + (t.attempts[1]?.progress?.resent ?? 0), 0)
    expect(resent).toBeGreaterThan(0)
    expect(resent).toBeLessThanOrEqual(total - 1000)
    await p.call("DELETE", "/v1/swarms/batch-resume")
  })

  test("a shard whose process is killed mid-run is retried by default and completes: every row once, rows re-sent reported", async () => {
    const { replicas } = await swarm("batch-kill", ["--delay-ms", "20"])
    const { file, rows } = input(1000, "k")
    const output = join(scratch, "out-k")
    const res = await p.call("POST", "/v1/jobs", {
      name: "killed",
      swarm: "batch-kill",
      tasks: 1,
      batch: { input: file, output, concurrency: 2, checkpointEvery: 50 },
    })
    expect(res.status, JSON.stringify(res.json)).toBe(202)
    expect(res.json.spec.maxRetriesFailure).toBe(3)
    const id = res.json.id as string
    // Kill the runner itself (not its agent) once it is well under way, as an OOM killer would.
    await until(
      "the shard to be under way",
      async () =>
        ((await p.call("GET", `/v1/jobs/${id}`)).json.tasks[0].attempts[0]?.progress?.done ?? 0) >= 200,
      60_000,
    )
    execFileSync("pkill", ["-KILL", "-f", `run-batch.*${output}`])
    const job = await until(
      `batch job ${id} to finish`,
      async () => {
        const j = (await p.call("GET", `/v1/jobs/${id}`)).json
        return ["SUCCEEDED", "FAILED", "CANCELLED"].includes(j.status) && j
      },
      90_000,
    )
    expect(job.status).toBe("SUCCEEDED")
    expect(job.tasks[0].attempts.map((a: { state: string }) => a.state)).toEqual(["FAILED", "SUCCEEDED"])
    expectEveryRowOnce(merged(output, 1), rows)
    const counts = await answered(replicas)
    const again = [...counts.values()].reduce((a, b) => a + b, 0) - 1000
    const resent = job.tasks[0].attempts[1].progress.resent ?? 0
    expect(resent).toBeGreaterThan(0)
    expect(resent).toBeLessThanOrEqual(again)
    await p.call("DELETE", "/v1/swarms/batch-kill")
  })

  test("with the endpoint failing 10% of requests (429 and 500), every row completes and retries are counted", async () => {
    const { replicas } = await swarm("batch-flaky", ["--fail-rate", "0.1"])
    const { file, rows } = input(1000, "c")
    const output = join(scratch, "out-c")
    const job = await runJob({
      name: "flaky",
      swarm: "batch-flaky",
      tasks: 4,
      batch: { input: file, output, concurrency: 8, maxRetries: 10 },
    })
    expect(job.status).toBe("SUCCEEDED")
    expectEveryRowOnce(merged(output, 4), rows)
    const counts = await answered(replicas)
    expect(counts.size).toBe(1000)
    // ~10% of ~1,100 tries failed and were retried; the tasks reported them.
    const retries = job.tasks.reduce((sum, t) => sum + (t.attempts.at(-1)?.progress?.retries ?? 0), 0)
    expect(retries).toBeGreaterThan(40)
    expect(retries).toBeLessThan(250)
    const shardProgress = job.tasks.map((t) =>
      JSON.parse(readFileSync(join(output, `shard-${t.index}`, "progress.json"), "utf8")),
    )
    expect(shardProgress.reduce((sum, pr) => sum + pr.retries, 0)).toBe(retries)
    await p.call("DELETE", "/v1/swarms/batch-flaky")
  })
})
