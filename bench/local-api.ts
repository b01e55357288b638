/**
 * The local control plane's API throughput on each of its stores: `npm start`'s plane started in this
 * process, first on embedded dynalite (the baseline: DynamoDB's API over LevelDB, through the AWS SDK)
 * and then on the journal store, each on a fresh data folder. Against each, autocannon (in a child
 * process, so the client's work is not on the plane's event loop) drives `GET /v1/jobs?limit=20` and
 * then `POST /v1/jobs` for a fixed time with bounded concurrency, as fast as the plane answers,
 * requests spread over write keys (each key has its own rate limit). Jobs go to a workers backend
 * with no workers, so no agent competes for the CPU: what is measured is the API, the schedule
 * consumer and the ticks on the store. Prints req/s, p50/p99 and the plane's CPU per request with the
 * ratio new/baseline. The machine's other load moves req/s and p99 a lot between runs; CPU per
 * request (this process's CPU time over the requests served) moves less.
 */
import { fork } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { BackendConfig } from "@swarmplane/core/model/backend"
import type { Logger } from "@swarmplane/core/util/logger"
import type { Result } from "autocannon"
import { type LocalStore, startLocalControlPlane } from "../functions/local/control-plane"
import { record, table } from "./util"

/** Set in the forked client: what to load, as JSON `ClientPlan`. */
const ClientVariable = "SWARMPLANE_BENCH_LOCAL_API_CLIENT"

/** Seconds each route is driven (after a short warm-up that is not counted). */
const Seconds = 10
const WarmupSeconds = 2
/** Requests in flight at once, per route. */
const Connections = 16
/** Write keys requests rotate over: 50 req/s each by default, so the limit never binds. */
const Keys = 64
/** Jobs in the list before the reads start. */
const SeededJobs = 200

const job = JSON.stringify({
  command: ["true"],
  tasks: 1,
  backendId: "bench",
  resources: { cpu: 0.25, memoryMiB: 32 },
})

interface ClientPlan {
  api: string
  keys: string[]
  route: "GET" | "POST"
  seconds: number
}

interface RouteResult {
  requests: number
  /** CPU time of this process (the plane) per request, ms: less swayed by other load than req/s. */
  cpuMsPerRequest?: number
  perSecond: number
  errors: number
  statusCodes: Record<string, number>
  p50: number
  p99: number
}

/** The client: one autocannon run of one route. */
async function client(plan: ClientPlan): Promise<RouteResult> {
  const { default: autocannon } = await import("autocannon")
  let next = 0
  const withKey = (request: { headers?: Record<string, string> }) => {
    request.headers = { ...request.headers, authorization: `Bearer ${plan.keys[next++ % plan.keys.length]}` }
    return request
  }
  const request =
    plan.route === "GET"
      ? { method: "GET", path: "/v1/jobs?limit=20", setupRequest: withKey }
      : {
          method: "POST",
          path: "/v1/jobs",
          headers: { "content-type": "application/json" },
          body: job,
          setupRequest: withKey,
        }
  const result: Result = await autocannon({
    url: plan.api,
    connections: Connections,
    duration: plan.seconds,
    timeout: 30,
    requests: [request],
  })
  return {
    requests: result.requests.total,
    perSecond: result.requests.total / plan.seconds,
    errors: result.errors + result.timeouts + result.non2xx,
    statusCodes: Object.fromEntries(
      Object.entries(result.statusCodeStats).map(([code, s]) => [code, s.count]),
    ),
    p50: result.latency.p50,
    p99: result.latency.p99,
  }
}

/** Run the client in a child process and take its result. */
function runClient(plan: ClientPlan): Promise<RouteResult> {
  const child = fork(fileURLToPath(import.meta.url), [], {
    env: { ...process.env, [ClientVariable]: JSON.stringify(plan) },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  })
  return new Promise((resolve, reject) => {
    child.once("message", (result) => resolve(result as RouteResult))
    child.once("exit", (code) =>
      reject(new Error(`the load client exited with code ${code} before reporting`)),
    )
  })
}

const quiet: Logger = { debug() {}, info() {}, warn() {}, error() {} }

/** Both routes against a plane on `store`, on a fresh data folder. */
async function measure(store: LocalStore): Promise<{ GET: RouteResult; POST: RouteResult }> {
  const dir = mkdtempSync(join(tmpdir(), "swarmplane-bench-api-"))
  const plane = await startLocalControlPlane({
    dataDir: join(dir, "data"),
    store,
    host: "127.0.0.1",
    port: 0,
    logger: quiet,
    localBackend: false,
    agentEnv: process.env,
  })
  try {
    const rt = plane.runtime
    await rt.repos.backends.put(rt.operatorProject, "bench", BackendConfig.parse({ type: "workers" }))
    const keys: string[] = []
    for (let i = 0; i < Keys; i++)
      keys.push((await rt.repos.projects.createKey(rt.operatorProject, "write", { name: `bench ${i}` })).key)
    for (let i = 0; i < SeededJobs; i++) {
      const res = await fetch(`${plane.url}/v1/jobs`, {
        method: "POST",
        headers: { Authorization: `Bearer ${keys[i % Keys]}`, "Content-Type": "application/json" },
        body: job,
      })
      if (res.status !== 202) throw new Error(`seeding jobs: ${res.status} ${await res.text()}`)
    }
    const run = async (route: "GET" | "POST"): Promise<RouteResult> => {
      await runClient({ api: plane.url, keys, route, seconds: WarmupSeconds })
      const cpuBefore = process.cpuUsage()
      const result = await runClient({ api: plane.url, keys, route, seconds: Seconds })
      const cpu = process.cpuUsage(cpuBefore)
      return { ...result, cpuMsPerRequest: (cpu.user + cpu.system) / 1000 / Math.max(1, result.requests) }
    }
    const GET = await run("GET")
    const POST = await run("POST")
    return { GET, POST }
  } finally {
    await plane.stop()
    rmSync(dir, { recursive: true, force: true })
  }
}

export async function main(): Promise<void> {
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true"
  console.log(
    `\nlocal API: ${Seconds} s per route, ${Connections} connections, ${Keys} keys, ${SeededJobs} jobs listed; dynalite (baseline) vs journal store`,
  )
  const baseline = await measure("dynalite")
  const journal = await measure("journal")
  const rows: string[][] = []
  const ratio = (a: number, b: number) => `${(a / b).toFixed(2)}×`
  for (const route of ["GET", "POST"] as const) {
    const path = route === "GET" ? "GET /v1/jobs?limit=20" : "POST /v1/jobs"
    const line = (name: string, r: RouteResult) => [
      path,
      name,
      r.perSecond.toFixed(0),
      String(r.p50),
      String(r.p99),
      (r.cpuMsPerRequest ?? 0).toFixed(2),
      r.errors ? `${r.errors} ${JSON.stringify(r.statusCodes)}` : "0",
    ]
    const [b, n] = [baseline[route], journal[route]]
    rows.push([...line("dynalite (baseline)", b), "", "", ""])
    rows.push([
      ...line("journal", n),
      ratio(n.perSecond, b.perSecond),
      ratio(n.p99, b.p99),
      ratio(n.cpuMsPerRequest ?? 0, b.cpuMsPerRequest ?? 1),
    ])
  }
  console.log(
    table(
      [
        "route",
        "store",
        "req/s",
        "p50 ms",
        "p99 ms",
        "CPU ms/req",
        "errors",
        "req/s new/base",
        "p99 new/base",
        "CPU/req new/base",
      ],
      rows,
    ),
  )
  record({
    localApi: {
      seconds: Seconds,
      connections: Connections,
      baseline: { store: "dynalite", ...baseline },
      new: { store: "journal", ...journal },
      ratios: {
        getPerSecond: journal.GET.perSecond / baseline.GET.perSecond,
        postPerSecond: journal.POST.perSecond / baseline.POST.perSecond,
        getP99: journal.GET.p99 / baseline.GET.p99,
        postP99: journal.POST.p99 / baseline.POST.p99,
        getCpuPerRequest: (journal.GET.cpuMsPerRequest ?? 0) / (baseline.GET.cpuMsPerRequest ?? 1),
        postCpuPerRequest: (journal.POST.cpuMsPerRequest ?? 0) / (baseline.POST.cpuMsPerRequest ?? 1),
      },
    },
  })
}

const plan = process.env[ClientVariable]
if (plan) {
  const result = await client(JSON.parse(plan) as ClientPlan)
  process.send?.(result, () => process.exit(0))
} else if (import.meta.url === `file://${process.argv[1]}`) {
  await main()
  process.exit(0)
}
