/**
 * From submission to a running process on the local control plane (`npm start`'s, started in this
 * process): 200 one-task `true` jobs on a `workers` backend with two real agents (as the local backend
 * has: a heartbeat every second, 8 CPUs each), for agents that heartbeat at the interval only (the
 * baseline, `--heartbeat-wait 0`) and agents whose heartbeat is held until work is placed on them (the
 * long-poll), the latter also without namespaces (`--isolation none`: what a sandboxed start costs
 * in processes: unshare, its shell and mounts, on top of the attempt and its watcher). Each task's `submitted → RUNNING` is its attempt's `startedAt` (when the control plane
 * applied the RUNNING report) less its job's `createdAt`; "all done" runs from the first submission to
 * the last job's `finishedAt`.
 *
 * `npm run bench -- latency` (`--jobs N` with `npx tsx bench/latency.ts`).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { mapLimit } from "@swarmplane/core/util/concurrency"
import { type BenchPlane, Latencies, numberArgs, startBenchPlane, until } from "./local-plane"
import { record, table } from "./util"

const agentBin = join(import.meta.dirname, "..", "packages", "agent", "bin", "swarmplane-agent.mjs")

interface Mode {
  name: string
  /** Its key in the results file. */
  key: string
  /** The agents' `--heartbeat-wait`. */
  waitS: number
  /** The agents' `--isolation` (default `auto`: namespaces where `unshare` works). */
  isolation?: "none"
}

const modes: Mode[] = [
  { name: "heartbeat at the interval (baseline)", key: "baseline", waitS: 0 },
  { name: "held heartbeat (long-poll)", key: "longPoll", waitS: 20 },
  // What starting a sandboxed attempt costs: unshare, its shell and mounts per attempt.
  { name: "held heartbeat, no namespaces", key: "longPollNoNamespaces", waitS: 20, isolation: "none" },
]

interface Result {
  /** One job at a time: submitted → RUNNING and placed → RUNNING, p50 / p99 ms. */
  single: string
  singleStarted: string
  /** The burst: submitted → placed and placed → RUNNING, p50 / p99 ms. */
  placed: string
  started: string
  p50: number
  p99: number
  allDoneS: number
  succeeded: number
}

/** Two agents on a fresh backend, as the local backend runs them; returns them once both are healthy. */
async function startAgents(
  p: BenchPlane,
  backendId: string,
  mode: Mode,
  stateDir: string,
): Promise<ChildProcess[]> {
  const made = await p.call(
    "POST",
    "/v1/backends",
    { id: backendId, config: { type: "workers", heartbeatIntervalS: 1, heartbeatGraceS: 15 } },
    { key: p.plane.adminKey, route: "setup" },
  )
  if (made.status !== 201)
    throw new Error(`backend ${backendId}: ${made.status} ${JSON.stringify(made.json)}`)
  const workerKey = (
    await p.plane.runtime.repos.projects.createKey(p.plane.runtime.operatorProject, "worker", {
      name: `bench ${backendId}`,
    })
  ).key
  const agents = [0, 1].map((i) => {
    const child = spawn(
      process.execPath,
      [
        agentBin,
        "worker",
        ...["--api", p.url, "--backend", backendId, "--name", `${backendId}-${i}`],
        ...["--cpu", "8", "--memory-mib", "16384", "--state-dir", join(stateDir, backendId)],
        ...["--heartbeat-wait", String(mode.waitS), "--token-file", "-"],
        ...(mode.isolation ? ["--isolation", mode.isolation] : []),
      ],
      {
        stdio: ["pipe", "ignore", "pipe"],
        env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "" },
      },
    )
    child.stdin?.end(`${workerKey}\n`)
    let err = ""
    child.stderr?.on("data", (c: Buffer) => (err = (err + c.toString()).slice(-2000)))
    child.once("exit", (code) => {
      if (code) p.watch.errors.push(`agent ${backendId}-${i} exited ${code}: ${err}`)
    })
    return child
  })
  await until(
    `2 healthy workers on ${backendId}`,
    async () => {
      const items = (await p.call("GET", `/v1/workers?backendId=${backendId}`, undefined, { route: "setup" }))
        .json.items as { health: string }[]
      return items.filter((w) => w.health === "healthy").length === 2
    },
    30_000,
  )
  return agents
}

async function stopAgents(agents: ChildProcess[]): Promise<void> {
  await Promise.all(
    agents.map(
      (a) =>
        new Promise<void>((resolve) => {
          if (a.exitCode !== null) return resolve()
          const timer = setTimeout(() => a.kill("SIGKILL"), 10_000)
          a.once("exit", () => {
            clearTimeout(timer)
            resolve()
          })
          a.kill("SIGTERM")
        }),
    ),
  )
}

/** A job as `GET /v1/jobs/{id}` shows it, with what this bench reads. */
interface JobView {
  status: string
  createdAt: string
  updatedAt: string
  finishedAt?: string
  tasks: { attempts: { createdAt: string; startedAt?: string }[] }[]
}

async function getJob(p: BenchPlane, id: string): Promise<JobView> {
  const res = await p.call("GET", `/v1/jobs/${id}`, undefined, { route: "poll" })
  if (res.status !== 200) throw new Error(`GET job ${id}: ${res.status} ${JSON.stringify(res.json)}`)
  return res.json
}

/** Each task's first attempt: submitted → placed, placed → RUNNING, submitted → RUNNING, in ms. */
function addTimes(latencies: Latencies, job: JobView): void {
  for (const task of job.tasks) {
    const first = task.attempts.find((a) => a.startedAt)
    if (!first?.startedAt) continue
    latencies.add("run", Date.parse(first.startedAt) - Date.parse(job.createdAt))
    latencies.add("placed", Date.parse(first.createdAt) - Date.parse(job.createdAt))
    latencies.add("started", Date.parse(first.startedAt) - Date.parse(first.createdAt))
  }
}

async function submit(p: BenchPlane, backendId: string): Promise<string> {
  const res = await p.call("POST", "/v1/jobs", { backendId, command: ["true"] }, { route: "submit" })
  if (res.status !== 202) throw new Error(`submit: ${res.status} ${JSON.stringify(res.json)}`)
  return res.json.id as string
}

async function run(
  p: BenchPlane,
  mode: Mode,
  index: number,
  counts: { jobs: number; single: number },
  stateDir: string,
): Promise<Result> {
  const backendId = `latency-${index}`
  const agents = await startAgents(p, backendId, mode, stateDir)
  try {
    // 1. One job at a time on idle agents: how long new work waits for its agent.
    const single = new Latencies()
    for (let i = 0; i < counts.single; i++) {
      const id = await submit(p, backendId)
      const job = await until(
        `job ${id} to finish (${mode.name})`,
        async () => {
          const j = await getJob(p, id)
          return j.finishedAt !== undefined && j
        },
        60_000,
        50,
      )
      addTimes(single, job)
    }
    // 2. A burst of jobs: 16 run at once on the two agents, the rest wait for their turn.
    const started = Date.now()
    const ids = await mapLimit(
      Array.from({ length: counts.jobs }, (_, i) => i),
      8,
      () => submit(p, backendId),
    )
    // Jobs end about in the order they were submitted: look at the oldest open ones only.
    const open = [...ids]
    await until(
      `${counts.jobs} jobs on ${backendId} to finish`,
      async () => {
        const looked = await mapLimit(open.slice(0, 8), 8, (id) => getJob(p, id))
        const done = new Set(open.slice(0, 8).filter((_, i) => looked[i]!.finishedAt !== undefined))
        open.splice(0, open.length, ...open.filter((id) => !done.has(id)))
        return open.length === 0
      },
      600_000,
      250,
    )
    const burst = new Latencies()
    let lastFinished = started
    let succeeded = 0
    await mapLimit(ids, 8, async (id) => {
      const job = await getJob(p, id)
      if (job.status === "SUCCEEDED") succeeded++
      lastFinished = Math.max(lastFinished, Date.parse(job.finishedAt ?? job.updatedAt))
      addTimes(burst, job)
    })
    return {
      single: single.text("run"),
      singleStarted: single.text("started"),
      placed: burst.text("placed"),
      started: burst.text("started"),
      p50: burst.percentile("run", 50) ?? Number.NaN,
      p99: burst.percentile("run", 99) ?? Number.NaN,
      allDoneS: (lastFinished - started) / 1000,
      succeeded,
    }
  } finally {
    await stopAgents(agents)
  }
}

export async function main(argv: string[] = []): Promise<void> {
  const { jobs, single } = numberArgs(argv, { jobs: 200, single: 20 })
  const p = await startBenchPlane({ localBackend: false, keys: 8 })
  const stateDir = mkdtempSync(join(tmpdir(), "swarmplane-latency-agents-"))
  try {
    const results: Result[] = []
    for (const [i, mode] of modes.entries()) results.push(await run(p, mode, i, { jobs, single }, stateDir))
    const base = results[0]!
    const ratio = (i: number, of: (r: Result) => number) =>
      i === 0 ? "1.0" : (of(base) / of(results[i]!)).toFixed(1)
    const p50Of = (text: string) => Number(text.split(" / ")[0])
    console.log(
      `\nsubmitted → RUNNING on the local control plane, 2 agents (heartbeat 1 s), one-task \`true\` jobs, one at a time\n${table(
        ["agents", "jobs", "submitted→RUNNING p50 / p99 ms", "placed → RUNNING", "p50 ×"],
        results.map((r, i) => [
          modes[i]!.name,
          String(single),
          r.single,
          r.singleStarted,
          ratio(i, (x) => p50Of(x.single)),
        ]),
      )}`,
    )
    console.log(
      `\n${jobs} submitted at once (16 run at a time: 8 CPUs per agent)\n${table(
        [
          "agents",
          "succeeded",
          "submitted→RUNNING p50 / p99 ms",
          "→ placed",
          "placed → RUNNING",
          "all done s",
          "p50 ×",
          "all done ×",
        ],
        results.map((r, i) => [
          modes[i]!.name,
          `${r.succeeded}/${jobs}`,
          `${Math.round(r.p50)} / ${Math.round(r.p99)}`,
          r.placed,
          r.started,
          r.allDoneS.toFixed(1),
          ratio(i, (x) => x.p50),
          ratio(i, (x) => x.allDoneS),
        ]),
      )}`,
    )
    record({
      latency: Object.fromEntries(
        results.map((r, i) => [
          modes[i]!.key,
          {
            single: { jobs: single, submittedToRunningMs: r.single, placedToRunningMs: r.singleStarted },
            burst: { jobs, p50Ms: r.p50, p99Ms: r.p99, allDoneS: r.allDoneS, succeeded: r.succeeded },
          },
        ]),
      ),
    })
    if (p.watch.errors.length) console.log(`problems: ${p.watch.errors.slice(0, 5).join("; ")}`)
  } finally {
    await p.stop()
    rmSync(stateDir, { recursive: true, force: true })
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main(process.argv.slice(2))
