/**
 * A job on the local control plane's own `local` backend, run by the agents the plane starts, cannot
 * get at the plane's secrets: not the admin key, the worker key or the pepper in its data folder, not
 * the CLI's profile, not the keys in the plane's or the agent's environment (through /proc), not in its
 * own environment. Each task of one job tries one way and prints what it got; the test reads the
 * job's logs through the API, as the job's owner would.
 */
import { readdirSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, expect, test } from "vitest"
import { detectSandbox } from "../packages/agent/src/sandbox"
import { freshDirs, killStarted, type LocalProcess, startLocal } from "./support/local"
import { until } from "./support/plane"

const namespaces = detectSandbox({ mode: "auto", hide: [] }).isolation === "namespaces"
if (!namespaces && process.env.SWARMPLANE_REQUIRE_NAMESPACES === "1")
  throw new Error("tasks cannot run in namespaces here, and SWARMPLANE_REQUIRE_NAMESPACES=1")

const dirs = freshDirs()
const adminKey = `sp_local-isolation-admin-${Math.random().toString(36).slice(2)}`
const awsSecret = `aws-secret-${Math.random().toString(36).slice(2)}`
let plane: LocalProcess | undefined

beforeAll(async () => {
  if (!namespaces) return
  plane = await startLocal({
    ...dirs,
    SWARMPLANE_ADMIN_KEY: adminKey,
    AWS_ACCESS_KEY_ID: "AKIALOCALISOLATION",
    AWS_SECRET_ACCESS_KEY: awsSecret,
  })
}, 60_000)
afterAll(async () => {
  await plane?.stop()
  killStarted()
})

async function call(method: string, path: string, body?: unknown) {
  const res = await fetch(`${plane?.url}${path}`, {
    method,
    headers: { Authorization: `Bearer ${adminKey}`, ...(body ? { "Content-Type": "application/json" } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  })
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary response shapes
  return { status: res.status, json: (await res.json()) as any }
}

/** One way to get at the secrets per task (`SHARD_ID`); each prints what it got, and ends well. */
const probes = [
  'cat "$DATA/admin-key"',
  'cat "$DATA/worker-key"',
  'cat "$DATA/api-pepper"',
  'ls -A "$DATA"; cat "$DATA"/secrets/*/* "$DATA"/workers/*.log',
  'ls -A "$CONFIG"; cat "$CONFIG/config.json"',
  // `[s]p_` finds keys (`sp_...`) but not the pattern itself, in the argv of grep or of the script.
  "for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < \"$f\"; done | grep -E '[S]WARMPLANE_(TOKEN|ADMIN_KEY)|[A]WS_|[s]p_'",
  "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < \"$f\"; echo; done | grep -E '[s]p_|[t]oken'",
  "env",
  "pwd",
]
const script = `case "$SHARD_ID" in\n${probes.map((p, i) => `${i}) ${p} ;;`).join("\n")}\nesac\necho probe-done`

test.skipIf(!namespaces)(
  "a job on the local backend cannot read the plane's keys, the CLI's profile or the agents' credentials",
  { timeout: 180_000 },
  async () => {
    const data = dirs.SWARMPLANE_DATA_DIR
    const secrets = {
      "the admin key": adminKey,
      "the worker key": readFileSync(join(data, "worker-key"), "utf8").trim(),
      "the pepper": readFileSync(join(data, "api-pepper"), "utf8").trim(),
      "the plane's AWS secret": awsSecret,
    }
    // The profile the plane wrote for the CLI holds the admin key.
    expect(readFileSync(join(dirs.SWARMPLANE_CONFIG_DIR, "config.json"), "utf8")).toContain(adminKey)

    const submitted = await call("POST", "/v1/jobs", {
      backendId: "local",
      tasks: probes.length,
      command: ["sh", "-c", script],
      env: { DATA: data, CONFIG: dirs.SWARMPLANE_CONFIG_DIR },
    })
    expect(submitted.status, JSON.stringify(submitted.json)).toBe(202)
    const jobId = submitted.json.id as string
    const job = await until(
      "the probes to finish",
      async () => {
        const j = (await call("GET", `/v1/jobs/${jobId}`)).json
        return ["SUCCEEDED", "FAILED", "CANCELLED"].includes(j.status) && j
      },
      150_000,
    )
    expect(job.status).toBe("SUCCEEDED")
    const logs: string[][] = []
    for (let i = 0; i < probes.length; i++) {
      const res = await call("GET", `/v1/jobs/${jobId}/tasks/${i}/logs?tail=10000`)
      expect(res.status).toBe(200)
      logs.push(res.json.lines as string[])
    }
    const all = logs.flat().join("\n")
    for (const [what, secret] of Object.entries(secrets))
      expect(all.includes(secret), `${what} reached a task's log`).toBe(false)
    // (stdout and stderr are two pipes: their lines may come in either order.)
    for (const lines of logs) expect(lines).toContain("probe-done")

    // The data folder and the CLI's folder look empty; the files in them are not there.
    for (const i of [0, 1, 2]) expect(logs[i]?.join("\n")).toContain("No such file or directory")
    const others = (lines: string[] | undefined) => (lines ?? []).filter((l) => l !== "probe-done")
    expect(others(logs[3]).every((l) => l.includes("No such file or directory"))).toBe(true)
    expect(others(logs[4]).every((l) => l.includes("No such file or directory"))).toBe(true)
    // No process it can see holds a key in its environment or argv.
    // (pid 1 of the namespace, which set it up, may not even be read: "Permission denied".)
    const found = (lines: string[] | undefined) =>
      others(lines).filter((l) => !l.endsWith("Permission denied"))
    expect(found(logs[5])).toEqual([])
    expect(found(logs[6])).toEqual([])
    // Its environment: the job's env, the task variables, a few harmless ones; none of the plane's.
    const names = (logs[7] ?? []).filter((l) => l.includes("=")).map((l) => l.slice(0, l.indexOf("=")))
    expect(names).toContain("PATH")
    expect(
      names.filter(
        (n) => n.startsWith("AWS_") || (n.startsWith("SWARMPLANE_") && n !== "SWARMPLANE_PROGRESS_FILE"),
      ),
    ).toEqual([])
    // Its working folder: a fresh one in the temporary folder, not in the plane's data.
    expect(logs[8]?.[0]?.startsWith(join(tmpdir(), "swarmplane-"))).toBe(true)

    // The workers say what isolation their tasks have, the API shows it, and the agents log it.
    const workers = (await call("GET", "/v1/workers?backendId=local")).json.items as {
      attributes: Record<string, string>
    }[]
    expect(workers.length).toBeGreaterThan(0)
    for (const w of workers) expect(w.attributes.isolation).toBe("namespaces")
    const agentLogs = readdirSync(join(data, "workers")).map((f) =>
      readFileSync(join(data, "workers", f), "utf8"),
    )
    expect(agentLogs.join("\n")).toContain(
      `tasks run in a private mount+pid namespace; hidden: ${data}, ${dirs.SWARMPLANE_CONFIG_DIR}`,
    )
  },
)
