/**
 * Test support: a local control plane in this process (fast ticks) beside a fake DGX Cloud Lepton
 * workspace, with the workspace token as the plane's `lepton-token` file secret, and the helpers the
 * Lepton suite uses (register a backend on the fake, submit, wait for the end, restart the plane on
 * the same data, read the fake's API as a user of Lepton would).
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { expect } from "vitest"
import { type FakeLepton, type FakeLeptonOptions, startFakeLepton } from "./fake-lepton"
import { type Plane, type RestartablePlane, restartablePlane, until } from "./plane"

export interface LeptonPlane extends Omit<RestartablePlane, "register"> {
  fake: FakeLepton
  /** A lepton backend config for the fake, with `extra` fields over it. */
  config(extra?: Record<string, unknown>): Record<string, unknown>
  /** Register a lepton backend on the fake. */
  register(id: string, extra?: Record<string, unknown>): Promise<void>
  /** Put a secret in the plane's file secrets (project `default`). */
  secret(name: string, value: string): void
  /** Create or update a swarm (`POST /v1/swarms`, 202 expected) on `backendId`. */
  applySwarm(backendId: string, spec: Record<string, unknown>): Promise<void>
  /** The swarm, once RUNNING at its latest generation (what an update asked for is served). */
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary response shapes
  running(name: string, timeoutMs?: number): Promise<any>
  /** A call to the fake's workspace API with its token. */
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary response shapes
  lepton(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>
}

export async function leptonPlane(options: FakeLeptonOptions = {}): Promise<LeptonPlane> {
  const fake = await startFakeLepton(options)
  const dir = mkdtempSync(join(tmpdir(), "swarmplane-lepton-"))
  const secrets = join(dir, "data", "secrets", "default")
  mkdirSync(secrets, { recursive: true })
  const secret = (name: string, value: string) => writeFileSync(join(secrets, name), value, { mode: 0o600 })
  secret("lepton-token", fake.token)
  const r = await restartablePlane(dir)
  const call: Plane["call"] = (...args) => r.p.call(...args)
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
      return r.p
    },
    dir,
    fake,
    config,
    secret,
    register: (id, extra) => r.register(id, config(extra)),
    job: r.job,
    submit: r.submit,
    finished: r.finished,
    restart: r.restart,
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
    async stop() {
      await r.stop()
      await fake.stop()
    },
  }
}
