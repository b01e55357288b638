/**
 * What the soak and load benchmarks share: the local control plane `npm start` runs, started in this
 * process on a fresh data folder; write keys to spread requests over (each key has its own rate limit,
 * as each user would); latencies by route with their percentiles; a probe worker that heartbeats like an
 * agent does and times it; what the plane logged of workers going suspect or dead; and the process's
 * memory after a full garbage collection.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import type { Logger } from "@swarmplane/core/util/logger"
import { type LocalControlPlane, startLocalControlPlane } from "../functions/local/control-plane"

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true"

// A full collection on demand, without asking for `node --expose-gc`.
setFlagsFromString("--expose-gc")
const collect = runInNewContext("gc") as () => void

export interface Memory {
  rssMb: number
  heapMb: number
  externalMb: number
}

/** The process's memory after two full collections (what stays, not what waits to be collected). */
export async function settledMemory(): Promise<Memory> {
  for (let i = 0; i < 2; i++) {
    collect()
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  const m = process.memoryUsage()
  const mb = (n: number) => Math.round(n / 1024 / 1024)
  return { rssMb: mb(m.rss), heapMb: mb(m.heapUsed), externalMb: mb(m.external) }
}

/** Latencies by route, in ms. */
export class Latencies {
  private readonly byRoute = new Map<string, number[]>()
  add(route: string, ms: number): void {
    const list = this.byRoute.get(route) ?? []
    list.push(ms)
    this.byRoute.set(route, list)
  }
  routes(): string[] {
    return [...this.byRoute.keys()]
  }
  count(route: string): number {
    return this.byRoute.get(route)?.length ?? 0
  }
  /** The p-th percentile (0..100), nearest rank; undefined without samples. */
  percentile(route: string, p: number): number | undefined {
    const sorted = (this.byRoute.get(route) ?? []).slice().sort((a, b) => a - b)
    if (!sorted.length) return undefined
    return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]
  }
  /** `p50 / p99` in ms, or `-`. */
  text(route: string): string {
    const p50 = this.percentile(route, 50)
    const p99 = this.percentile(route, 99)
    return p50 === undefined || p99 === undefined ? "-" : `${Math.round(p50)} / ${Math.round(p99)}`
  }
}

/** What the plane logged that a benchmark checks: workers judged suspect or dead by silence, errors. */
export interface Watch {
  suspect: number
  dead: number
  /** The first few of those lines. */
  workers: string[]
  errors: string[]
}

/** A logger that keeps only what a benchmark checks (holding every line would itself grow memory). */
function watchingLogger(watch: Watch): Logger {
  const note = (message: string) => {
    const suspect = / worker .* → suspect /.test(message)
    const dead = / worker .* → dead \(heartbeat_missed/.test(message)
    if (suspect) watch.suspect++
    if (dead) watch.dead++
    if ((suspect || dead) && watch.workers.length < 10) watch.workers.push(message)
  }
  const problem = (message: string) => {
    if (watch.errors.length < 20) watch.errors.push(message)
  }
  return { debug() {}, info: note, warn: problem, error: problem }
}

export interface BenchPlane {
  plane: LocalControlPlane
  url: string
  watch: Watch
  /** Where request latencies go; replace it to start a new window. */
  latencies: Latencies
  /** A request with the next write key; timed under `route` (default: method and path). */
  call(
    method: string,
    path: string,
    body?: unknown,
    options?: { route?: string; headers?: Record<string, string>; key?: string },
    // biome-ignore lint/suspicious/noExplicitAny: benchmarks read arbitrary response shapes
  ): Promise<{ status: number; json: any; ms: number }>
  /** The write keys requests rotate over. */
  keys: string[]
  stop(): Promise<void>
}

export async function startBenchPlane(
  options: { localBackend?: boolean; keys?: number; reconcileEveryMs?: number } = {},
): Promise<BenchPlane> {
  const dir = mkdtempSync(join(tmpdir(), "swarmplane-bench-"))
  const watch: Watch = { suspect: 0, dead: 0, workers: [], errors: [] }
  const plane = await startLocalControlPlane({
    dataDir: join(dir, "data"),
    host: "127.0.0.1",
    port: 0,
    logger: watchingLogger(watch),
    localBackend: options.localBackend ?? true,
    agentEnv: process.env,
    ...(options.reconcileEveryMs ? { reconcileEveryMs: options.reconcileEveryMs } : {}),
  })
  const rt = plane.runtime
  const keys: string[] = []
  for (let i = 0; i < (options.keys ?? 16); i++)
    keys.push((await rt.repos.projects.createKey(rt.operatorProject, "write", { name: `bench ${i}` })).key)
  let next = 0
  const bench: BenchPlane = {
    plane,
    url: plane.url,
    watch,
    latencies: new Latencies(),
    keys,
    async call(method, path, body, opts = {}) {
      const started = performance.now()
      const res = await fetch(`${plane.url}${path}`, {
        method,
        headers: {
          Authorization: `Bearer ${opts.key ?? keys[next++ % keys.length]}`,
          ...(body === undefined ? {} : { "Content-Type": "application/json" }),
          ...opts.headers,
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      })
      const text = await res.text()
      const ms = performance.now() - started
      bench.latencies.add(opts.route ?? `${method} ${path}`, ms)
      return { status: res.status, json: text ? JSON.parse(text) : undefined, ms }
    },
    async stop() {
      await plane.stop()
      rmSync(dir, { recursive: true, force: true })
    },
  }
  return bench
}

/**
 * A worker of its own probe backend (no work placed on it) that heartbeats every `everyMs` as an
 * agent does, each heartbeat timed under `route()`. Returns a stop function.
 */
export async function probeWorker(
  p: BenchPlane,
  route: () => string = () => "heartbeat",
  everyMs = 500,
): Promise<() => Promise<void>> {
  const backend = { id: "probe", config: { type: "workers", heartbeatIntervalS: 1, heartbeatGraceS: 15 } }
  const made = await p.call("POST", "/v1/backends", backend, { key: p.plane.adminKey, route: "setup" })
  if (made.status !== 201) throw new Error(`probe backend: ${made.status} ${JSON.stringify(made.json)}`)
  const reg = await p.call(
    "POST",
    "/v1/workers/register",
    { backendId: "probe", name: "probe", resources: { cpu: 1, memoryMiB: 64 } },
    { key: p.plane.adminKey, route: "setup" },
  )
  if (reg.status !== 201) throw new Error(`probe worker: ${reg.status} ${JSON.stringify(reg.json)}`)
  const path = `/v1/workers/${reg.json.worker.id}/heartbeat`
  const headers = { "Swarmplane-Worker-Credential": reg.json.credential as string }
  let stopped = false
  const loop = (async () => {
    while (!stopped) {
      const beat = await p.call(
        "POST",
        path,
        { attempts: [] },
        { route: route(), headers, key: p.plane.adminKey },
      )
      if (beat.status !== 200) p.watch.errors.push(`probe heartbeat: ${beat.status}`)
      await new Promise((resolve) => setTimeout(resolve, everyMs))
    }
  })()
  return async () => {
    stopped = true
    await loop
  }
}

/** Call `probe` until it returns a value, or fail after `timeoutMs` saying what was awaited. */
export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined | false>,
  timeoutMs: number,
  everyMs = 250,
): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (value !== undefined && value !== false) return value
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, everyMs))
  }
}

/**
 * `--name value` options of a benchmark, positive numbers only, with their defaults. An unknown or
 * malformed one ends the process (exit 2) with a line naming it and the options there are.
 */
export function numberArgs<T extends Record<string, number>>(argv: string[], defaults: T): T {
  const out: Record<string, number> = { ...defaults }
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i]!.replace(/^--/, "")
    const value = Number(argv[i + 1])
    if (!argv[i]!.startsWith("--") || !(name in defaults) || !(value > 0)) {
      const known = Object.entries(defaults).map(([k, v]) => `--${k} N (default ${v})`)
      console.error(
        `unknown or malformed option ${argv[i]} ${argv[i + 1] ?? ""}; options: ${known.join(", ")}`,
      )
      process.exit(2)
    }
    out[name] = value
  }
  return out as T
}
