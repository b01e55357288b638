/**
 * `SWARMPLANE_FAKE_LEPTON=1 npm start`: the local control plane as a real process, started with a fake
 * Lepton workspace beside it (test/support/fake-lepton/serve.ts, a child process). The `lepton` backend
 * on it is registered and healthy, a job on it SUCCEEDS, the token is never printed, and stopping the
 * plane leaves no process of the fake. A restart repoints that backend at the new fake; a `lepton`
 * backend of the user's own is left alone; a checkout without the fake refuses the flag (exit 2).
 */
import { spawnSync } from "node:child_process"
import { cpSync, existsSync, mkdtempSync, readFileSync, symlinkSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, describe, expect, test } from "vitest"
import { freshDirs, killStarted, type LocalProcess, root, startLocal } from "./support/local"
import { until } from "./support/plane"

afterEach(killStarted)

// biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary response shapes
async function call(url: string, key: string, method: string, path: string, body?: unknown): Promise<any> {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: { Authorization: `Bearer ${key}`, ...(body ? { "Content-Type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  })
  return { status: res.status, json: await res.json() }
}

/** Where the plane said its fake is: the workspace URL and the fake's pid. */
async function fakeOf(local: LocalProcess): Promise<{ url: string; pid: number }> {
  const [, url, pid] = await until(
    "the fake Lepton line",
    async () => /fake Lepton workspace on (\S+) \(pid (\d+)\)/.exec(local.output()) ?? undefined,
    60_000,
  )
  return { url: url!, pid: Number(pid) }
}

/** Whether a process runs (a zombie, gone but not yet reaped by whoever adopted it, does not). */
function running(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /s, "")[0] !== "Z"
  } catch {
    if (existsSync("/proc/self/stat")) return false
  }
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** The backend's live status (`GET /v1/backends/lepton/status` asks the workspace now). */
async function liveStatus(url: string, key: string) {
  const res = await call(url, key, "GET", "/v1/backends/lepton/status")
  expect(res.status, JSON.stringify(res.json)).toBe(200)
  return res.json.status
}

describe("npm start with a fake Lepton", () => {
  test("a healthy lepton backend on the fake runs a 2-task job to SUCCEEDED; stopping the plane ends the fake and its processes; a restart repoints the backend", {
    timeout: 240_000,
  }, async () => {
    const dirs = freshDirs()
    const env = { ...dirs, SWARMPLANE_FAKE_LEPTON: "1" }
    const local = await startLocal(env)
    const key = readFileSync(join(dirs.SWARMPLANE_DATA_DIR, "admin-key"), "utf8").trim()
    const fake = await fakeOf(local)
    expect(local.output()).toMatch(/swarmplane job submit --backend lepton/)

    const listed = (await call(local.url, key, "GET", "/v1/backends")).json.items
    expect(listed.map((b: { id: string }) => b.id).sort()).toEqual(["lepton", "local"])
    const backend = listed.find((b: { id: string }) => b.id === "lepton")
    expect(backend.config).toMatchObject({
      type: "lepton",
      workspaceUrl: fake.url,
      tokenSecret: "fake-lepton-token",
    })
    expect(await liveStatus(local.url, key)).toMatchObject({ healthy: true, detail: { state: "normal" } })

    const submitted = await call(local.url, key, "POST", "/v1/jobs", {
      backendId: "lepton",
      tasks: 2,
      command: ["sh", "-c", 'echo "hi from shard $SHARD_ID of $NSHARDS"'],
    })
    expect(submitted.status, JSON.stringify(submitted.json)).toBe(202)
    const done = await until(
      "the job to finish",
      async () => {
        const j = (await call(local.url, key, "GET", `/v1/jobs/${submitted.json.id}`)).json
        return ["SUCCEEDED", "FAILED", "CANCELLED"].includes(j.status) && j
      },
      90_000,
    )
    expect(done.status, JSON.stringify(done.tasks)).toBe("SUCCEEDED")
    expect(done.tasks.map((t: { state: string }) => t.state)).toEqual(["SUCCEEDED", "SUCCEEDED"])
    const logs = (await call(local.url, key, "GET", `/v1/jobs/${submitted.json.id}/tasks/1/logs`)).json
    expect(logs.lines.join("\n")).toContain("hi from shard 1 of 2")
    // The passes that ran it record the backend's health (after the commit that ended the job).
    await until(
      "the backend's recorded health",
      async () => (await call(local.url, key, "GET", "/v1/backends/lepton")).json.status.healthy === true,
      30_000,
    )

    // A task still running on the fake when the plane stops: its process must end with the fake.
    const pidDir = mkdtempSync(join(tmpdir(), "fake-lepton-pids-"))
    const long = await call(local.url, key, "POST", "/v1/jobs", {
      backendId: "lepton",
      env: { PID_DIR: pidDir },
      command: [
        "sh",
        "-c",
        'echo $$ > "$PID_DIR/pid.tmp" && mv "$PID_DIR/pid.tmp" "$PID_DIR/pid"; exec sleep 300',
      ],
    })
    expect(long.status, JSON.stringify(long.json)).toBe(202)
    const taskPid = await until(
      "the long task to run on the fake",
      async () => existsSync(join(pidDir, "pid")) && Number(readFileSync(join(pidDir, "pid"), "utf8")),
      60_000,
    )
    expect(running(taskPid)).toBe(true)
    expect(running(fake.pid)).toBe(true)

    const token = readFileSync(
      join(dirs.SWARMPLANE_DATA_DIR, "secrets", "default", "fake-lepton-token"),
      "utf8",
    ).trim()
    expect(token.length).toBeGreaterThan(16)
    expect(await local.stop()).toBe(0)
    expect(local.output()).not.toContain(token)
    expect(running(fake.pid)).toBe(false)
    expect(running(taskPid)).toBe(false)
    await expect(fetch(`${fake.url}/jobs`)).rejects.toThrow()

    // A restart on the same data runs a new fake (another port, another token) and repoints its backend.
    const again = await startLocal(env)
    const second = await fakeOf(again)
    expect(second.url).not.toBe(fake.url)
    await until(
      "the backend to point at the new fake",
      async () =>
        (await call(again.url, key, "GET", "/v1/backends/lepton")).json.config.workspaceUrl === second.url,
      30_000,
    )
    expect(await liveStatus(again.url, key)).toMatchObject({ healthy: true })
    expect(await again.stop()).toBe(0)
    expect(running(second.pid)).toBe(false)
  })

  test("a lepton backend of the user's own is left as it is, and the log says so", {
    timeout: 120_000,
  }, async () => {
    const dirs = freshDirs()
    const plain = await startLocal(dirs)
    const key = readFileSync(join(dirs.SWARMPLANE_DATA_DIR, "admin-key"), "utf8").trim()
    expect(plain.output()).not.toMatch(/fake Lepton/)
    const mine = {
      type: "lepton",
      workspaceId: "ws-mine",
      tokenSecret: "lepton-token",
      nodeGroup: "ng-mine",
      resourceShape: "gpu.1xh100-80gb",
    }
    expect((await call(plain.url, key, "POST", "/v1/backends", { id: "lepton", config: mine })).status).toBe(
      201,
    )
    expect(await plain.stop()).toBe(0)

    const local = await startLocal({ ...dirs, SWARMPLANE_FAKE_LEPTON: "1" })
    const fake = await fakeOf(local)
    expect(local.output()).toMatch(/a backend "lepton" already exists and is left as it is/)
    const backend = (await call(local.url, key, "GET", "/v1/backends/lepton")).json
    expect(backend.config).toMatchObject(mine)
    expect(backend.config.workspaceUrl).toBeUndefined()
    expect(await local.stop()).toBe(0)
    expect(running(fake.pid)).toBe(false)
  })

  test("a bad SWARMPLANE_FAKE_LEPTON, or a checkout without the fake, exits 2 with one line", () => {
    const bad = spawnSync(process.execPath, ["--import", "tsx", "functions/local.ts"], {
      cwd: root,
      env: { ...process.env, ...freshDirs(), SWARMPLANE_PORT: "0", SWARMPLANE_FAKE_LEPTON: "yes" },
      encoding: "utf8",
      timeout: 60_000,
    })
    expect(bad.status).toBe(2)
    expect(bad.stderr.trim()).toBe(
      'SWARMPLANE_FAKE_LEPTON must be 1 (run a fake Lepton workspace) or 0, got "yes"',
    )

    // The program as an install without test/ has it: its own functions/, the rest shared.
    const install = mkdtempSync(join(tmpdir(), "swarmplane-no-tests-"))
    cpSync(join(root, "functions"), join(install, "functions"), { recursive: true })
    cpSync(join(root, "package.json"), join(install, "package.json"))
    for (const shared of ["node_modules", "packages"]) symlinkSync(join(root, shared), join(install, shared))
    const run = spawnSync(process.execPath, ["--import", "tsx", "functions/local.ts", "--fake-lepton"], {
      cwd: install,
      env: { ...process.env, ...freshDirs(), SWARMPLANE_PORT: "0" },
      encoding: "utf8",
      timeout: 60_000,
    })
    expect(run.status).toBe(2)
    expect(run.stderr.trim().split("\n")).toEqual([
      "SWARMPLANE_FAKE_LEPTON (--fake-lepton) needs the fake Lepton of a full checkout (test/support/fake-lepton/), which this one lacks",
    ])
    expect(run.stdout).not.toMatch(/control plane on/)
  })
})
