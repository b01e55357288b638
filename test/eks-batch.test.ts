/**
 * Batch inference on the `eks` backend end to end, against the fake EKS cluster (whose kubelet runs
 * each pod's container as a local process): an echo swarm served by a Deployment and a Service, and a
 * batch job whose shards are Kueue-admitted Jobs running the agent's batch runner (the backend's
 * `agentCommand` is how the job's image runs the agent; here, Node and the repo's agent), calling the
 * swarm at the Service's address. One shard's container is killed mid-run (SIGKILL, as the OOM killer
 * or a lost node would end it): its pod fails, and with it the attempt's Job (`backoffLimit: 0`);
 * swarmplane retries that task as a new attempt, whose runner resumes from the killed one's
 * checkpoints, and every row is in the output once. The shards' progress counters, which the backend
 * reads from their pods' logs, show while the job runs and add up to the rows at its end.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, expect, test } from "vitest"
import { type EksPlane, eksPlane } from "./support/eks-plane"
import { Types } from "./support/fake-kube"
import { agentBin, until } from "./support/plane"

const ns = "team-a"
let e: EksPlane
const scratch = mkdtempSync(join(tmpdir(), "swarmplane-eks-batch-"))

beforeAll(async () => {
  e = await eksPlane({
    namespaces: [ns],
    clusterQueues: [
      { name: "cq", flavors: [{ name: "default-flavor", nominalQuota: { cpu: 16, memory: "64Gi" } }] },
    ],
    localQueues: [{ namespace: ns, name: "user-queue", clusterQueue: "cq" }],
  })
  await e.register("eks-batch", { agentCommand: [process.execPath, agentBin] })
}, 60_000)

afterAll(async () => {
  await e?.stop()
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

/**
 * The local process that runs an attempt's container: among the fake kubelet's processes, the one
 * whose environment has the attempt's `ATTEMPT_UID` (each container is one process group of its own).
 */
function containerProcessOf(attemptUid: string): number | undefined {
  return e.fake.livePids().find((pid) => {
    try {
      return readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").includes(`ATTEMPT_UID=${attemptUid}`)
    } catch {
      return false // ended meanwhile
    }
  })
}

test("batch inference on EKS: 1,000 rows over 4 shards, each once, after one shard's container is killed mid-run; progress shows as it runs", {
  timeout: 180_000,
}, async () => {
  const swarm = await e.p.call("POST", "/v1/swarms", {
    backendId: "eks-batch",
    name: "eks-batch-echo",
    model: "echo",
    replicas: 1,
  })
  expect([200, 201, 202], JSON.stringify(swarm.json)).toContain(swarm.status)

  // Long prompts and one request in flight per shard keep each shard running long enough to be killed
  // between its first checkpoint and its end.
  const pad = "x".repeat(4_000)
  const rows = Array.from({ length: 1000 }, (_, i) => ({ id: `k-${i}`, prompt: `eks prompt ${i} ${pad}` }))
  const input = join(scratch, "rows.jsonl")
  writeFileSync(input, rows.map((r) => `${JSON.stringify(r)}\n`).join(""))
  const out = join(scratch, "out")
  // Submitted while the swarm may still start: the tasks wait for it rather than run without an endpoint.
  const id = await e.submit("eks-batch", {
    swarm: "eks-batch-echo",
    tasks: 4,
    batch: { input, output: out, concurrency: 1, checkpointEvery: 10 },
  })
  // Watched from the start: the first time rows show as done, or the job's end if it comes first.
  const whileRunning = until(
    "the job's progress to show, or its end",
    async () => {
      const j = await e.job(id)
      const done = rowsDone(j)
      return (done > 0 || ended(j.status)) && { done, status: j.status as string }
    },
    150_000,
  )
  whileRunning.catch(() => {}) // awaited below; not an unhandled rejection meanwhile

  // Shard 0's first attempt, once its Job is known and it has checkpointed rows.
  const first = await until(
    "shard 0 to checkpoint rows",
    async () => {
      const a: Attempt | undefined = (await e.job(id)).tasks[0].attempts[0]
      return a?.target !== undefined && checkpointed(out, 0, a.attemptUid).length > 0 && a
    },
    90_000,
  )
  // The shard's Job runs the batch runner the way the backend says its image runs the agent, against
  // the swarm at its Service's address, and is told to print its progress to its log.
  const kubeJob = e.fake.object(Types.jobs, ns, first.target!) as {
    spec: {
      template: { spec: { containers: { command: string[]; env: { name: string; value: string }[] }[] } }
    }
  }
  const [container] = kubeJob.spec.template.spec.containers
  expect(container!.command.slice(0, 3)).toEqual([process.execPath, agentBin, "run-batch"])
  const env = Object.fromEntries(container!.env.map((v) => [v.name, v.value]))
  const swarmUrl = (await e.p.call("GET", "/v1/swarms/eks-batch-echo")).json.url
  expect(swarmUrl).toBeTruthy()
  expect(env).toMatchObject({ SWARM_ENDPOINT: swarmUrl, SWARMPLANE_PROGRESS_STDOUT: "1", SHARD_ID: "0" })

  // The kill must land mid-run for this test to mean anything: the container must still be there.
  const pid = containerProcessOf(first.attemptUid)
  expect(pid, "shard 0's container process, still running").toBeDefined()
  process.kill(-pid!, "SIGKILL")

  const done = await e.finished(id, 120_000)
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

  expect((await e.p.call("DELETE", "/v1/swarms/eks-batch-echo")).status).toBe(202)
  expect(e.fake.controllerErrors).toEqual([])
})
