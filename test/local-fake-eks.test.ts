/**
 * `SWARMPLANE_FAKE_EKS=1 npm start` (or `npm start -- --fake-eks`): the local control plane as a real
 * process, started with a fake EKS cluster running Kueue beside it (test/support/fake-kube/serve.ts, a
 * child process). With no AWS credentials in the environment the plane signs as the fake's IAM user:
 * the `eks` backend on it is registered and healthy, a job on it SUCCEEDS, and stopping the plane
 * leaves no process of the fake. An `eks` backend of the user's own, and AWS credentials of the user's
 * own, are left as they are, and the log says so.
 */
import { existsSync, mkdtempSync, readFileSync } from "node:fs"
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

/** An environment without AWS credentials of its own, whatever the machine running the test has. */
function noAwsCredentials(): Record<string, string> {
  const none = join(mkdtempSync(join(tmpdir(), "no-aws-")), "absent")
  return {
    AWS_ACCESS_KEY_ID: "",
    AWS_SECRET_ACCESS_KEY: "",
    AWS_SESSION_TOKEN: "",
    AWS_PROFILE: "",
    AWS_WEB_IDENTITY_TOKEN_FILE: "",
    AWS_CONTAINER_CREDENTIALS_RELATIVE_URI: "",
    AWS_CONTAINER_CREDENTIALS_FULL_URI: "",
    AWS_SHARED_CREDENTIALS_FILE: none,
    AWS_CONFIG_FILE: none,
    // No instance role either: the chain must not wait on a metadata service the machine lacks.
    AWS_EC2_METADATA_DISABLED: "true",
  }
}

/** Where the plane said its fake is: the EKS API URL and the fake's pid. */
async function fakeOf(local: LocalProcess): Promise<{ eksUrl: string; pid: number }> {
  const [, eksUrl, pid] = await until(
    "the fake EKS line",
    async () => /fake EKS cluster "[^"]+" on (\S+) \(pid (\d+)\)/.exec(local.output()) ?? undefined,
    60_000,
  )
  return { eksUrl: eksUrl!, pid: Number(pid) }
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

describe("npm start with a fake EKS cluster", () => {
  test("with no AWS credentials of its own, the plane signs as the fake's user: a healthy eks backend runs a 2-task job to SUCCEEDED; stopping the plane ends the fake and its pods", {
    timeout: 240_000,
  }, async () => {
    const dirs = freshDirs()
    const local = await startLocal({ ...dirs, ...noAwsCredentials(), SWARMPLANE_FAKE_EKS: "1" })
    const key = readFileSync(join(dirs.SWARMPLANE_DATA_DIR, "admin-key"), "utf8").trim()
    const fake = await fakeOf(local)
    expect(local.output()).toMatch(/swarmplane job submit --backend eks/)
    expect(local.output()).toMatch(/no AWS credentials: the plane uses the fake's IAM user AKIA[0-9A-F]{16}/)

    const listed = (await call(local.url, key, "GET", "/v1/backends")).json.items
    expect(listed.map((b: { id: string }) => b.id).sort()).toEqual(["eks", "local"])
    expect(listed.find((b: { id: string }) => b.id === "eks").config).toMatchObject({
      type: "eks",
      endpoint: fake.eksUrl,
      clusterName: "fake-eks",
    })
    const live = await call(local.url, key, "GET", "/v1/backends/eks/status")
    expect(live.status, JSON.stringify(live.json)).toBe(200)
    expect(live.json.status.healthy, JSON.stringify(live.json.status)).toBe(true)

    const submitted = await call(local.url, key, "POST", "/v1/jobs", {
      backendId: "eks",
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

    // A pod still running on the fake when the plane stops: its process must end with the fake.
    // (`$!`, not `$$`: Kubernetes turns `$$` in a command into `$`, and the fake does as it does.)
    const pidDir = mkdtempSync(join(tmpdir(), "fake-eks-pids-"))
    const long = await call(local.url, key, "POST", "/v1/jobs", {
      backendId: "eks",
      env: { PID_DIR: pidDir },
      command: [
        "sh",
        "-c",
        'sleep 300 & echo $! > "$PID_DIR/pid.tmp" && mv "$PID_DIR/pid.tmp" "$PID_DIR/pid"; wait',
      ],
    })
    expect(long.status, JSON.stringify(long.json)).toBe(202)
    const podPid = await until(
      "the long task to run on the fake",
      async () => existsSync(join(pidDir, "pid")) && Number(readFileSync(join(pidDir, "pid"), "utf8")),
      60_000,
    )
    expect(running(podPid)).toBe(true)
    expect(running(fake.pid)).toBe(true)

    expect(await local.stop()).toBe(0)
    expect(running(fake.pid)).toBe(false)
    expect(running(podPid)).toBe(false)
    await expect(fetch(fake.eksUrl)).rejects.toThrow()
  })

  test("--fake-eks leaves an eks backend and AWS credentials of the user's own as they are, and the log says so", {
    timeout: 120_000,
  }, async () => {
    const dirs = freshDirs()
    const plain = await startLocal(dirs)
    const key = readFileSync(join(dirs.SWARMPLANE_DATA_DIR, "admin-key"), "utf8").trim()
    expect(plain.output()).not.toMatch(/fake EKS/)
    const mine = { type: "eks", clusterName: "mine", region: "eu-west-1", localQueue: "team-queue" }
    expect((await call(plain.url, key, "POST", "/v1/backends", { id: "eks", config: mine })).status).toBe(201)
    expect(await plain.stop()).toBe(0)

    const local = await startLocal(
      { ...dirs, ...noAwsCredentials(), AWS_PROFILE: "my-team" },
      { args: ["--import", "tsx", "functions/local.ts", "--fake-eks"], cwd: root },
    )
    const fake = await fakeOf(local)
    expect(local.output()).toMatch(/a backend "eks" already exists and is left as it is/)
    expect(local.output()).toMatch(/AWS credentials of its own \(AWS_PROFILE\), which the plane keeps/)
    const backend = (await call(local.url, key, "GET", "/v1/backends/eks")).json
    expect(backend.config).toMatchObject(mine)
    expect(backend.config.endpoint).toBeUndefined()
    expect(await local.stop()).toBe(0)
    expect(running(fake.pid)).toBe(false)
  })
})
