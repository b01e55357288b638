/**
 * Test support: a local control plane in this process (fast ticks) beside a fake EKS cluster running
 * Kueue, and the helpers the eks suite uses (register a backend on the fake, submit, wait for the end,
 * restart the plane on the same data). The plane reaches the cluster as a Lambda would: with the
 * process's own AWS credentials (the default provider chain reads the standard environment variables,
 * set here to the fake's IAM user), DescribeCluster at the backend's `endpoint`, then a signed token.
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { memoryLogger } from "@swarmplane/core/util/logger"
import { expect } from "vitest"
import { startLocalControlPlane } from "../../functions/local/control-plane"
import { defaultUser, type FakeKube, type FakeKubeOptions, startFakeKube } from "./fake-kube"
import { type Plane, until } from "./plane"

export interface EksPlane {
  p: Plane
  fake: FakeKube
  /** An eks backend config for the fake, with `extra` fields over it. */
  config(extra?: Record<string, unknown>): Record<string, unknown>
  register(id: string, extra?: Record<string, unknown>): Promise<void>
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary response shapes
  job(id: string): Promise<any>
  submit(backendId: string, spec: Record<string, unknown>): Promise<string>
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary response shapes
  finished(id: string, timeoutMs?: number): Promise<any>
  /** Stop the control plane and start it again on the same data (the fake keeps running). */
  restart(): Promise<void>
  stop(): Promise<void>
}

/** A control plane on `dir` (made or reopened), with the API helpers of test/support/plane.ts. */
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

export async function eksPlane(options: FakeKubeOptions = {}): Promise<EksPlane> {
  // The function's own credentials, as the default provider chain finds them on a Lambda.
  process.env.AWS_ACCESS_KEY_ID = defaultUser.accessKeyId
  process.env.AWS_SECRET_ACCESS_KEY = defaultUser.secretAccessKey
  delete process.env.AWS_SESSION_TOKEN
  delete process.env.AWS_PROFILE
  const fake = await startFakeKube(options)
  const dir = mkdtempSync(join(tmpdir(), "swarmplane-eks-"))
  const current = { p: await planeOn(dir) }
  const call: Plane["call"] = (...args) => current.p.call(...args)
  const job = async (id: string) => (await call("GET", `/v1/jobs/${id}`)).json
  const config = (extra: Record<string, unknown> = {}) => ({
    type: "eks",
    clusterName: fake.clusterName,
    region: fake.region,
    endpoint: fake.eksUrl,
    namespace: "team-a",
    localQueue: "user-queue",
    ...extra,
  })
  return {
    get p() {
      return current.p
    },
    fake,
    config,
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
    finished: (id, timeoutMs = 45_000) =>
      until(
        `job ${id} to finish`,
        async () => {
          const j = await job(id)
          return ["SUCCEEDED", "FAILED", "CANCELLED"].includes(j.status) && j
        },
        timeoutMs,
      ),
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
