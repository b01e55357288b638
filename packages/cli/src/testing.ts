/**
 * Test support: run `main` in-process with captured streams and a fake API (a `fetch` that answers
 * from a route table), so command behaviour and exit codes are tested without a server.
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { JobDetail, Swarm, Task } from "./client"
import type { Io } from "./context"
import { main } from "./main"

export interface Captured {
  code: number
  stdout: string
  stderr: string
  /** Requests the fake API saw. */
  requests: { method: string; path: string; headers: Headers; body?: unknown; at: number }[]
}

export type Route = (req: {
  method: string
  url: URL
  body?: unknown
  n: number
}) => { status?: number; body?: unknown; headers?: Record<string, string> } | "network"

/** Routes by `METHOD /path` (query ignored); a missing route answers 404 route.not_found. */
export function fakeFetch(routes: Record<string, Route>, seen: Captured["requests"]): typeof fetch {
  const counts = new Map<string, number>()
  return (async (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(String(input))
    const method = init?.method ?? "GET"
    const body = typeof init?.body === "string" ? JSON.parse(init.body) : undefined
    seen.push({
      method,
      path: url.pathname + url.search,
      headers: new Headers(init?.headers),
      body,
      at: Date.now(),
    })
    const key = `${method} ${url.pathname}`
    const n = (counts.get(key) ?? 0) + 1
    counts.set(key, n)
    const route = routes[key]
    const answer = route
      ? route({ method, url, body, n })
      : { status: 404, body: { error: { code: "route.not_found", message: `no route ${key}` } } }
    if (answer === "network")
      throw new TypeError("fetch failed", { cause: new Error("connect ECONNREFUSED 127.0.0.1:1") })
    return new Response(JSON.stringify(answer.body ?? {}), {
      status: answer.status ?? 200,
      headers: { "content-type": "application/json", ...answer.headers },
    })
  }) as typeof fetch
}

export interface RunOptions {
  routes?: Record<string, Route>
  env?: Record<string, string>
  tty?: boolean
  stdin?: string
  answer?: string
}

export async function run(argv: string[], options: RunOptions = {}): Promise<Captured> {
  const stdout: string[] = []
  const stderr: string[] = []
  const requests: Captured["requests"] = []
  const io: Io = {
    stdout: { write: (t) => void stdout.push(t), isTTY: options.tty ?? false, columns: 120 },
    stderr: { write: (t) => void stderr.push(t), isTTY: options.tty ?? false, columns: 120 },
    stdinIsTTY: options.tty ?? false,
    readStdin: async () => options.stdin ?? "",
    prompt: async () => options.answer ?? "",
  }
  const env = {
    SWARMPLANE_CONFIG_DIR: mkdtempSync(join(tmpdir(), "sp-cli-")),
    SWARMPLANE_API: "http://api.test",
    SWARMPLANE_KEY: "sp_test-key",
    NO_COLOR: "1",
    ...options.env,
  }
  const code = await main(argv, env, io, fakeFetch(options.routes ?? {}, requests))
  return { code, stdout: stdout.join(""), stderr: stderr.join(""), requests }
}

/** An API error answer. */
export function apiError(status: number, code: string, message: string) {
  return { status, body: { error: { code, message } } }
}

const at = "2024-06-01T12:00:00.000Z"

/** A swarm as the API answers it. */
export function swarmOf(overrides: Partial<Swarm> = {}): Swarm {
  return {
    name: "demo",
    model: "echo",
    replicas: 2,
    gpusPerReplica: 0,
    cpusPerReplica: 1,
    memoryMiBPerReplica: 256,
    args: [],
    env: {},
    port: 8000,
    healthPath: "/health",
    serving: {},
    labels: {},
    backendId: "local",
    project: "default",
    phase: "RUNNING",
    desired: "running",
    url: "http://127.0.0.1:9000",
    generation: 1,
    observedGeneration: 1,
    replicaStatus: { ready: 2, total: 2, items: [] },
    createdAt: at,
    updatedAt: at,
    ...overrides,
  }
}

/** A job with its tasks, all in `state` unless `tasks` says otherwise. */
export function jobOf(
  overrides: Partial<JobDetail> = {},
  states: Task["state"][] = ["SUCCEEDED"],
): JobDetail {
  const tasks: Task[] = states.map((state, index) => ({
    index,
    state,
    attempts:
      state === "PENDING"
        ? []
        : [{ attemptUid: `a-${index}`, state: "SUCCEEDED", createdAt: at, exitCode: 0 }],
    failureCount: 0,
    preemptionCount: 0,
    updatedAt: at,
  }))
  const counts: Record<string, number> = {}
  for (const s of states) counts[s] = (counts[s] ?? 0) + 1
  return {
    id: "job-1",
    project: "default",
    spec: {
      name: "job",
      command: ["true"],
      env: {},
      resources: { cpu: 1, memoryMiB: 1024, gpu: 0 },
      constraints: [],
      preferences: [],
      tasks: states.length,
      priority: "batch",
      maxRetriesFailure: 0,
      maxRetriesPreemption: 100,
      maxTaskFailures: 0,
      labels: {},
    },
    backendId: "local",
    status: "SUCCEEDED",
    counts,
    cancelRequested: false,
    createdAt: at,
    updatedAt: at,
    tasks,
    ...overrides,
  }
}
