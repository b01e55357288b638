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

export async function startPlane(
  options: { reconcileEveryMs?: number; autoscaleEveryMs?: number } = {},
): Promise<Plane> {
  const dir = mkdtempSync(join(tmpdir(), "swarmplane-e2e-"))
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
