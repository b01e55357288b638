/**
 * Load: a bounded run of submissions and reads against the local control plane (`npm start`'s, in this
 * process), with a swarm of the echo model serving and the local worker agents heartbeating and
 * running the jobs. The load comes from autocannon in a child process (so the client's work is not on
 * the plane's event loop, nor in its memory), one instance per route, each at a fixed rate, requests
 * spread over several write keys (each key has its own rate limit, as each user would):
 *
 *   POST /v1/jobs               one-task jobs (`true`) on the local backend
 *   GET /v1/jobs, /v1/jobs/{id} the job list, and the jobs just submitted
 *   GET /v1/me                  who-am-I
 *   swarm                       chat completions through the swarm's endpoint
 *
 * and, in this process, a probe worker times its heartbeats. After the run, every job submitted is
 * looked up until it has ended. Reports requests, errors and p50/p99 per route, jobs submitted, found
 * and ended, workers declared dead, and RSS before and after; exits 1 on any error, lost or unfinished
 * job, or dead worker.
 *
 * `npm run load`, or `npm run load -- --seconds 60 --submit-rate 20 --read-rate 40`.
 */
import { fork } from "node:child_process"
import { fileURLToPath } from "node:url"
import type { Result } from "autocannon"
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

/** Set in the forked client: what to load, as JSON `ClientPlan`. */
const ClientVariable = "SWARMPLANE_BENCH_LOAD_CLIENT"

interface ClientPlan {
  api: string
  swarmUrl: string
  keys: string[]
  seconds: number
  submitRate: number
  readRate: number
}

interface RouteResult {
  route: string
  requests: number
  errors: number
  statusCodes: Record<string, number>
  p50: number
  p99: number
  max: number
}

interface ClientReport {
  routes: RouteResult[]
  /** Ids of the jobs the API accepted. */
  submitted: string[]
}

/** The client: one autocannon instance per route, side by side, for the plan's duration. */
async function client(plan: ClientPlan): Promise<ClientReport> {
  const { default: autocannon } = await import("autocannon")
  const submitted: string[] = []
  let next = 0
  const withKey = (request: { headers?: Record<string, string> }) => {
    request.headers = {
      ...request.headers,
      authorization: `Bearer ${plan.keys[next++ % plan.keys.length]}`,
    }
    return request
  }
  const common = { duration: plan.seconds, timeout: 30 }
  const run = async (route: string, options: Parameters<typeof autocannon>[0]): Promise<RouteResult> => {
    const result: Result = await autocannon({ ...common, ...options })
    const statusCodes = Object.fromEntries(
      Object.entries(result.statusCodeStats).map(([code, s]) => [code, s.count]),
    )
    return {
      route,
      requests: result.requests.total,
      errors: result.errors + result.timeouts + result.non2xx,
      statusCodes,
      p50: result.latency.p50,
      p99: result.latency.p99,
      max: result.latency.max,
    }
  }
  const job = JSON.stringify({
    command: ["true"],
    tasks: 1,
    backendId: "local",
    resources: { cpu: 0.25, memoryMiB: 32 },
  })
  const routes = await Promise.all([
    run("POST /v1/jobs", {
      url: plan.api,
      connections: 8,
      overallRate: plan.submitRate,
      requests: [
        {
          method: "POST",
          path: "/v1/jobs",
          headers: { "content-type": "application/json" },
          body: job,
          setupRequest: withKey,
          onResponse: (status, body) => {
            if (status === 202) submitted.push(JSON.parse(body).id)
          },
        },
      ],
    }),
    run("GET /v1/jobs?limit=20", {
      url: plan.api,
      connections: 2,
      overallRate: plan.readRate / 2,
      requests: [{ method: "GET", path: "/v1/jobs?limit=20", setupRequest: withKey }],
    }),
    run("GET /v1/jobs/{id}", {
      url: plan.api,
      connections: 2,
      overallRate: plan.readRate / 2,
      requests: [
        {
          method: "GET",
          setupRequest: (request) => {
            const id = submitted[Math.floor(Math.random() * submitted.length)]
            request.path = id ? `/v1/jobs/${id}` : "/v1/me"
            return withKey(request)
          },
        },
      ],
    }),
    run("GET /v1/me", {
      url: plan.api,
      connections: 1,
      overallRate: 10,
      requests: [{ method: "GET", path: "/v1/me", setupRequest: withKey }],
    }),
    run("swarm chat completion", {
      url: plan.swarmUrl,
      connections: 2,
      overallRate: 20,
      requests: [
        {
          method: "POST",
          path: "/v1/chat/completions",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: "echo", messages: [{ role: "user", content: "hello" }] }),
        },
      ],
    }),
  ])
  return { routes, submitted }
}

/** Run the client in a child process and take its report. */
function runClient(plan: ClientPlan): Promise<ClientReport> {
  const child = fork(fileURLToPath(import.meta.url), [], {
    env: { ...process.env, [ClientVariable]: JSON.stringify(plan) },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  })
  return new Promise((resolve, reject) => {
    child.once("message", (report) => resolve(report as ClientReport))
    child.once("exit", (code) =>
      reject(new Error(`the load client exited with code ${code} before reporting`)),
    )
  })
}

/** A swarm of the echo model on the local backend, serving: its endpoint. */
async function echoSwarm(p: BenchPlane): Promise<string> {
  const made = await p.call("POST", "/v1/swarms", {
    name: "load",
    model: "echo",
    replicas: 2,
    backendId: "local",
  })
  if (made.status !== 202) throw new Error(`swarm: ${made.status} ${JSON.stringify(made.json)}`)
  return until(
    "the echo swarm to serve",
    async () => {
      const swarm = (await p.call("GET", "/v1/swarms/load", undefined, { route: "setup" })).json
      return swarm.phase === "RUNNING" && swarm.url
    },
    120_000,
    500,
  )
}

/** Every job's status, read until each has ended or `timeoutMs` passed; 404 is a lost job. */
async function outcomes(p: BenchPlane, ids: string[], timeoutMs: number): Promise<Map<string, string>> {
  const status = new Map<string, string>()
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const open = ids.filter(
      (id) => !["SUCCEEDED", "FAILED", "CANCELLED", "lost"].includes(status.get(id) ?? ""),
    )
    for (let i = 0; i < open.length; i += 8)
      await Promise.all(
        open.slice(i, i + 8).map(async (id) => {
          const res = await p.call("GET", `/v1/jobs/${id}`, undefined, { route: "drain" })
          status.set(id, res.status === 404 ? "lost" : res.json.status)
        }),
      )
    if (!open.length || Date.now() > deadline) return status
    await new Promise((resolve) => setTimeout(resolve, 1000))
  }
}

async function main(): Promise<number> {
  const options = numberArgs(process.argv.slice(2), {
    /** How long the load runs, s. */
    seconds: 60,
    /** Job submissions per second. */
    "submit-rate": 20,
    /** Reads (job list and job details) per second. */
    "read-rate": 40,
    /** How long the submitted jobs may take to end after the load, s. */
    "drain-s": 180,
  })
  const p = await startBenchPlane({ keys: 32 })
  const stopProbe = await probeWorker(p)
  try {
    const swarmUrl = await echoSwarm(p)
    const before = await settledMemory()
    console.log(
      `load: ${options.seconds} s on the local control plane, ${options["submit-rate"]} jobs/s and ${options["read-rate"]} reads/s, an echo swarm serving; RSS before ${before.rssMb} MB`,
    )
    p.latencies = new Latencies()
    let peakRssMb = before.rssMb
    const sampler = setInterval(() => {
      peakRssMb = Math.max(peakRssMb, Math.round(process.memoryUsage().rss / 1024 / 1024))
    }, 1000)
    const report = await runClient({
      api: p.url,
      swarmUrl,
      keys: p.keys,
      seconds: options.seconds,
      submitRate: options["submit-rate"],
      readRate: options["read-rate"],
    })
    clearInterval(sampler)
    const heartbeats = p.latencies
    const ended = await outcomes(p, report.submitted, options["drain-s"] * 1000)
    const after = await settledMemory()
    const count = (s: string) => [...ended.values()].filter((v) => v === s).length
    const lost = count("lost")
    const succeeded = count("SUCCEEDED")
    const unfinished = report.submitted.length - lost - succeeded - count("FAILED") - count("CANCELLED")

    console.log(
      `\n${table(
        ["route", "requests", "errors", "p50 ms", "p99 ms", "max ms"],
        [
          ...report.routes.map((r) => [
            r.route,
            String(r.requests),
            r.errors ? `${r.errors} (${JSON.stringify(r.statusCodes)})` : "0",
            String(r.p50),
            String(r.p99),
            String(r.max),
          ]),
          [
            "heartbeat (probe worker)",
            String(heartbeats.count("heartbeat")),
            "0",
            String(Math.round(heartbeats.percentile("heartbeat", 50) ?? 0)),
            String(Math.round(heartbeats.percentile("heartbeat", 99) ?? 0)),
            String(Math.round(heartbeats.percentile("heartbeat", 100) ?? 0)),
          ],
        ],
      )}`,
    )
    console.log(
      `\njobs: ${report.submitted.length} submitted, ${report.submitted.length - lost} found, ${succeeded} SUCCEEDED, ${count("FAILED")} FAILED, ${unfinished} not ended after ${options["drain-s"]} s, ${lost} lost`,
    )
    console.log(
      `workers: ${p.watch.dead} declared dead after missing heartbeats, ${p.watch.suspect} went suspect${p.watch.workers.length ? ` (${p.watch.workers.join("; ")})` : ""}`,
    )
    console.log(`RSS: ${before.rssMb} MB before, ${peakRssMb} MB at most during, ${after.rssMb} MB after`)
    const errors = report.routes.reduce((n, r) => n + r.errors, 0)
    const problems = [
      errors && `${errors} request(s) failed`,
      lost && `${lost} job(s) lost`,
      unfinished && `${unfinished} job(s) not ended`,
      p.watch.dead && `${p.watch.dead} worker(s) declared dead`,
    ].filter(Boolean)
    for (const problem of problems) console.error(`load failed: ${problem}`)
    if (p.watch.errors.length) console.error(`the plane warned: ${p.watch.errors.slice(0, 5).join(" | ")}`)
    return problems.length ? 1 : 0
  } finally {
    await stopProbe()
    await p.stop()
  }
}

const plan = process.env[ClientVariable]
if (plan) {
  const report = await client(JSON.parse(plan) as ClientPlan)
  process.send?.(report, () => process.exit(0))
} else process.exit(await main())
