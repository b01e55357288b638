/**
 * The fake Lepton against the contract the `lepton` backend relies on (Part A of the backend
 * contracts): auth codes, `{code, message}` errors, deployments whose replicas really serve a chat
 * completion behind the endpoint, scaling and NoCapacity, jobs whose workers really run their command
 * with their env, stop, paging, archival and injected 429s; a running replica's log stays open, as
 * Lepton's does.
 */
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type FakeLepton, startFakeLepton } from "./support/fake-lepton"

/** A response body as the tests read it: the contract's JSON, whatever its shape. */
// biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary response shapes
type Wire = any
type Body = Record<string, Wire>

async function call(
  f: { url: string; token: string },
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Wire; headers: Headers }> {
  const res = await fetch(`${f.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${f.token}`, "content-type": "application/json", ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await res.text()
  let parsed: unknown = text
  try {
    parsed = JSON.parse(text)
  } catch {
    // a log is text
  }
  return { status: res.status, body: parsed, headers: res.headers }
}

/**
 * Read a running replica's log as Lepton streams it (open while the replica runs) until its text so
 * far matches `pattern`, then let go; fails if the stream ends or `ms` pass first.
 */
async function logUntil(f: { url: string; token: string }, path: string, pattern: RegExp, ms = 15_000) {
  const stop = new AbortController()
  const timer = setTimeout(() => stop.abort(), ms)
  try {
    const res = await fetch(`${f.url}${path}`, {
      headers: { authorization: `Bearer ${f.token}` },
      signal: stop.signal,
    })
    expect(res.status).toBe(200)
    const reader = res.body!.getReader()
    const decoder = new TextDecoder()
    let text = ""
    for (;;) {
      const { value, done } = await reader.read()
      if (done) throw new Error(`the log ended before it matched ${pattern}: ${JSON.stringify(text)}`)
      text += decoder.decode(value, { stream: true })
      if (pattern.test(text)) {
        await reader.cancel()
        return text
      }
    }
  } finally {
    clearTimeout(timer)
  }
}

/** Poll `probe` until it returns a value `done` accepts, or fail with the last value at the deadline. */
async function waitFor<T>(probe: () => Promise<T>, done: (v: T) => boolean, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms
  let last = await probe()
  while (!done(last)) {
    if (Date.now() > deadline) throw new Error(`condition not met in ${ms} ms; last: ${JSON.stringify(last)}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
    last = await probe()
  }
  return last
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

const deployment = (id: string, spec: Body = {}) => ({
  metadata: { id, name: id },
  spec: {
    container: { image: "echo", command: ["serve"], ports: [{ container_port: 8000, protocol: "TCP" }] },
    resource_requirement: { resource_shape: "cpu.small", min_replicas: 1, max_replicas: 1 },
    ...spec,
  },
})

const job = (name: string, script: string, spec: Body = {}) => ({
  metadata: { id: name, name },
  spec: {
    resource_shape: "cpu.small",
    container: { image: "x", command: ["/bin/bash", "-c", script] },
    ...spec,
  },
})

async function chat(endpoint: string, token?: string) {
  const res = await fetch(`${endpoint}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify({ model: "echo", messages: [{ role: "user", content: "hello lepton" }] }),
  })
  return {
    status: res.status,
    replica: res.headers.get("x-lepton-replica"),
    body: (await res.json()) as Wire,
  }
}

let f: FakeLepton
beforeAll(async () => {
  f = await startFakeLepton({ secrets: { HF_TOKEN: "s3cret-value" }, workerReadyMs: 300 })
})
afterAll(async () => {
  await f?.stop()
  expect(f.livePids()).toEqual([])
})

describe("workspace and auth", () => {
  it("answers the workspace probe with the right token, with or without an origin header", async () => {
    const info = await call(f, "GET", "/workspace")
    expect(info.status).toBe(200)
    expect(info.body.workspace_state).toBe("normal")
    const withOrigin = await call(f, "GET", "/workspace", undefined, { origin: f.url })
    expect(withOrigin.status).toBe(200)
  })

  it("is 401 without or with a wrong token, 403 with another workspace's, 404 for an unknown workspace", async () => {
    const noToken = await fetch(`${f.url}/workspace`)
    expect(noToken.status).toBe(401)
    expect((await call({ url: f.url, token: "wrong" }, "GET", "/workspace")).status).toBe(401)
    expect((await call({ url: f.url, token: f.otherWorkspace.token }, "GET", "/workspace")).status).toBe(403)
    expect((await call({ url: f.otherWorkspace.url, token: f.token }, "GET", "/workspace")).status).toBe(403)
    const resolver = f.url.replace(/\/api\/v2\/workspaces\/.*$/, "/api/v2/workspaces")
    const resolved = await call({ url: resolver, token: f.token }, "GET", `/${f.workspaceId}`)
    expect(resolved).toMatchObject({ status: 200, body: { display_name: expect.any(String) } })
    expect((await fetch(`${resolver}/${f.workspaceId}`)).status).toBe(401)
    const unknown = f.url.replace(/[^/]+$/, "ws-nobody")
    expect((await call({ url: unknown, token: f.token }, "GET", "/workspace")).status).toBe(404)
  })

  it("answers every error as {code, message}, and never echoes the token", async () => {
    const cases = [
      { res: await call(f, "GET", "/deployments/nope"), status: 404, code: "NotFound" },
      {
        res: await call(f, "POST", "/deployments", { metadata: { id: "Bad Name!" }, spec: {} }),
        status: 400,
        code: "InvalidRequest",
      },
      { res: await call({ url: f.url, token: "wrong" }, "GET", "/jobs"), status: 401, code: "Unauthorized" },
    ]
    for (const c of cases) {
      expect(c.res.status).toBe(c.status)
      expect(c.res.body).toEqual({ code: c.code, message: expect.any(String) })
      expect(JSON.stringify(c.res.body)).not.toContain(f.token)
    }
  })

  it("answers injected 429s with Retry-After, then serves the request", async () => {
    f.injectFault({ status: 429, retryAfterSeconds: 2, method: "GET", path: "/jobs", count: 2 })
    for (let i = 0; i < 2; i++) {
      const limited = await call(f, "GET", "/jobs?page=1&page_size=10")
      expect(limited.status).toBe(429)
      expect(limited.headers.get("retry-after")).toBe("2")
      expect(limited.body.code).toEqual(expect.any(String))
    }
    expect((await call(f, "GET", "/jobs?page=1&page_size=10")).status).toBe(200)
    f.injectFault({ status: 503 })
    expect((await call(f, "GET", "/workspace")).status).toBe(503)
    expect((await call(f, "GET", "/workspace")).status).toBe(200)
  })
})

describe("deployments", () => {
  it("starts, becomes Ready, serves a chat completion with its api token, scales to 3, and stops on delete", async () => {
    const created = await call(
      f,
      "POST",
      "/deployments",
      deployment("llm-a", { api_tokens: [{ value: "endpoint-token" }] }),
    )
    expect(created.status).toBe(200)
    expect(created.body.status.state).toBe("Starting")
    expect(created.body.status.endpoint).toEqual({
      internal_endpoint: expect.any(String),
      external_endpoint: expect.stringMatching(/^http:\/\//),
      custom_external_endpoint: [],
    })
    expect((await call(f, "POST", "/deployments", deployment("llm-a"))).status).toBe(409)

    const ready = await waitFor(
      () => call(f, "GET", "/deployments/llm-a"),
      (r) => r.body.status.state === "Ready",
    )
    const endpoint: string = ready.body.status.endpoint.external_endpoint
    const answer = await chat(endpoint, "endpoint-token")
    expect(answer.status).toBe(200)
    expect(answer.body.choices[0].message.content).toContain("hello lepton")
    expect((await chat(endpoint)).status).toBe(401)
    expect((await chat(endpoint, "wrong")).status).toBe(401)

    const list = await call(f, "GET", "/deployments")
    expect(Array.isArray(list.body)).toBe(true)
    expect(list.body.map((d: Body) => d.metadata.id)).toContain("llm-a")

    const scale = { spec: { resource_requirement: { min_replicas: 3, max_replicas: 3 } } }
    const scaling = await call(f, "PATCH", "/deployments/llm-a", scale)
    expect(scaling.status).toBe(200)
    expect(scaling.body.status.state).toBe("Scaling")
    expect(scaling.body.status.autoscaler_status.desired_replicas).toBe(3)
    const unchanged = await call(f, "PATCH", "/deployments/llm-a", scale)
    expect(unchanged.status).toBe(400)
    expect(unchanged.body).toEqual({ code: "InvalidRequest", message: "no valid field to update" })

    await waitFor(
      () => call(f, "GET", "/deployments/llm-a"),
      (r) => r.body.status.state === "Ready",
    )
    const readiness = (await call(f, "GET", "/deployments/llm-a/readiness")).body as Record<string, Body[]>
    expect(Object.values(readiness).map((items) => items[0]?.reason)).toEqual(["Ready", "Ready", "Ready"])
    const served = new Set<string | null>()
    for (let i = 0; i < 3; i++) served.add((await chat(endpoint, "endpoint-token")).replica)
    expect(served.size).toBe(3)

    const replicas = (await call(f, "GET", "/deployments/llm-a/replicas")).body as Body[]
    expect(replicas.map((r) => r.id).sort()).toEqual(Object.keys(readiness).sort())
    // A running replica's log stays open, as Lepton's does: read until the line is there.
    await logUntil(f, `/deployments/llm-a/replicas/${replicas[0]?.id}/log`, /listening on/)

    const pids = f.livePids()
    expect(pids.length).toBe(3)
    expect((await call(f, "DELETE", "/deployments/llm-a")).status).toBe(200)
    expect((await call(f, "GET", "/deployments/llm-a")).status).toBe(404)
    await waitFor(
      async () => pids.filter(alive),
      (live) => live.length === 0,
    )
  })

  it("clears a field with an explicit null (JSON merge patch): no api tokens makes the endpoint public", async () => {
    await call(f, "POST", "/deployments", deployment("llm-b", { api_tokens: [{ value: "t" }] }))
    const patched = await call(f, "PATCH", "/deployments/llm-b", { spec: { api_tokens: null } })
    expect(patched.status).toBe(200)
    expect(patched.body.spec).not.toHaveProperty("api_tokens")
    expect(patched.body.spec.container.command).toEqual(["serve"])
    const ready = await waitFor(
      () => call(f, "GET", "/deployments/llm-b"),
      (r) => r.body.status.state === "Ready",
    )
    expect((await chat(ready.body.status.endpoint.external_endpoint)).status).toBe(200)
    await call(f, "DELETE", "/deployments/llm-b")
  })

  it("replaces the replicas when what they run changes (Updating), and stops them at min_replicas 0", async () => {
    await call(f, "POST", "/deployments", deployment("llm-e", { envs: [{ name: "MODE", value: "a" }] }))
    const get = () => call(f, "GET", "/deployments/llm-e")
    const replicaIds = async () => Object.keys((await call(f, "GET", "/deployments/llm-e/readiness")).body)
    await waitFor(get, (r) => r.body.status.state === "Ready")
    const before = await replicaIds()
    const updated = await call(f, "PATCH", "/deployments/llm-e", {
      spec: { envs: [{ name: "MODE", value: "b" }] },
    })
    expect(updated.body.status.state).toBe("Updating")
    await waitFor(get, (r) => r.body.status.state === "Ready")
    const after = await replicaIds()
    expect(after).toHaveLength(1)
    expect(after).not.toEqual(before)

    const pids = f.livePids()
    const stopping = await call(f, "PATCH", "/deployments/llm-e", {
      spec: { resource_requirement: { min_replicas: 0, max_replicas: 0 } },
    })
    expect(stopping.body.status.autoscaler_status.desired_replicas).toBe(0)
    await waitFor(get, (r) => r.body.status.state === "Stopped")
    expect(await replicaIds()).toEqual([])
    await waitFor(
      async () => pids.filter(alive),
      (live) => live.length === 0,
    )
    await call(f, "DELETE", "/deployments/llm-e")
  })

  it("keeps replicas it has no capacity for as NoCapacity, and starts them when capacity grows", async () => {
    const small = await startFakeLepton({ capacity: 1 })
    try {
      await call(
        small,
        "POST",
        "/deployments",
        deployment("llm-c", {
          resource_requirement: { min_replicas: 2, max_replicas: 2 },
        }),
      )
      const reasons = async () =>
        Object.values(
          (await call(small, "GET", "/deployments/llm-c/readiness")).body as Record<string, Body[]>,
        )
          .map((items) => items[0]?.reason)
          .sort()
      expect(await waitFor(reasons, (r) => r.includes("Ready"))).toEqual(["NoCapacity", "Ready"])
      expect((await call(small, "GET", "/deployments/llm-c")).body.status.state).not.toBe("Ready")
      small.setCapacity(2)
      await waitFor(
        () => call(small, "GET", "/deployments/llm-c"),
        (r) => r.body.status.state === "Ready",
      )
      expect(await reasons()).toEqual(["Ready", "Ready"])
    } finally {
      await small.stop()
    }
    expect(small.livePids()).toEqual([])
  })

  it("restarts a killed replica, or shows the deployment Not Ready with reason SystemError when restarts are off", async () => {
    await call(f, "POST", "/deployments", deployment("llm-d"))
    const get = () => call(f, "GET", "/deployments/llm-d")
    await waitFor(get, (r) => r.body.status.state === "Ready")
    f.killReplica("llm-d")
    await waitFor(get, (r) => r.body.status.state !== "Ready")
    await waitFor(get, (r) => r.body.status.state === "Ready")
    f.setRestartReplicas(false)
    try {
      f.killReplica("llm-d")
      await waitFor(get, (r) => r.body.status.state === "Not Ready")
      // The replica's readiness gives one of the contract's reasons, so the backend can read it.
      const readiness = (await call(f, "GET", "/deployments/llm-d/readiness")).body
      expect(Object.values(readiness).map((entries) => (entries as { reason: string }[])[0]!.reason)).toEqual(
        ["SystemError"],
      )
    } finally {
      f.setRestartReplicas(true)
    }
    await call(f, "DELETE", "/deployments/llm-d")
  })
})

describe("jobs", () => {
  const getJob = (id: string, mode = "alive_and_archive") =>
    call(f, "GET", `/jobs/${id}?job_query_mode=${mode}`)

  it("streams a running worker's log as it is written, and ends the stream when the worker exits", async () => {
    // Waits for a file rather than a time, so the log is read while the worker still runs.
    const gate = join(mkdtempSync(join(tmpdir(), "fake-lepton-log-")), "go")
    const script = `echo first; while [ ! -e ${gate} ]; do sleep 0.05; done; echo second`
    const created = await call(f, "POST", "/jobs", job("streamed", script))
    const id: string = created.body.metadata.id
    await waitFor(
      async () => (await getJob(id)).body.status?.state,
      (s) => s === "Running",
    )
    const [replica] = (await call(f, "GET", `/jobs/${id}/replicas`)).body as Body[]
    const res = await fetch(`${f.url}/jobs/${id}/replicas/${replica?.id}/log`, {
      headers: { authorization: `Bearer ${f.token}` },
    })
    const reader = res.body!.getReader()
    const decoder = new TextDecoder()
    let text = ""
    while (!text.includes("first")) text += decoder.decode((await reader.read()).value, { stream: true })
    expect(text).not.toContain("second")
    writeFileSync(gate, "")
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read())
      text += decoder.decode(chunk.value, { stream: true })
    expect(text.trim().split("\n")).toEqual(["first", "second"])
  })

  it("runs 2 workers with the job's env and completes, with a server-assigned id", async () => {
    const script =
      'echo "worker $LEPTON_JOB_WORKER_INDEX of $LEPTON_JOB_TOTAL_WORKERS: $GREETING $HF_TOKEN"; sleep 1'
    const created = await call(
      f,
      "POST",
      "/jobs",
      job("train", script, {
        completions: 2,
        parallelism: 2,
        envs: [
          { name: "GREETING", value: "hi" },
          { name: "HF_TOKEN", value_from: { secret_name_ref: "HF_TOKEN" } },
        ],
      }),
    )
    expect(created.status).toBe(200)
    const id: string = created.body.metadata.id
    expect(id).toMatch(/^train-[a-z0-9]+$/)
    expect(created.body.metadata.name).toBe("train")

    const seen: Body[] = []
    const done = await waitFor(
      async () => {
        const s = (await getJob(id)).body.status
        seen.push(s)
        return s
      },
      (s) => s.state === "Completed",
    )
    expect(done).toMatchObject({ job_name: id, succeeded: 2, failed: 0, active: 0 })
    expect(seen.some((s) => s.state === "Running" && s.ready < s.active)).toBe(true)
    expect(done.job_history.at(-1).state).toBe("Completed")

    const replicas = (await call(f, "GET", `/jobs/${id}/replicas`)).body as Body[]
    expect(replicas.map((r) => r.id)).toEqual([
      expect.stringMatching(`^${id}-0-`),
      expect.stringMatching(`^${id}-1-`),
    ])
    const logs = await Promise.all(replicas.map((r) => call(f, "GET", `/jobs/${id}/replicas/${r.id}/log`)))
    expect(logs.map((l) => l.body.trim())).toEqual([
      "worker 0 of 2: hi s3cret-value",
      "worker 1 of 2: hi s3cret-value",
    ])
  })

  it("fails a job when a worker exits non-zero, scripted or real", async () => {
    f.scriptJobFailure("scripted", 1)
    const scripted = (await call(f, "POST", "/jobs", job("scripted", "sleep 5", { completions: 2 }))).body
    const real = (await call(f, "POST", "/jobs", job("exits-3", "exit 3"))).body
    for (const j of [scripted, real]) {
      const s = await waitFor(
        async () => (await getJob(j.metadata.id)).body.status,
        (x) => x.state === "Failed",
      )
      expect(s.failed).toBeGreaterThanOrEqual(1)
      expect(s.active).toBe(0)
      expect(s.job_history.at(-1).state).toBe("Failed")
    }
  })

  it("fails a job whose worker is killed", async () => {
    const id = (await call(f, "POST", "/jobs", job("lost", "sleep 30"))).body.metadata.id
    await waitFor(
      async () => (await getJob(id)).body.status.state,
      (s) => s === "Running",
    )
    f.killJobWorker(id, 0)
    await waitFor(
      async () => (await getJob(id)).body.status.state,
      (s) => s === "Failed",
    )
  })

  it("stops a job on PATCH stopped: true, killing its processes and their children", async () => {
    const before = new Set(f.livePids())
    const script = 'sleep 60 & echo "child $!"; wait'
    const id = (await call(f, "POST", "/jobs", job("long", script, { completions: 2 }))).body.metadata.id
    await waitFor(
      async () => (await getJob(id)).body.status.state,
      (s) => s === "Running",
    )
    const workers = f.livePids().filter((p) => !before.has(p))
    expect(workers.length).toBe(2)
    const replicas = (await call(f, "GET", `/jobs/${id}/replicas`)).body as Body[]
    const children = await Promise.all(
      replicas.map(async (r) => {
        const log = await logUntil(f, `/jobs/${id}/replicas/${r.id}/log`, /child \d+/)
        return Number(/child (\d+)/.exec(log)?.[1])
      }),
    )
    expect(children.every(alive)).toBe(true)
    const stop = await call(f, "PATCH", `/jobs/${id}`, { spec: { stopped: true } })
    expect(stop.status).toBe(200)
    expect(["Stopping", "Stopped"]).toContain(stop.body.status.state)
    const stopped = await waitFor(
      async () => (await getJob(id)).body.status,
      (s) => s.state === "Stopped",
    )
    expect(stopped).toMatchObject({ active: 0, ready: 0 })
    await waitFor(
      async () => [...workers, ...children].filter(alive),
      (live) => live.length === 0,
    )
  })

  it("moves finished jobs to the archive on the control, or after archiveAfterMs by its clock", async () => {
    const id = (await call(f, "POST", "/jobs", job("short", "true"))).body.metadata.id
    await waitFor(
      async () => (await getJob(id)).body.status.state,
      (s) => s === "Completed",
    )
    expect((await getJob(id, "alive_only")).status).toBe(200)
    expect(f.archiveFinishedJobs()).toBeGreaterThan(0)
    expect((await getJob(id, "alive_only")).status).toBe(404)
    expect((await getJob(id, "archive_only")).status).toBe(200)
    expect((await getJob(id, "alive_and_archive")).status).toBe(200)

    let now = Date.now()
    const timed = await startFakeLepton({ archiveAfterMs: 60_000, now: () => now })
    try {
      const tid = (await call(timed, "POST", "/jobs", job("short", "true"))).body.metadata.id
      const get = (mode: string) => call(timed, "GET", `/jobs/${tid}?job_query_mode=${mode}`)
      await waitFor(
        async () => (await get("alive_only")).body.status?.state,
        (s) => s === "Completed",
      )
      now += 59_000
      expect((await get("alive_only")).status).toBe(200)
      now += 2_000
      expect((await get("alive_only")).status).toBe(404)
      expect((await get("archive_only")).body.status.state).toBe("Completed")
      const listed = await call(timed, "GET", "/jobs?job_query_mode=archive_only&page=1&page_size=10")
      expect(listed.body.jobs.map((j: Body) => j.metadata.id)).toEqual([tid])
    } finally {
      await timed.stop()
    }
  })

  it("holds a job in Queueing until capacity for all its workers frees, and DELETE kills its workers", async () => {
    const small = await startFakeLepton({ capacity: 1, workerReadyMs: 50 })
    try {
      const id = (await call(small, "POST", "/jobs", job("gang", "sleep 60", { completions: 2 }))).body
        .metadata.id
      const state = async () => (await call(small, "GET", `/jobs/${id}`)).body.status
      expect(await state()).toMatchObject({ state: "Queueing", active: 0 })
      expect(small.livePids()).toEqual([])
      small.setCapacity(2)
      await waitFor(state, (s) => s.state === "Running" && s.ready === 2)
      const pids = small.livePids()
      expect(pids.length).toBe(2)
      expect((await call(small, "DELETE", `/jobs/${id}`)).status).toBe(200)
      expect((await call(small, "GET", `/jobs/${id}`)).status).toBe(404)
      await waitFor(
        async () => pids.filter(alive),
        (live) => live.length === 0,
      )
    } finally {
      await small.stop()
    }
  })

  it("lists 250 jobs with page_size 100 in 3 pages from page 1, then an empty page", async () => {
    const queued = await startFakeLepton({ capacity: 0 }) // Queueing jobs: listed, nothing runs
    try {
      const ids = new Set<string>()
      for (let i = 0; i < 250; i++)
        ids.add((await call(queued, "POST", "/jobs", job(`j${i}`, "true"))).body.metadata.id)
      expect(ids.size).toBe(250)
      const pages: Body[][] = []
      for (let page = 1; page <= 4; page++) {
        const res = await call(queued, "GET", `/jobs?job_query_mode=alive_only&page=${page}&page_size=100`)
        expect(res.status).toBe(200)
        pages.push(res.body.jobs)
      }
      expect(pages.map((p) => p.length)).toEqual([100, 100, 50, 0])
      expect(new Set(pages.flat().map((j) => j.metadata.id))).toEqual(ids)
      expect(pages.flat().every((j) => j.status.state === "Queueing")).toBe(true)
      const running = await call(queued, "GET", "/jobs?page=1&page_size=100&status=Running&status=Failed")
      expect(running.body).toEqual({ jobs: [] })
      expect(queued.livePids()).toEqual([])
    } finally {
      await queued.stop()
    }
  })
})

describe("node groups and shapes", () => {
  let g: FakeLepton
  beforeAll(async () => {
    g = await startFakeLepton({
      nodeGroups: [
        {
          id: "ng-h100",
          name: "h100-pool",
          gpuProduct: "NVIDIA-H100-80GB-HBM3",
          desiredNodes: 2,
          readyNodes: 1,
          gpusPerNode: 8,
          shapes: ["gpu.1xh100-80gb", "gpu.8xh100-80gb"],
        },
        { id: "ng-cpu", name: "cpu-pool" },
      ],
    })
  })
  afterAll(async () => {
    await g?.stop()
  })

  it("by default has one group, ng-fake0001 named fake-node-group", async () => {
    const { status, body } = await call(f, "GET", "/dedicated-node-groups")
    expect(status).toBe(200)
    expect(body.map((x: Body) => x.metadata)).toEqual([
      expect.objectContaining({ id: "ng-fake0001", name: "fake-node-group" }),
    ])
  })

  it("lists and gets groups with GPU product, desired and ready nodes; an unknown id is 404", async () => {
    const list = await call(g, "GET", "/dedicated-node-groups")
    expect(list.body.map((x: Body) => x.metadata.id)).toEqual(["ng-h100", "ng-cpu"])
    const one = await call(g, "GET", "/dedicated-node-groups/ng-h100")
    expect(one.body.spec).toMatchObject({ gpu_product: "NVIDIA-H100-80GB-HBM3", desired_nodes: 2 })
    expect(one.body.status).toMatchObject({ ready_nodes: 1, quota_enabled: true })
    const missing = await call(g, "GET", "/dedicated-node-groups/h100-pool")
    expect(missing.status).toBe(404)
    expect(missing.body.code).toBe("NotFound")
  })

  it("lists a group's nodes with GPUs allocated of total", async () => {
    const { body } = await call(g, "GET", "/dedicated-node-groups/ng-h100/nodes")
    expect(body).toHaveLength(1)
    expect(body[0].spec.dedicated_node_group).toBe("ng-h100")
    expect(body[0].spec.resource.gpu).toMatchObject({
      product: "NVIDIA-H100-80GB-HBM3",
      allocated: 0,
      total: 8,
    })
    expect(body[0].status.status).toEqual(["Ready"])
  })

  it("lists shapes, all or one group's with node_groups=<id>", async () => {
    const all = await call(g, "GET", "/shapes")
    expect(all.body.map((x: Body) => x.spec.name).sort()).toEqual([
      "cpu.small",
      "gpu.1xh100-80gb",
      "gpu.8xh100-80gb",
    ])
    const one = await call(g, "GET", "/shapes?node_groups=ng-cpu")
    expect(one.body.map((x: Body) => [x.spec.name, x.spec.node_group_id])).toEqual([["cpu.small", "ng-cpu"]])
  })

  it("records a job's node group affinity, and refuses a group it does not know (a name is not an id)", async () => {
    const placed = await call(
      g,
      "POST",
      "/jobs",
      job("placed", "true", { affinity: { allowed_dedicated_node_groups: ["ng-cpu"] } }),
    )
    expect(placed.status).toBe(200)
    expect(g.placements).toContainEqual({ kind: "job", id: placed.body.metadata.id, nodeGroups: ["ng-cpu"] })
    const byName = await call(
      g,
      "POST",
      "/jobs",
      job("by-name", "true", { affinity: { allowed_dedicated_node_groups: ["cpu-pool"] } }),
    )
    expect(byName.status).toBe(400)
    expect(byName.body).toMatchObject({ code: "InvalidRequest" })
    expect(byName.body.message).toContain("cpu-pool")
    expect(g.placements.some((p) => p.id.startsWith("by-name"))).toBe(false)
  })
})
