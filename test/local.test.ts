/**
 * `npm start`'s control plane as a real process: it answers /health, bootstraps a project and an
 * admin key once, keeps state across restarts in its data folder, honours SWARMPLANE_ADMIN_KEY, refuses
 * a second instance on the same folder, and logs one line per state change.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { afterEach, describe, expect, test } from "vitest"
import { freshDirs as fresh, killStarted, type LocalProcess, startLocal } from "./support/local"
import { until } from "./support/plane"

afterEach(killStarted)

const stopLocal = (s: LocalProcess) => s.stop()

async function call(url: string, key: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: { Authorization: `Bearer ${key}`, ...(body ? { "Content-Type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  })
  return { status: res.status, json: await res.json() }
}

describe("local control plane", () => {
  test("first start prints the key it writes for the CLI; a restart keeps state and the key", async () => {
    const env = fresh()
    const first = await startLocal(env)
    expect((await (await fetch(`${first.url}/health`)).json()).status).toBe("ok")
    const key = readFileSync(join(env.SWARMPLANE_DATA_DIR, "admin-key"), "utf8").trim()
    // The key is printed right after the ready line, maybe on the other stream: wait for it.
    await until("the admin key to be printed", async () => first.output().includes(key), 10_000)
    const profile = JSON.parse(readFileSync(join(env.SWARMPLANE_CONFIG_DIR, "config.json"), "utf8"))
    expect(profile.profiles.local).toEqual({ api: first.url, key })

    expect((await call(first.url, key, "GET", "/v1/me")).json).toMatchObject({
      project: "default",
      role: "admin",
      operator: true,
    })
    await call(first.url, key, "POST", "/v1/backends", { id: "local", config: { type: "workers" } })
    expect((await call(first.url, key, "POST", "/v1/swarms", { name: "llm", model: "echo" })).status).toBe(
      202,
    )
    expect(first.output()).toMatch(/default swarm llm PENDING \(created/)
    expect(await stopLocal(first)).toBe(0)

    const second = await startLocal(env)
    await until(
      "where the key is to be printed",
      async () => second.output().includes("admin key in"),
      10_000,
    )
    expect(second.output()).not.toContain(key)
    const swarm = await call(second.url, key, "GET", "/v1/swarms/llm")
    expect(swarm.status).toBe(200)
    expect(swarm.json).toMatchObject({ name: "llm", phase: "PENDING" })
    expect(await stopLocal(second)).toBe(0)
  })

  test("SWARMPLANE_ADMIN_KEY sets the admin key and it is not printed", async () => {
    const key = "sp_my-own-local-admin-key-0001"
    const s = await startLocal({ ...fresh(), SWARMPLANE_ADMIN_KEY: key })
    expect((await call(s.url, key, "GET", "/v1/me")).status).toBe(200)
    expect(s.output()).not.toContain(key)
    await stopLocal(s)
  })

  test("a second control plane on the same data folder is refused with the fix", async () => {
    const env = fresh()
    const first = await startLocal(env)
    const second = startLocal(env)
    await expect(second).rejects.toThrow(/another local control plane .* SWARMPLANE_DATA_DIR/)
    await stopLocal(first)
  })

  test("keeps its state in the journal store.jsonl of the data folder by default", async () => {
    const env = fresh()
    const s = await startLocal(env)
    expect(s.output()).toMatch(/state in .* on journal/)
    expect(existsSync(join(env.SWARMPLANE_DATA_DIR, "store.jsonl"))).toBe(true)
    expect(existsSync(join(env.SWARMPLANE_DATA_DIR, "dynamo"))).toBe(false)
    expect(await stopLocal(s)).toBe(0)
  })

  test("SWARMPLANE_LOCAL_STORE=dynalite keeps state in dynalite, and a folder made so stays on it", async () => {
    const env = fresh()
    const first = await startLocal({ ...env, SWARMPLANE_LOCAL_STORE: "dynalite" })
    expect(first.output()).toMatch(/state in .* on dynalite/)
    const key = readFileSync(join(env.SWARMPLANE_DATA_DIR, "admin-key"), "utf8").trim()
    expect((await call(first.url, key, "POST", "/v1/swarms", { name: "llm", model: "echo" })).status).toBe(
      202,
    )
    expect(await stopLocal(first)).toBe(0)
    expect(readdirSync(join(env.SWARMPLANE_DATA_DIR, "dynamo")).length).toBeGreaterThan(0)
    expect(existsSync(join(env.SWARMPLANE_DATA_DIR, "store.jsonl"))).toBe(false)

    // No setting: the folder's dynalite state is what it goes on with, not a fresh journal.
    const second = await startLocal(env)
    expect(second.output()).toMatch(/state in .* on dynalite/)
    expect((await call(second.url, key, "GET", "/v1/swarms/llm")).json).toMatchObject({ name: "llm" })
    expect(await stopLocal(second), second.output()).toBe(0)
  })

  test("an unknown SWARMPLANE_LOCAL_STORE is refused with the choices", async () => {
    const started = startLocal({ ...fresh(), SWARMPLANE_LOCAL_STORE: "leveldb" })
    await expect(started).rejects.toThrow(
      /exited with 2[\s\S]*SWARMPLANE_LOCAL_STORE must be journal or dynalite/,
    )
  })
})
