/**
 * Batch runner throughput: rows/s of one shard's `runBatch` at concurrency 1, 8 and 64 against the
 * echo model server given a fixed service time (each request holds one of `Slots` slots for
 * `ServiceMs`, the rest queue, as on a model server with a fixed batch size), set against that
 * endpoint's own capacity measured by a raw `node:http` client (keep-alive, no runner): the ceiling.
 * The same sweep against an echo swarm's data path: the swarm router over 2 such servers of half the
 * slots each (the same capacity), as a job's `SWARM_ENDPOINT` reaches it.
 * Then, on the instant echo server, the runner at 64 in flight against raw clients at 64: `node:http`
 * with keep-alive (the runner's HTTP stack, and the endpoint's capacity: the gap is the runner's own
 * work: input, JSON, checkpoints, merge) and `fetch` (for reference: the runner used it at first, at
 * about 4× the CPU per request).
 *
 * Each endpoint runs in a child process (this file, forked), so the runner and the server do not share
 * an event loop. Runner settings are the CLI defaults (`parseRunBatch`), with a fresh output folder
 * per run.
 *
 * `npm run bench -- batch`, or `main()` from `bench/run.ts`.
 */
import { type ChildProcess, fork } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { Agent, type RequestListener, request } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { fileURLToPath } from "node:url"
import { parseRunBatch } from "../packages/agent/src/batch/options"
import { runBatch } from "../packages/agent/src/batch/runner"
import { createEchoServer, EchoModel } from "../packages/agent/src/echo-server"
import { silentLogger } from "../packages/agent/src/logger"
import { createRouter } from "../packages/agent/src/router"
import { median, table } from "./util"

const ServiceMs = 20
const Slots = 32
/** Set in a forked child: the endpoint to serve, as JSON `Service`. */
const EndpointVariable = "SWARMPLANE_BENCH_BATCH_ENDPOINT"

interface Service {
  delayMs: number
  slots: number
  /** A swarm: this many such servers behind the swarm router (what a job's SWARM_ENDPOINT is). */
  replicas?: number
}

interface Case {
  endpoint: "delayed" | "swarm" | "instant"
  client: "runner" | "fetch" | "http"
  inFlight: number
  rows: number
  runs: number
}

const cases: Case[] = [
  { endpoint: "delayed", client: "runner", inFlight: 1, rows: 100, runs: 1 },
  { endpoint: "delayed", client: "runner", inFlight: 8, rows: 1000, runs: 1 },
  { endpoint: "delayed", client: "runner", inFlight: 64, rows: 1500, runs: 3 },
  // 4× the slots in flight, so the endpoint's queue never runs dry: its capacity.
  { endpoint: "delayed", client: "http", inFlight: 4 * Slots, rows: 1500, runs: 3 },
  // The same sweep through a swarm's real data path: the router over 2 replicas of half the slots each.
  { endpoint: "swarm", client: "runner", inFlight: 1, rows: 100, runs: 1 },
  { endpoint: "swarm", client: "runner", inFlight: 8, rows: 1000, runs: 1 },
  { endpoint: "swarm", client: "runner", inFlight: 64, rows: 1500, runs: 3 },
  { endpoint: "swarm", client: "http", inFlight: 4 * Slots, rows: 1500, runs: 3 },
  { endpoint: "instant", client: "runner", inFlight: 64, rows: 1000, runs: 3 },
  { endpoint: "instant", client: "fetch", inFlight: 64, rows: 1000, runs: 3 },
  { endpoint: "instant", client: "http", inFlight: 64, rows: 4000, runs: 3 },
]

// In the forked child, serve the endpoint until the parent goes away.
const served = process.env[EndpointVariable]
if (served !== undefined && process.send) await serveEndpoint(JSON.parse(served) as Service)

/** The endpoint of `service`: one server, or `replicas` of them behind the swarm router. */
async function serveEndpoint(service: Service): Promise<void> {
  const replicas = service.replicas ?? 0
  if (replicas === 0) {
    const echo = delayedEcho(service)
    const port = await echo.listen(0)
    process.on("disconnect", () => void echo.close().then(() => process.exit(0)))
    process.send!({ port })
    return
  }
  const servers = Array.from({ length: replicas }, () => delayedEcho(service))
  const urls = await Promise.all(servers.map(async (s) => `http://127.0.0.1:${await s.listen(0)}`))
  const router = createRouter(urls)
  const port = await router.listen(0)
  process.on(
    "disconnect",
    () => void Promise.all([router.close(), ...servers.map((s) => s.close())]).then(() => process.exit(0)),
  )
  process.send!({ port })
}

/** The echo server, each `/v1/` request first waiting for a slot, then holding it `delayMs`. */
function delayedEcho(service: Service) {
  const echo = createEchoServer()
  if (service.delayMs > 0) {
    // The echo server keeps its handler to itself: take it off the server and call it after the wait.
    const [answer] = echo.server.listeners("request") as RequestListener[]
    echo.server.removeAllListeners("request")
    const slots = slotsOf(service.slots)
    echo.server.on("request", (req, res) => {
      if (!req.url?.startsWith("/v1/")) return answer!(req, res)
      void slots
        .take()
        .then(() => sleep(service.delayMs))
        .then(() => {
          slots.give()
          answer!(req, res)
        })
    })
  }
  return echo
}

/** `n` slots; `take` waits in FIFO order when none is free. */
function slotsOf(n: number) {
  let free = n
  const waiting: (() => void)[] = []
  return {
    take: (): Promise<void> => {
      if (free > 0) {
        free--
        return Promise.resolve()
      }
      return new Promise((resolve) => waiting.push(resolve))
    },
    give: (): void => {
      const next = waiting.shift()
      if (next) next()
      else free++
    },
  }
}

async function startEndpoint(service: Service): Promise<{ url: string; child: ChildProcess }> {
  const child = fork(fileURLToPath(import.meta.url), [], {
    env: { ...process.env, [EndpointVariable]: JSON.stringify(service) },
  })
  const port = await new Promise<number>((resolve, reject) => {
    child.once("message", (m) => resolve((m as { port: number }).port))
    child.once("exit", (code) => reject(new Error(`bench endpoint exited with ${code} before listening`)))
  })
  return { url: `http://127.0.0.1:${port}`, child }
}

async function stopEndpoint(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise((resolve) => child.once("exit", resolve))
  child.disconnect()
  await exited
}

/** Seconds for one shard of `rows` rows at `concurrency`, with the CLI's defaults otherwise. */
async function runnerSeconds(endpoint: string, input: string, rows: number, concurrency: number) {
  const output = mkdtempSync(join(tmpdir(), "swarmplane-bench-batch-out-"))
  try {
    const args = ["--input", input, "--output", output, "--concurrency", String(concurrency)]
    const config = parseRunBatch(args, { SWARM_ENDPOINT: endpoint })
    if (config === "help") throw new Error("parseRunBatch asked for help")
    const t0 = performance.now()
    const result = await runBatch(config, { log: silentLogger })
    const seconds = (performance.now() - t0) / 1000
    if (result.outcome !== "succeeded" || result.progress.done !== rows)
      throw new Error(`runner: ${result.outcome}, ${result.progress.done}/${rows} rows done`)
    return seconds
  } finally {
    rmSync(output, { recursive: true, force: true })
  }
}

/** One chat completion by a raw client: send, read the whole answer, check the status; nothing else. */
type RawSend = (content: string) => Promise<void>

function fetchSender(endpoint: string): RawSend {
  return async (content) => {
    const res = await fetch(`${endpoint}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: EchoModel, messages: [{ role: "user", content }] }),
    })
    await res.text()
    if (res.status !== 200) throw new Error(`raw fetch: HTTP ${res.status}`)
  }
}

function httpSender(endpoint: string, agent: Agent): RawSend {
  const url = `${endpoint}/v1/chat/completions`
  return (content) =>
    new Promise((resolve, reject) => {
      const body = JSON.stringify({ model: EchoModel, messages: [{ role: "user", content }] })
      const req = request(
        url,
        { method: "POST", agent, headers: { "content-type": "application/json" } },
        (res) => {
          res.on("data", () => {})
          res.on("error", reject)
          res.on("end", () =>
            res.statusCode === 200 ? resolve() : reject(new Error(`raw http: HTTP ${res.statusCode}`)),
          )
        },
      )
      req.on("error", reject)
      req.end(body)
    })
}

/** Seconds for `requests` chat completions by a raw client, `inFlight` at a time. */
async function rawSeconds(client: "fetch" | "http", endpoint: string, requests: number, inFlight: number) {
  const agent = new Agent({ keepAlive: true, maxSockets: inFlight })
  const send = client === "fetch" ? fetchSender(endpoint) : httpSender(endpoint, agent)
  let next = 0
  const loop = async () => {
    while (next < requests) await send(`p ${next++}`)
  }
  try {
    const t0 = performance.now()
    await Promise.all(Array.from({ length: inFlight }, loop))
    return (performance.now() - t0) / 1000
  } finally {
    agent.destroy()
  }
}

export async function main(): Promise<void> {
  const inputDir = mkdtempSync(join(tmpdir(), "swarmplane-bench-batch-in-"))
  const endpoints: ChildProcess[] = []
  try {
    // 1. The endpoints, and one input file per row count.
    const delayed = await startEndpoint({ delayMs: ServiceMs, slots: Slots })
    const swarm = await startEndpoint({ delayMs: ServiceMs, slots: Slots / 2, replicas: 2 })
    const instant = await startEndpoint({ delayMs: 0, slots: 0 })
    endpoints.push(delayed.child, swarm.child, instant.child)
    const url = { delayed: delayed.url, swarm: swarm.url, instant: instant.url }
    const inputs = new Map<number, string>()
    for (const n of new Set([1000, ...cases.filter((c) => c.client === "runner").map((c) => c.rows)])) {
      const file = join(inputDir, `rows-${n}.jsonl`)
      const lines = Array.from(
        { length: n },
        (_, i) => `${JSON.stringify({ id: `r${i}`, prompt: `p ${i}` })}\n`,
      )
      writeFileSync(file, lines.join(""))
      inputs.set(n, file)
    }

    // 2. Warm-up (JIT, connections), then every case, the median of its runs.
    await runnerSeconds(url.instant, inputs.get(1000)!, 1000, 64)
    await rawSeconds("fetch", url.instant, 1000, 64)
    await rawSeconds("http", url.instant, 2000, 64)
    const results: (Case & { seconds: number; rate: number })[] = []
    for (const c of cases) {
      const times: number[] = []
      for (let r = 0; r < c.runs; r++)
        times.push(
          c.client === "runner"
            ? await runnerSeconds(url[c.endpoint], inputs.get(c.rows)!, c.rows, c.inFlight)
            : await rawSeconds(c.client, url[c.endpoint], c.rows, c.inFlight),
        )
      const seconds = median(times)
      results.push({ ...c, seconds, rate: c.rows / seconds })
    }

    // 3. The table: ratios against concurrency 1 and against node:http on the same endpoint.
    const rate = (e: Case["endpoint"], client: Case["client"]) =>
      results.find((r) => r.endpoint === e && r.client === client)!.rate
    const singleOf = (e: Case["endpoint"]) =>
      results.find((r) => r.endpoint === e && r.client === "runner" && r.inFlight === 1)!.rate
    const label = {
      delayed: `${ServiceMs} ms, ${Slots} slots`,
      swarm: `router + 2 × (${ServiceMs} ms, ${Slots / 2} slots)`,
      instant: "instant",
    }
    const clientLabel = { runner: "runBatch", fetch: "raw fetch", http: "raw node:http (ceiling)" }
    console.log(
      `\nBatch runner, one shard, chat API, CLI defaults, against the echo server in a child process ` +
        `("${label.delayed}": each request holds one of ${Slots} slots for ${ServiceMs} ms, so at most ` +
        `${(Slots * 1000) / ServiceMs} requests/s); ceiling = a raw node:http keep-alive client on the same ` +
        `endpoint; median of the runs\n`,
    )
    console.log(
      table(
        [
          "endpoint",
          "client",
          "concurrency",
          "rows",
          "runs",
          "seconds",
          "rows/s",
          "vs concurrency 1",
          "% of endpoint ceiling",
        ],
        results.map((r) => [
          label[r.endpoint],
          clientLabel[r.client],
          String(r.inFlight),
          String(r.rows),
          String(r.runs),
          r.seconds.toFixed(2),
          r.rate.toFixed(0),
          r.endpoint !== "instant" && r.client === "runner"
            ? (r.rate / singleOf(r.endpoint)).toFixed(1)
            : "—",
          `${((100 * r.rate) / rate(r.endpoint, "http")).toFixed(0)}%`,
        ]),
      ),
    )
    const us = (a: number, b: number) => (1e6 * (1 / a - 1 / b)).toFixed(0)
    const [runner, fetched, raw] = (["runner", "fetch", "http"] as const).map((c) => rate("instant", c))
    console.log(
      `\nOn the instant endpoint at 64 in flight, wall time per row (1 / rate): the runner (node:http) adds ` +
        `${us(runner!, raw!)} µs over a raw node:http client; a raw fetch client adds ${us(fetched!, raw!)} µs.`,
    )
  } finally {
    await Promise.all(endpoints.map(stopEndpoint))
    rmSync(inputDir, { recursive: true, force: true })
  }
}
