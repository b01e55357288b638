/**
 * The local control plane's agents register with a `worker` key, which can do nothing else; a data
 * folder from before the `worker` role, which kept a `write` key for them, gets a worker key instead and
 * the old key is revoked. An agent given a user's key is refused at once, told which key it needs.
 */
import { spawn } from "node:child_process"
import { once } from "node:events"
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { memoryLogger } from "@swarmplane/core/util/logger"
import { expect, test } from "vitest"
import { startLocalControlPlane } from "../functions/local/control-plane"
import { agentBin } from "./support/plane"

async function start(dataDir: string) {
  return startLocalControlPlane({
    dataDir,
    host: "127.0.0.1",
    port: 0,
    logger: memoryLogger(),
    localBackend: false,
    agentEnv: process.env,
    reconcileEveryMs: 3_600_000,
    autoscaleEveryMs: 3_600_000,
  })
}

test("local agents get a worker key; an older data folder's write key is replaced and revoked", {
  timeout: 60_000,
}, async () => {
  const dataDir = join(mkdtempSync(join(tmpdir(), "swarmplane-worker-key-")), "data")
  const file = join(dataDir, "worker-key")
  const plane = await start(dataDir)
  const call = async (key: string, method: string, path: string, body?: unknown) => {
    const res = await fetch(`${plane.url}${path}`, {
      method,
      headers: { Authorization: `Bearer ${key}`, ...(body ? { "Content-Type": "application/json" } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    })
    return { status: res.status, json: await res.json() }
  }
  let oldWriteKey = ""
  try {
    const workerKey = readFileSync(file, "utf8").trim()
    expect((await call(workerKey, "GET", "/v1/me")).json).toMatchObject({ role: "worker" })
    expect((await call(workerKey, "GET", "/v1/jobs")).status).toBe(403)
    // What an older version kept: a write key of the operator project.
    const made = await call(plane.adminKey, "POST", "/v1/projects/default/keys", { role: "write" })
    oldWriteKey = made.json.key
    writeFileSync(file, `${oldWriteKey}\n`)

    // An agent started with that write key stops at once and says what key it needs.
    await call(plane.adminKey, "POST", "/v1/backends", { id: "pool", config: { type: "workers" } })
    const agent = spawn(
      process.execPath,
      [agentBin, "worker", "--api", plane.url, "--backend", "pool", "--cpu", "1", "--memory-mib", "256"],
      { env: { ...process.env, SWARMPLANE_TOKEN: oldWriteKey }, stdio: ["ignore", "pipe", "pipe"] },
    )
    let output = ""
    agent.stdout.on("data", (c: Buffer) => (output += c.toString()))
    agent.stderr.on("data", (c: Buffer) => (output += c.toString()))
    const [code] = await once(agent, "exit")
    expect(code).not.toBe(0)
    expect(output).toContain("worker.role_required")
    expect(output).toContain('create a key with role "worker"')
    expect(output).not.toContain(oldWriteKey)
  } finally {
    await plane.stop()
  }

  const again = await start(dataDir)
  try {
    const replaced = readFileSync(file, "utf8").trim()
    expect(replaced).not.toBe(oldWriteKey)
    const me = await fetch(`${again.url}/v1/me`, { headers: { Authorization: `Bearer ${replaced}` } })
    expect(await me.json()).toMatchObject({ role: "worker" })
    const old = await fetch(`${again.url}/v1/me`, { headers: { Authorization: `Bearer ${oldWriteKey}` } })
    expect(old.status).toBe(401)
    expect((await old.json()).error.code).toBe("auth.key_revoked")
  } finally {
    await again.stop()
  }
})
