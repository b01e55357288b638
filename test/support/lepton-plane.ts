/**
 * Test support: a local control plane in this process (fast ticks) beside a fake DGX Cloud Lepton
 * workspace, with the workspace token as the plane's `lepton-token` file secret, and the helpers the
 * Lepton suite uses (register a backend on the fake, submit, wait for the end, restart the plane on
 * the same data, read the fake's API as a user of Lepton would).
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { memoryLogger } from "@swarmplane/core/util/logger"
import { expect } from "vitest"
import { startLocalControlPlane } from "../../functions/local/control-plane"
import { type FakeLepton, type FakeLeptonOptions, startFakeLepton } from "./fake-lepton"
import { type Plane, until } from "./plane"

export interface LeptonPlane {
  p: Plane
  fake: FakeLepton
  /** A lepton backend config for the fake, with `extra` fields over it. */
  config(extra?: Record<string, unknown>): Record<string, unknown>
  register(id: string, extra?: Record<string, unknown>): Promise<void>
  /** Put a secret in the plane's file secrets (project `default`). */
  secret(name: string, value: string): void
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary response shapes
  job(id: string): Promise<any>
  submit(backendId: string, spec: Record<string, unknown>): Promise<string>
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary response shapes
  finished(id: string, timeoutMs?: number): Promise<any>
  /** Create or update a swarm (`POST /v1/swarms`, 202 expected) on `backendId`. */
  applySwarm(backendId: string, spec: Record<string, unknown>): Promise<void>
  /** The swarm, once RUNNING at its latest generation (what an update asked for is served). */
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary response shapes
  running(name: string, timeoutMs?: number): Promise<any>
  /** A call to the fake's workspace API with its token. */
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary response shapes
  lepton(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>
  /** Stop the control plane and start it again on the same data (the fake keeps running). */
  restart(): Promise<void>
  stop(): Promise<void>
}

/** A control plane on `dataDir` (made or reopened), with the API helpers of test/support/plane.ts. */
async function planeOn(dir: string): Promise<Plane> {
  const plane = await startLocalControlPlane({
    dataDir: join(dir, "data"),
    host: "127.0.0.1",
    port: 0,
    logger: memoryLogger(),
    localBackend: false,
    agentEnv: process.env,
    reconcileEveryMs: 300,
    autoscaleEveryMs: 3_600_000,
  })
  return {
    plane,
    dir,
    workerKey: "",
    async call(method, path, body, key, headers = {}) {
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
      return { status: res.status, json: text ? JSON.parse(text) : undefined }
    },
    stop: () => plane.stop(),
  }
}

export async function leptonPlane(options: FakeLeptonOptions = {}): Promise<LeptonPlane> {
  const fake = await startFakeLepton(options)
  const dir = mkdtempSync(join(tmpdir(), "swarmplane-lepton-"))
  const secrets = join(dir, "data", "secrets", "default")
  mkdirSync(secrets, { recursive: true })
  const secret = (name: string, value: string) => writeFileSync(join(secrets, name), value, { mode: 0o600 })
  secret("lepton-token", fake.token)
  const current = { p: await planeOn(dir) }
  const call: Plane["call"] = (...args) => current.p.call(...args)
  const job = async (id: string) => (await call("GET", `/v1/jobs/${id}`)).json
  const config = (extra: Record<string, unknown> = {}) => ({
    type: "lepton",
    workspaceId: fake.workspaceId,
    workspaceUrl: fake.url,
    tokenSecret: "lepton-token",
    nodeGroup: "fake-node-group",
    resourceShape: "cpu.small",
    ...extra,
  })
  return {
    get p() {
      return current.p
    },
    fake,
    config,
    secret,
    async register(id, extra) {
      const res = await call("POST", "/v1/backends", { id, config: config(extra) })
      expect([200, 201], JSON.stringify(res.json)).toContain(res.status)
    },
    job,
    async submit(backendId, spec) {
      const res = await call("POST", "/v1/jobs", { backendId, ...spec })
      expect(res.status, JSON.stringify(res.json)).toBe(202)
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
    async applySwarm(backendId, spec) {
      const res = await call("POST", "/v1/swarms", { backendId, ...spec })
      expect(res.status, JSON.stringify(res.json)).toBe(202)
    },
    running: (name, timeoutMs = 60_000) =>
      until(
        `swarm ${name} to be RUNNING`,
        async () => {
          const s = (await call("GET", `/v1/swarms/${name}?wait=RUNNING&timeoutS=10`)).json
          return s.phase === "RUNNING" && s.observedGeneration === s.generation && s
        },
        timeoutMs,
      ),
    async lepton(method, path, body) {
      const res = await fetch(`${fake.url}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${fake.token}`,
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      })
      const text = await res.text()
      return { status: res.status, body: text ? JSON.parse(text) : undefined }
    },
    async restart() {
      await current.p.stop()
      current.p = await planeOn(dir)
    },
    async stop() {
      await current.p.stop()
      await fake.stop()
    },
  }
}
