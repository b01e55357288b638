/**
 * The Kubernetes client against a small scripted HTTPS server, with a CA and a server certificate made
 * by the `openssl` CLI for this run: each request gets the next scripted answer (a status and body, or
 * one computed from the request), and every request is recorded. Backoff waits go to an injected sleep
 * that only records them, so no test waits in real time.
 */
import { execFileSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer as createHttpServer, type IncomingMessage } from "node:http"
import { createServer, type Server } from "node:https"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, afterEach, beforeAll, describe, expect, test } from "vitest"
import { isReason } from "./api-error"
import { createAccessCache, eksAccess } from "./auth"
import { KubeApiError, type KubeClientOptions, kubeClient } from "./client"
import type { Job } from "./types"

let dir: string
let pki: { ca: string; otherCa: string; key: string; cert: string }

/** A CA, a server certificate it signs for 127.0.0.1, and an unrelated second CA. */
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "kube-client-"))
  const ssl = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: "pipe" })
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
  for (const name of ["ca", "other"])
    ssl(
      "req",
      "-x509",
      ...ec,
      "-keyout",
      `${name}.key`,
      "-out",
      `${name}.pem`,
      "-days",
      "2",
      "-subj",
      `/CN=${name}`,
      "-addext",
      "basicConstraints=critical,CA:TRUE",
      "-addext",
      "keyUsage=keyCertSign,cRLSign",
    )
  ssl("req", ...ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=kube-apiserver")
  writeFileSync(join(dir, "ext.cnf"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
  ssl(
    "x509",
    "-req",
    "-in",
    "server.csr",
    "-CA",
    "ca.pem",
    "-CAkey",
    "ca.key",
    "-CAcreateserial",
    "-out",
    "server.pem",
    "-days",
    "2",
    "-extfile",
    "ext.cnf",
  )
  const read = (name: string) => readFileSync(join(dir, name), "utf8")
  pki = { ca: read("ca.pem"), otherCa: read("other.pem"), key: read("server.key"), cert: read("server.pem") }
})
afterAll(() => rmSync(dir, { recursive: true, force: true }))

type Answer =
  | { status: number; body?: unknown; headers?: Record<string, string> }
  | ((seen: Seen) => { status: number; body?: unknown; headers?: Record<string, string> })

interface Seen {
  method: string
  url: URL
  authorization?: string
  contentType?: string
  body?: unknown
}

const servers: (Server | ReturnType<typeof createHttpServer>)[] = []
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  }
})

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  const text = Buffer.concat(chunks).toString()
  return text ? JSON.parse(text) : undefined
}

const status = (code: number, reason: string, message: string, details?: unknown) => ({
  kind: "Status",
  apiVersion: "v1",
  metadata: {},
  status: "Failure",
  message,
  reason,
  code,
  ...(details ? { details } : {}),
})

/** A server answering `script` in order (the last answer repeats), and a client of it. */
async function scripted(script: Answer[], options: Partial<KubeClientOptions> & { ca?: string } = {}) {
  const seen: Seen[] = []
  const sleeps: number[] = []
  const refreshes: string[] = []
  let next = 0
  const server = createServer({ key: pki.key, cert: pki.cert }, async (req, res) => {
    const one: Seen = {
      method: req.method ?? "",
      url: new URL(req.url ?? "/", "https://x"),
      authorization: req.headers.authorization,
      contentType: req.headers["content-type"],
      body: await readBody(req),
    }
    seen.push(one)
    const answer = script[Math.min(next++, script.length - 1)]!
    const { status, body, headers } = typeof answer === "function" ? answer(one) : answer
    res.writeHead(status, { "content-type": "application/json", ...headers })
    res.end(body === undefined ? "" : typeof body === "string" ? body : JSON.stringify(body))
  })
  servers.push(server)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const endpoint = `https://127.0.0.1:${(server.address() as AddressInfo).port}`
  let token = "tok-SECRET-1"
  const client = kubeClient({
    access: {
      cluster: async () => ({ endpoint, caPem: options.ca ?? pki.ca }),
      async token({ refresh = false } = {}) {
        if (refresh) {
          token = `tok-SECRET-${refreshes.length + 2}`
          refreshes.push(token)
        }
        return token
      },
    },
    sleep: async (ms) => {
      sleeps.push(ms)
    },
    random: () => 0.5,
    ...options,
  })
  return { client, seen, sleeps, refreshes }
}

const job = (name: string): Job => ({
  apiVersion: "batch/v1",
  kind: "Job",
  metadata: { name, namespace: "team-a", labels: { "kueue.x-k8s.io/queue-name": "user-queue" } },
  spec: {
    suspend: true,
    template: { spec: { restartPolicy: "Never", containers: [{ name: "main", image: "busybox" }] } },
  },
})

describe("lists", () => {
  test("read every page with limit/continue and the label selector, with the bearer token", async () => {
    const pages: Record<string, { items: Job[]; continue?: string }> = {
      "": { items: [job("a"), job("b")], continue: "c1" },
      c1: { items: [job("c")], continue: "c2" },
      c2: { items: [] },
    }
    const { client, seen } = await scripted(
      [
        ({ url }) => {
          const page = pages[url.searchParams.get("continue") ?? ""]!
          return {
            status: 200,
            body: {
              kind: "JobList",
              apiVersion: "batch/v1",
              metadata: { continue: page.continue },
              items: page.items,
            },
          }
        },
      ],
      { pageSize: 2 },
    )
    const jobs = await client.jobs.list("team-a", { labelSelector: "swarmplane.dev/backend=gpu" })
    expect(jobs.map((j) => j.metadata.name)).toEqual(["a", "b", "c"])
    expect(seen.map((s) => s.url.pathname)).toEqual(Array(3).fill("/apis/batch/v1/namespaces/team-a/jobs"))
    expect(seen.map((s) => s.url.searchParams.get("continue"))).toEqual([null, "c1", "c2"])
    for (const s of seen) {
      expect(s.url.searchParams.get("labelSelector")).toBe("swarmplane.dev/backend=gpu")
      expect(s.url.searchParams.get("limit")).toBe("2")
      expect(s.authorization).toBe("Bearer tok-SECRET-1")
    }
  })

  test("an expired continue token (410) starts the list over once, without duplicates", async () => {
    let expiredOnce = false
    const { client, seen } = await scripted([
      ({ url }) => {
        const cont = url.searchParams.get("continue")
        if (cont === "c1" && !expiredOnce) {
          expiredOnce = true
          return { status: 410, body: status(410, "Expired", "The provided continue parameter is too old") }
        }
        return cont
          ? { status: 200, body: { items: [{ metadata: { name: "w2" } }] } }
          : { status: 200, body: { metadata: { continue: "c1" }, items: [{ metadata: { name: "w1" } }] } }
      },
    ])
    const workloads = await client.workloads.list("team-a")
    expect(workloads.map((w) => w.metadata.name)).toEqual(["w1", "w2"])
    expect(seen).toHaveLength(4)
    expect(seen[0]!.url.pathname).toBe("/apis/kueue.x-k8s.io/v1beta1/namespaces/team-a/workloads")
  })

  test("cluster-scoped ClusterQueues and namespaced LocalQueues are read at their Kueue paths", async () => {
    const { client, seen } = await scripted([
      { status: 200, body: { metadata: { name: "cq" }, status: { pendingWorkloads: 3 } } },
      { status: 200, body: { items: [{ metadata: { name: "user-queue" } }] } },
    ])
    expect((await client.clusterQueues.get("cq"))?.status?.pendingWorkloads).toBe(3)
    expect(await client.localQueues.list("team-a")).toHaveLength(1)
    expect(seen.map((s) => s.url.pathname)).toEqual([
      "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/cq",
      "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-a/localqueues",
    ])
  })
})

describe("objects", () => {
  test("get of a missing object is undefined; a create of a taken name is AlreadyExists with the server's message", async () => {
    const { client, seen } = await scripted([
      { status: 404, body: status(404, "NotFound", 'jobs.batch "train-42" not found') },
      { status: 409, body: status(409, "AlreadyExists", 'jobs.batch "train-42" already exists') },
    ])
    expect(await client.jobs.get("team-a", "train-42")).toBeUndefined()
    const error = await client.jobs.create("team-a", job("train-42")).catch((e: unknown) => e)
    expect(isReason(error, "AlreadyExists")).toBe(true)
    expect((error as KubeApiError).status).toBe(409)
    expect((error as KubeApiError).message).toContain('jobs.batch "train-42" already exists')
    expect(seen[1]!.method).toBe("POST")
    expect(seen[1]!.body).toEqual(job("train-42"))
    expect(seen).toHaveLength(2) // a 409 is not retried
  })

  test("delete sends propagationPolicy=Background and is idempotent", async () => {
    const { client, seen } = await scripted([
      { status: 200, body: { kind: "Status", status: "Success", details: { name: "train-42" } } },
      { status: 404, body: status(404, "NotFound", 'jobs.batch "train-42" not found') },
    ])
    expect(await client.jobs.delete("team-a", "train-42")).toBe(true)
    expect(await client.jobs.delete("team-a", "train-42")).toBe(false)
    for (const s of seen) {
      expect(s.method).toBe("DELETE")
      expect(s.url.pathname).toBe("/apis/batch/v1/namespaces/team-a/jobs/train-42")
      expect(s.url.searchParams.get("propagationPolicy")).toBe("Background")
    }
  })

  test("patch is a JSON merge patch; a patch of a missing object is NotFound", async () => {
    const { client, seen } = await scripted([
      ({ body }) => ({
        status: 200,
        body: { ...job("d"), spec: { ...job("d").spec, ...(body as { spec: object }).spec } },
      }),
      { status: 404, body: status(404, "NotFound", 'deployments.apps "d" not found') },
    ])
    const patched = await client.jobs.patch("team-a", "d", { spec: { suspend: false } })
    expect(patched.spec?.suspend).toBe(false)
    expect(seen[0]!.contentType).toBe("application/merge-patch+json")
    expect(seen[0]!.body).toEqual({ spec: { suspend: false } })
    const error = await client.deployments
      .patch("team-a", "d", { spec: { replicas: 2 } })
      .catch((e: unknown) => e)
    expect(isReason(error, "NotFound")).toBe(true)
    expect(seen[1]!.url.pathname).toBe("/apis/apps/v1/namespaces/team-a/deployments/d")
  })

  test("a pod's log is read with tailLines and container", async () => {
    const { client, seen } = await scripted([
      { status: 200, body: "line 1\nline 2\n", headers: { "content-type": "text/plain" } },
    ])
    expect(await client.pods.log("team-a", "train-42-0-abcde", { container: "main", tailLines: 2 })).toBe(
      "line 1\nline 2\n",
    )
    expect(seen[0]!.url.pathname).toBe("/api/v1/namespaces/team-a/pods/train-42-0-abcde/log")
    expect(seen[0]!.url.searchParams.get("tailLines")).toBe("2")
    expect(seen[0]!.url.searchParams.get("container")).toBe("main")
  })
})

describe("retries and errors", () => {
  test("429 and 5xx are retried with backoff, waiting at least what Retry-After asks", async () => {
    const { client, seen, sleeps } = await scripted(
      [
        {
          status: 429,
          body: status(429, "TooManyRequests", "too many requests"),
          headers: { "retry-after": "7" },
        },
        { status: 503, body: status(503, "ServiceUnavailable", "etcd busy") },
        { status: 200, body: { items: [] } },
      ],
      { backoffMs: 100 },
    )
    expect(await client.pods.list("team-a")).toEqual([])
    expect(seen).toHaveLength(3)
    expect(sleeps[0]).toBeGreaterThanOrEqual(7000)
    expect(sleeps[1]).toBeGreaterThan(0)
    expect(sleeps[1]).toBeLessThan(7000)
  })

  test("a named create is retried after a 500 (a landed create answers AlreadyExists, which adopts)", async () => {
    const { client, seen } = await scripted([
      { status: 500, body: status(500, "InternalError", "boom") },
      { status: 201, body: job("train-42") },
    ])
    expect((await client.jobs.create("team-a", job("train-42"))).metadata.name).toBe("train-42")
    expect(seen.map((s) => s.method)).toEqual(["POST", "POST"])
  })

  const notRetried: Record<string, { code: number; reason: string; retryable: boolean }> = {
    "403 Forbidden": { code: 403, reason: "Forbidden", retryable: true },
    "422 Invalid": { code: 422, reason: "Invalid", retryable: false },
    "400 BadRequest": { code: 400, reason: "BadRequest", retryable: false },
  }
  for (const [name, tc] of Object.entries(notRetried))
    test(`${name} is thrown at once with its reason`, async () => {
      const { client, seen } = await scripted([
        { status: tc.code, body: status(tc.code, tc.reason, `refused: ${name}`) },
      ])
      const error = await client.services
        .create("team-a", { metadata: { name: "s" } })
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(KubeApiError)
      expect((error as KubeApiError).reason).toBe(tc.reason)
      expect((error as KubeApiError).retryable).toBe(tc.retryable)
      expect(seen).toHaveLength(1)
    })

  test("retries stop at the limit, with the last failure", async () => {
    const { client, seen } = await scripted([{ status: 502, body: "<html>bad gateway</html>" }], {
      retries: 2,
    })
    const error = (await client.jobs.get("team-a", "x").catch((e: unknown) => e)) as KubeApiError
    expect(error.status).toBe(502)
    expect(error.message).toContain("bad gateway")
    expect(seen).toHaveLength(3)
  })

  test("a 401 gets one fresh token and one more try; a second 401 is Unauthorized", async () => {
    const ok = await scripted([
      { status: 401, body: status(401, "Unauthorized", "Unauthorized") },
      { status: 200, body: job("a") },
    ])
    expect((await ok.client.jobs.get("team-a", "a"))?.metadata.name).toBe("a")
    expect(ok.refreshes).toEqual(["tok-SECRET-2"])
    expect(ok.seen.map((s) => s.authorization)).toEqual(["Bearer tok-SECRET-1", "Bearer tok-SECRET-2"])

    const refused = await scripted([{ status: 401, body: status(401, "Unauthorized", "Unauthorized") }])
    const error = await refused.client.jobs.get("team-a", "a").catch((e: unknown) => e)
    expect(isReason(error, "Unauthorized")).toBe(true)
    expect(refused.seen).toHaveLength(2)
    expect(refused.refreshes).toHaveLength(1)
  })

  test("the token never reaches an error message, even when the server echoes it", async () => {
    const { client } = await scripted(
      [
        ({ authorization }) => ({
          status: 500,
          body: status(500, "InternalError", `cannot use ${authorization}`),
        }),
      ],
      { retries: 0 },
    )
    const error = (await client.jobs.list("team-a").catch((e: unknown) => e)) as KubeApiError
    expect(error.message).toContain("cannot use Bearer ***")
    expect(error.message).not.toContain("tok-SECRET")
  })

  test("a server whose certificate the cluster CA did not sign is refused before any request", async () => {
    const { client, seen } = await scripted([{ status: 200, body: { items: [] } }], {
      ca: pki.otherCa,
      retries: 0,
    })
    const error = (await client.jobs.list("team-a").catch((e: unknown) => e)) as KubeApiError
    expect(error).toBeInstanceOf(KubeApiError)
    expect(error.status).toBeUndefined()
    expect(error.message).toMatch(/certificate/i)
    expect(seen).toHaveLength(0)
  })

  test("no request starts past the deadline, and no backoff runs into it", async () => {
    const now = 1_000_000
    const late = await scripted([{ status: 200, body: { items: [] } }], { now: () => now, deadline: now - 1 })
    await expect(late.client.jobs.list("team-a")).rejects.toThrow(/deadline passed/)
    expect(late.seen).toHaveLength(0)

    const busy = await scripted(
      [{ status: 503, body: status(503, "ServiceUnavailable", "busy"), headers: { "retry-after": "30" } }],
      {
        now: () => now,
        deadline: now + 10_000,
      },
    )
    await expect(busy.client.jobs.list("team-a")).rejects.toThrow(/503 ServiceUnavailable/)
    expect(busy.seen).toHaveLength(1)
    expect(busy.sleeps).toEqual([])
  })
})

describe("with eksAccess", () => {
  test("DescribeCluster's CA verifies the API server; its token is sent, and re-signed after a 401", async () => {
    const { seen } = await scripted([
      { status: 401, body: status(401, "Unauthorized", "Unauthorized") },
      { status: 200, body: { items: [job("a")] } },
    ])
    const apiServer = servers.at(-1) as Server
    const endpoint = `https://127.0.0.1:${(apiServer.address() as AddressInfo).port}`
    const eks = createHttpServer((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" })
      res.end(
        JSON.stringify({
          cluster: {
            name: "gpu-prod",
            status: "ACTIVE",
            endpoint,
            certificateAuthority: { data: Buffer.from(pki.ca).toString("base64") },
          },
        }),
      )
    })
    servers.push(eks)
    await new Promise<void>((resolve) => eks.listen(0, "127.0.0.1", resolve))
    let clock = Date.parse("2026-08-01T10:00:00Z")
    const access = eksAccess({
      clusterName: "gpu-prod",
      region: "us-west-2",
      eksEndpoint: `http://127.0.0.1:${(eks.address() as AddressInfo).port}`,
      credentials: { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "secret" },
      // Each reading a second later, so a re-signed token differs from the first.
      now: () => (clock += 1000),
      cache: createAccessCache(),
    })
    const client = kubeClient({ access, sleep: async () => {} })
    expect((await client.jobs.list("team-a")).map((j) => j.metadata.name)).toEqual(["a"])
    const tokens = seen.map((s) => s.authorization)
    expect(tokens).toHaveLength(2)
    for (const t of tokens) expect(t).toMatch(/^Bearer k8s-aws-v1\.[A-Za-z0-9_-]+$/)
    expect(tokens[1]).not.toBe(tokens[0])
  })
})
