/**
 * Soak: the local control plane (`npm start`'s, in this process, with its embedded dynalite, fauxqs,
 * timers and local worker agents) through rounds of load. Each round submits small jobs (which the
 * local agents run), submits a large job and cancels it once it runs, waits for both to end, reads
 * jobs and events, then takes the process's memory after a full garbage collection. All along, probes
 * time `/v1/me` (every 100 ms) and a worker's heartbeat (every 500 ms) by phase: while the large job is
 * submitted, while its cancel runs, and otherwise; the table shows what a user and an agent see.
 *
 * Fails (exit 1) when RSS after the last round is more than `--max-growth-mb` above RSS after the
 * first (memory that is never given back), or a job was lost, or a worker missed its heartbeat grace.
 *
 * First, the long crash-anywhere run (bench/faults.ts: `--fault-seeds` seeds of `--fault-jobs` jobs
 * through the control plane under injected faults, each checked against every invariant); any
 * violation fails the soak. `--fault-seeds 0` skips it.
 *
 * `npm run soak` (4 fault seeds of 400 jobs, then 3 rounds of 10 small jobs and a 1,500-task cancel:
 * about 3 minutes), or larger: `npm run soak -- --fault-seeds 10 --rounds 4 --jobs 40 --tasks 10000`.
 */

import { runFaultSoak } from "./faults"
import {
  type BenchPlane,
  Latencies,
  numberArgs,
  probeWorker,
  settledMemory,
  startBenchPlane,
  until,
} from "./local-plane"
import { table } from "./util"

const options = numberArgs(process.argv.slice(2), {
  /** Rounds of load. */
  rounds: 3,
  /** Small jobs (2 tasks each, `true`) per round. */
  jobs: 10,
  /** Tasks of the large job cancelled in each round. */
  tasks: 1500,
  /** RSS the last round may end above the first, MB. */
  "max-growth-mb": 150,
  /** How long a cancel or the small jobs may take, s. */
  "timeout-s": 180,
  /** Seeds of the crash-anywhere run before the rounds (0: none). */
  "fault-seeds": 4,
  /** Jobs per seed of that run. */
  "fault-jobs": 400,
})

const Ended = ["SUCCEEDED", "FAILED", "CANCELLED"]
const SubmitConcurrency = 8

interface Round {
  seconds: number
  rssMb: number
  heapMb: number
  externalMb: number
  latencies: Latencies
  cancelAnswerMs: number
  cancelledInS: number
  lost: number
  failed: number
}

/** Run `fn` over `items`, `limit` at once. */
async function inBatches<T, R>(items: T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = []
  for (let i = 0; i < items.length; i += limit)
    out.push(...(await Promise.all(items.slice(i, i + limit).map(fn))))
  return out
}

async function round(p: BenchPlane, phase: { name: string }): Promise<Round> {
  const started = Date.now()
  const timeoutMs = options["timeout-s"] * 1000
  p.latencies = new Latencies()
  phase.name = "steady"
  // What a user sees all along: `/v1/me` every 100 ms, timed under the phase of the round.
  let probing = true
  const probe = (async () => {
    while (probing) {
      await p.call("GET", "/v1/me", undefined, { route: `GET /v1/me (${phase.name})` })
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  })()

  // 1. Small jobs the local agents run, and a large one they start on.
  const small = await inBatches(
    Array.from({ length: options.jobs }, (_, i) => i),
    SubmitConcurrency,
    async (i) => {
      const res = await p.call(
        "POST",
        "/v1/jobs",
        {
          command: ["true"],
          tasks: 2,
          name: `soak-${i}`,
          backendId: "local",
          resources: { cpu: 0.5, memoryMiB: 64 },
        },
        { route: "POST /v1/jobs" },
      )
      if (res.status !== 202) throw new Error(`submit: ${res.status} ${JSON.stringify(res.json)}`)
      return res.json.id as string
    },
  )
  phase.name = "submit"
  const big = await p.call(
    "POST",
    "/v1/jobs",
    {
      command: ["sleep", "600"],
      tasks: options.tasks,
      name: "soak-big",
      backendId: "local",
      resources: { cpu: 1, memoryMiB: 64 },
    },
    { route: "POST /v1/jobs (large)" },
  )
  phase.name = "steady"
  if (big.status !== 202) throw new Error(`submit large: ${big.status} ${JSON.stringify(big.json)}`)
  const bigId = big.json.id as string
  const job = (route: string) => async () =>
    (await p.call("GET", `/v1/jobs/${bigId}`, undefined, { route })).json
  await until(
    "the large job to run",
    async () => (await job("GET /v1/jobs/{id}")()).status === "RUNNING",
    60_000,
    500,
  )

  // 2. Cancel it, and time what a user and an agent see until it is CANCELLED.
  phase.name = "cancel"
  const cancel = await p.call("POST", `/v1/jobs/${bigId}/cancel`, undefined, { route: "cancel" })
  if (cancel.status !== 202) throw new Error(`cancel: ${cancel.status} ${JSON.stringify(cancel.json)}`)
  const cancelStarted = Date.now()
  const cancelled = await until(
    "the large job to be CANCELLED",
    async () => {
      const now = await job("GET /v1/jobs/{id} (cancel)")()
      return Ended.includes(now.status) && now
    },
    timeoutMs,
    500,
  )
  const cancelledInS = (Date.now() - cancelStarted) / 1000
  phase.name = "steady"
  if (cancelled.status !== "CANCELLED" || cancelled.counts.KILLED !== options.tasks)
    throw new Error(`the large job ended ${cancelled.status} with ${JSON.stringify(cancelled.counts)}`)

  // 3. The small jobs end; every one is found.
  const ends = await until(
    "the small jobs to end",
    async () => {
      const seen = await inBatches(small, SubmitConcurrency, async (id) => {
        const res = await p.call("GET", `/v1/jobs/${id}`, undefined, { route: "GET /v1/jobs/{id}" })
        return res.status === 404 ? "lost" : (res.json.status as string)
      })
      return seen.every((s) => s === "lost" || Ended.includes(s)) && seen
    },
    timeoutMs,
    1000,
  )

  // 4. Reads: the job list and some events.
  for (let i = 0; i < 10; i++) await p.call("GET", "/v1/jobs?limit=100", undefined, { route: "GET /v1/jobs" })
  for (const id of small.slice(0, 10))
    await p.call("GET", `/v1/jobs/${id}/events`, undefined, { route: "GET /v1/jobs/{id}/events" })

  probing = false
  await probe
  const memory = await settledMemory()
  return {
    seconds: (Date.now() - started) / 1000,
    ...memory,
    latencies: p.latencies,
    cancelAnswerMs: cancel.ms,
    cancelledInS,
    lost: ends.filter((s) => s === "lost").length,
    failed: ends.filter((s) => s !== "lost" && s !== "SUCCEEDED").length,
  }
}

async function main(): Promise<number> {
  if (options["fault-seeds"] > 0) {
    const faults = await runFaultSoak({ seeds: options["fault-seeds"], jobs: options["fault-jobs"] })
    console.log(
      `crash anywhere: ${faults.jobs} jobs, ${faults.faults} faults injected, ${faults.unexpected} violations\n`,
    )
    if (!faults.ok) {
      console.error("soak failed: the crash-anywhere run broke an invariant (its story is above)")
      return 1
    }
  }
  const p = await startBenchPlane()
  const phase = { name: "steady" }
  const stopProbe = await probeWorker(p, () => `heartbeat (${phase.name})`)
  const start = await settledMemory()
  console.log(
    `soak: ${options.rounds} rounds of ${options.jobs} small jobs and a ${options.tasks}-task job cancelled, on the local control plane; RSS at start ${start.rssMb} MB (heap ${start.heapMb} MB)`,
  )
  const rounds: Round[] = []
  try {
    for (let i = 0; i < options.rounds; i++) {
      rounds.push(await round(p, phase))
      const r = rounds.at(-1)!
      console.log(`round ${i + 1}: ${r.seconds.toFixed(0)} s, RSS ${r.rssMb} MB, heap ${r.heapMb} MB`)
    }
  } finally {
    await stopProbe()
    await p.stop()
  }
  console.log(
    `\n${table(
      [
        "round",
        "took s",
        "RSS MB",
        "heap MB",
        "external MB",
        "POST /v1/jobs p50/p99 ms",
        "large job submitted ms",
        "/v1/me meanwhile p99 ms",
        "heartbeat meanwhile p99 ms",
        "cancel answered ms",
        "CANCELLED after s",
        "/v1/me during cancel p50/p99 ms",
        "heartbeat during cancel p50/p99 ms",
        "/v1/me otherwise p50/p99 ms",
        "heartbeat otherwise p50/p99 ms",
        "jobs lost/failed",
      ],
      rounds.map((r, i) => [
        String(i + 1),
        r.seconds.toFixed(0),
        String(r.rssMb),
        String(r.heapMb),
        String(r.externalMb),
        r.latencies.text("POST /v1/jobs"),
        String(Math.round(r.latencies.percentile("POST /v1/jobs (large)", 100) ?? 0)),
        String(Math.round(r.latencies.percentile("GET /v1/me (submit)", 99) ?? 0)),
        String(Math.round(r.latencies.percentile("heartbeat (submit)", 99) ?? 0)),
        r.cancelAnswerMs.toFixed(0),
        r.cancelledInS.toFixed(1),
        r.latencies.text("GET /v1/me (cancel)"),
        r.latencies.text("heartbeat (cancel)"),
        r.latencies.text("GET /v1/me (steady)"),
        r.latencies.text("heartbeat (steady)"),
        `${r.lost}/${r.failed}`,
      ]),
    )}`,
  )
  const problems: string[] = []
  const growth = rounds.at(-1)!.rssMb - rounds[0]!.rssMb
  if (growth > options["max-growth-mb"])
    problems.push(
      `RSS grew ${growth} MB from round 1 to round ${rounds.length} (more than --max-growth-mb ${options["max-growth-mb"]})`,
    )
  const lost = rounds.reduce((n, r) => n + r.lost, 0)
  if (lost) problems.push(`${lost} job(s) lost`)
  if (p.watch.dead) problems.push(`${p.watch.dead} worker(s) declared dead after missing heartbeats`)
  console.log(
    `\nRSS from round 1 to ${rounds.length}: ${growth >= 0 ? "+" : ""}${growth} MB; workers suspect ${p.watch.suspect}, dead ${p.watch.dead}${p.watch.workers.length ? ` (${p.watch.workers.join("; ")})` : ""}${p.watch.errors.length ? `; the plane warned: ${p.watch.errors.slice(0, 5).join(" | ")}` : ""}`,
  )
  for (const problem of problems) console.error(`soak failed: ${problem}`)
  return problems.length ? 1 : 0
}

process.exit(await main())
