/**
 * Test support: a local control plane in this process (embedded dynalite and fauxqs, fast ticks)
 * and real worker agents as child processes, plus small API helpers and deadline-bounded waiting.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { retryAfterMs } from "@swarmplane/core/contract/retry-after"
import { memoryLogger } from "@swarmplane/core/util/logger"
import { type LocalControlPlane, startLocalControlPlane } from "../../functions/local/control-plane"
import { root } from "./local"

export const agentBin = join(root, "packages", "agent", "bin", "swarmplane-agent.mjs")

export interface Plane {
  plane: LocalControlPlane
  dir: string
  workerKey: string
  call(
    method: string,
    path: string,
    body?: unknown,
    key?: string,
    headers?: Record<string, string>,
    // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary response shapes
  ): Promise<{ status: number; json: any }>
  stop(): Promise<void>
}

/** A plane on `dir`'s data (made or reopened; a new folder when absent). */
export async function startPlane(
  options: { reconcileEveryMs?: number; autoscaleEveryMs?: number; dir?: string } = {},
): Promise<Plane> {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), "swarmplane-e2e-"))
  const plane = await startLocalControlPlane({
    dataDir: join(dir, "data"),
    host: "127.0.0.1",
    port: 0,
    logger: memoryLogger(),
    localBackend: false,
    agentEnv: process.env,
    reconcileEveryMs: options.reconcileEveryMs ?? 300,
    autoscaleEveryMs: options.autoscaleEveryMs ?? 3_600_000,
  })
  const workerKey = readFileSync(join(dir, "data", "worker-key"), "utf8").trim()
  return {
    plane,
    dir,
    workerKey,
    async call(method, path, body, key, headers = {}) {
      // A well-behaved client: a 429 waits for its Retry-After and tries again, as the CLI does. A
      // test that sends many requests in a burst is about what they do, not about the rate limit
      // (api/rate-limit.test.ts is).
      for (let tries = 1; ; tries++) {
        const res = await fetch(`${plane.url}${path}`, {
          method,
          headers: {
            ...headers,
            Authorization: `Bearer ${key ?? plane.adminKey}`,
            ...(body === undefined ? {} : { "Content-Type": "application/json" }),
          },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        })
        const text = await res.text()
        if (res.status === 429 && tries < 5) {
          await sleep(retryAfterMs(res.headers.get("retry-after")) ?? 1000)
          continue
        }
        return { status: res.status, json: text ? JSON.parse(text) : undefined }
      }
    },
    stop: () => plane.stop(),
  }
}

export interface Agent {
  instanceId: string
  child: ChildProcess
  output(): string
  kill(signal?: NodeJS.Signals): void
  exited: Promise<number | null>
}

const agents: Agent[] = []

/** Start a real agent serving `backendId`, identified by `instanceId`. */
export function startAgent(
  p: Plane,
  backendId: string,
  instanceId: string,
  opts: { cpu?: number; attrs?: Record<string, string> } = {},
): Agent {
  const args = [
    agentBin,
    "worker",
    "--api",
    p.plane.url,
    "--backend",
    backendId,
    "--instance-id",
    instanceId,
    "--name",
    instanceId,
    "--cpu",
    String(opts.cpu ?? 2),
    "--memory-mib",
    "2048",
    ...Object.entries(opts.attrs ?? {}).flatMap(([k, v]) => ["--attr", `${k}=${v}`]),
  ]
  const child = spawn(process.execPath, args, {
    env: { ...process.env, SWARMPLANE_TOKEN: p.workerKey },
    stdio: ["ignore", "pipe", "pipe"],
  })
  let out = ""
  child.stdout?.on("data", (c: Buffer) => (out += c.toString()))
  child.stderr?.on("data", (c: Buffer) => (out += c.toString()))
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  const agent = {
    instanceId,
    child,
    output: () => out,
    kill: (signal: NodeJS.Signals = "SIGTERM") => void child.kill(signal),
    exited,
  }
  agents.push(agent)
  return agent
}

/**
 * A `workers` backend `id` heartbeating every second (so routers hear of replicas soon), with a real
 * agent of 4 CPUs for each of `agents`.
 */
export async function workersPool(p: Plane, id: string, agents: string[]): Promise<void> {
  const res = await p.call("POST", "/v1/backends", { id, config: { type: "workers", heartbeatIntervalS: 1 } })
  if (res.status !== 201) throw new Error(`backend ${id}: ${res.status} ${JSON.stringify(res.json)}`)
  for (const name of agents) startAgent(p, id, name, { cpu: 4 })
}

/** Stop every agent a test started (SIGTERM: they stop their own tasks). */
export async function stopAgents(): Promise<void> {
  const running = agents.splice(0)
  for (const a of running) if (a.child.exitCode === null) a.child.kill("SIGTERM")
  await Promise.all(running.map((a) => Promise.race([a.exited, new Promise((r) => setTimeout(r, 8000))])))
  for (const a of running) if (a.child.exitCode === null) a.child.kill("SIGKILL")
}

/** Poll `probe` until it returns a value (not undefined/false), or fail after `timeoutMs` saying what was awaited. */
export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined | false>,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs
  let last: unknown
  for (;;) {
    try {
      const value = await probe()
      if (value !== undefined && value !== false) return value
    } catch (error) {
      last = error
    }
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ""}`)
    await new Promise((r) => setTimeout(r, 150))
  }
}

/**
 * A plane beside a substrate that outlives it (a fake Lepton, a fake cluster): `restart()` stops it and
 * starts another on the same data, and the helpers follow the current one.
 */
export interface RestartablePlane {
  readonly p: Plane
  dir: string
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary response shapes
  job(id: string): Promise<any>
  /** Register (or replace) a backend; 200 or 201 expected. */
  register(id: string, config: Record<string, unknown>): Promise<void>
  submit(backendId: string, spec: Record<string, unknown>): Promise<string>
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary response shapes
  finished(id: string, timeoutMs?: number): Promise<any>
  restart(): Promise<void>
  stop(): Promise<void>
}

export async function restartablePlane(dir = mkdtempSync(join(tmpdir(), "swarmplane-e2e-"))) {
  let current = await startPlane({ dir })
  const call: Plane["call"] = (...args) => current.call(...args)
  const job = async (id: string) => (await call("GET", `/v1/jobs/${id}`)).json
  const plane: RestartablePlane = {
    get p() {
      return current
    },
    dir,
    job,
    async register(id, config) {
      const res = await call("POST", "/v1/backends", { id, config })
      if (![200, 201].includes(res.status))
        throw new Error(`registering ${id}: ${res.status} ${JSON.stringify(res.json)}`)
    },
    async submit(backendId, spec) {
      const res = await call("POST", "/v1/jobs", { backendId, ...spec })
      if (res.status !== 202)
        throw new Error(`submitting to ${backendId}: ${res.status} ${JSON.stringify(res.json)}`)
      return res.json.id as string
    },
    finished: (id, timeoutMs = 60_000) =>
      until(
        `job ${id} to finish`,
        async () => {
          const j = await job(id)
          return ["SUCCEEDED", "FAILED", "CANCELLED"].includes(j.status) && j
        },
        timeoutMs,
      ),
    async restart() {
      await current.stop()
      current = await startPlane({ dir })
    },
    stop: () => current.stop(),
  }
  return plane
}
