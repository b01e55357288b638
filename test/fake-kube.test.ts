/**
 * The fake EKS/Kubernetes/Kueue cluster against the contract the `eks` backend relies on (Parts B–D
 * of the backend contracts), seen as a client sees it: DescribeCluster through `@aws-sdk/client-eks`,
 * TLS verified against the cluster CA, IAM bearer tokens (expiry by the injected clock), Status error
 * bodies, selectors and paging, Kueue admission in priority order within quota, Jobs whose pods really
 * run and whose logs are served, failures, preemption, and a Deployment served behind its Service.
 */

import { execFile } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { request as httpsRequest } from "node:https"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { DescribeClusterCommand, EKSClient } from "@aws-sdk/client-eks"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type FakeKube, startFakeKube, workloadName } from "./support/fake-kube"
import { hasKubectl } from "./support/kubectl"

const execFileAsync = promisify(execFile)

// biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary Kubernetes objects
type Wire = any

interface Reply {
  status: number
  body: Wire
  headers: Record<string, string | string[] | undefined>
}

/** One HTTPS request to the fake's API, trusting only its CA (unless `ca` is overridden). */
function kube(
  fake: FakeKube,
  method: string,
  path: string,
  options: { token?: string; body?: unknown; contentType?: string; ca?: string | null } = {},
): Promise<Reply> {
  const url = new URL(path, fake.server)
  const headers: Record<string, string> = { accept: "application/json" }
  if (options.token) headers.authorization = `Bearer ${options.token}`
  const payload = options.body === undefined ? undefined : JSON.stringify(options.body)
  if (payload !== undefined) headers["content-type"] = options.contentType ?? "application/json"
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      url,
      { method, headers, ca: options.ca === null ? undefined : (options.ca ?? fake.caPem) },
      (res) => {
        let text = ""
        res.setEncoding("utf8")
        res.on("data", (chunk: string) => {
          text += chunk
        })
        res.on("end", () => {
          let body: unknown = text
          try {
            body = JSON.parse(text)
          } catch {
            // a log is text
          }
          resolve({ status: res.statusCode ?? 0, body, headers: res.headers })
        })
      },
    )
    req.once("error", reject)
    req.end(payload)
  })
}

/** Poll until `done` accepts the value, or fail with the last one at the deadline. */
async function waitFor<T>(probe: () => Promise<T>, done: (v: T) => boolean, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms
  let last = await probe()
  while (!done(last)) {
    if (Date.now() > deadline) throw new Error(`condition not met in ${ms} ms; last: ${JSON.stringify(last)}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
    last = await probe()
  }
  return last
}

const condition = (o: Wire, type: string) => (o?.status?.conditions ?? []).find((c: Wire) => c.type === type)

const ns = "team-a"
const jobsPath = `/apis/batch/v1/namespaces/${ns}/jobs`
const podsPath = `/api/v1/namespaces/${ns}/pods`
const workloadsPath = `/apis/kueue.x-k8s.io/v1beta1/namespaces/${ns}/workloads`

/** A queue-labelled batch/v1 Job whose pods run `script` with `sh -c`. */
function job(name: string, script: string, options: Wire = {}): Wire {
  return {
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: {
      name,
      labels: {
        "kueue.x-k8s.io/queue-name": options.queue ?? "user-queue",
        "swarmplane.dev/task": name,
        ...(options.priorityClass ? { "kueue.x-k8s.io/priority-class": options.priorityClass } : {}),
        ...(options.labels ?? {}),
      },
    },
    spec: {
      parallelism: options.parallelism ?? 1,
      completions: options.completions ?? options.parallelism ?? 1,
      ...(options.indexed ? { completionMode: "Indexed" } : {}),
      backoffLimit: options.backoffLimit ?? 0,
      suspend: true,
      template: {
        spec: {
          restartPolicy: "Never",
          containers: [
            {
              name: "main",
              image: options.image ?? "busybox:1.36",
              command: ["/bin/sh", "-c", script],
              env: [{ name: "GREETING", value: "hello-from-env" }, ...(options.env ?? [])],
              resources: {
                requests: { cpu: "1", memory: "1Gi", "nvidia.com/gpu": String(options.gpus ?? 1) },
              },
            },
          ],
        },
      },
    },
  }
}

describe("fake EKS: DescribeCluster and TLS", () => {
  let fake: FakeKube
  beforeAll(async () => {
    fake = await startFakeKube({ clusterName: "gpu-prod" })
  })
  afterAll(async () => {
    await fake.stop()
    expect(fake.controllerErrors).toEqual([])
  })

  const eks = () =>
    new EKSClient({
      region: fake.region,
      endpoint: fake.eksUrl,
      credentials: { accessKeyId: "AKIAEXAMPLE", secretAccessKey: "secret" },
      maxAttempts: 1,
    })

  it("describes an ACTIVE cluster with its https endpoint and the CA PEM, base64", async () => {
    const out = await eks().send(new DescribeClusterCommand({ name: "gpu-prod" }))
    expect(out.cluster?.status).toBe("ACTIVE")
    expect(out.cluster?.endpoint).toBe(fake.server)
    expect(out.cluster?.endpoint).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/)
    expect(out.cluster?.arn).toBe(`arn:aws:eks:${fake.region}:111122223333:cluster/gpu-prod`)
    expect(out.cluster?.createdAt).toBeInstanceOf(Date)
    const pem = Buffer.from(out.cluster?.certificateAuthority?.data ?? "", "base64").toString("utf8")
    expect(pem).toBe(fake.caPem)
    expect(pem).toContain("-----BEGIN CERTIFICATE-----")
  })

  it("hides endpoint and CA while the cluster is CREATING", async () => {
    fake.setClusterStatus("CREATING")
    const out = await eks().send(new DescribeClusterCommand({ name: "gpu-prod" }))
    fake.setClusterStatus("ACTIVE")
    expect(out.cluster?.status).toBe("CREATING")
    expect(out.cluster?.endpoint).toBeUndefined()
    expect(out.cluster?.certificateAuthority).toBeUndefined()
  })

  it("answers an unknown cluster with ResourceNotFoundException, and injected faults with their type", async () => {
    const missing = await eks()
      .send(new DescribeClusterCommand({ name: "nope" }))
      .catch((e: Wire) => e)
    expect(missing.name).toBe("ResourceNotFoundException")
    expect(missing.$metadata.httpStatusCode).toBe(404)
    expect(missing.message).toBe("No cluster found for name: nope.")
    fake.injectEksFault({ status: 503, type: "ServiceUnavailableException" })
    const unavailable = await eks()
      .send(new DescribeClusterCommand({ name: "gpu-prod" }))
      .catch((e: Wire) => e)
    expect(unavailable.name).toBe("ServiceUnavailableException")
    expect(unavailable.$metadata.httpStatusCode).toBe(503)
  })

  it("serves the API over TLS that verifies only against the cluster CA", async () => {
    const token = await fake.token()
    const ok = await kube(fake, "GET", "/version", { token })
    expect(ok.status).toBe(200)
    expect(ok.body.gitVersion).toMatch(/^v1\.31/)
    // Without the CA (the system store only), the handshake fails.
    const refused = await kube(fake, "GET", "/version", { token, ca: null }).catch(
      (e: Error & { code?: string }) => e,
    )
    expect(refused).toBeInstanceOf(Error)
    expect((refused as Error & { code?: string }).code).toMatch(
      /SELF_SIGNED|UNABLE_TO_VERIFY|UNABLE_TO_GET_ISSUER/,
    )
  })
})

describe("fake EKS: IAM bearer tokens", () => {
  let fake: FakeKube
  let clock = Date.parse("2026-08-01T10:00:00Z")
  beforeAll(async () => {
    fake = await startFakeKube({ clusterName: "gpu-prod", now: () => clock, namespaces: [ns] })
  })
  afterAll(async () => {
    await fake.stop()
    expect(fake.controllerErrors).toEqual([])
  })

  const unauthorized = {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message: "Unauthorized",
    reason: "Unauthorized",
    code: 401,
  }

  it("accepts a presigned GetCallerIdentity token for this cluster and refuses a missing one", async () => {
    expect((await kube(fake, "GET", jobsPath, { token: await fake.token() })).status).toBe(200)
    const none = await kube(fake, "GET", jobsPath)
    expect(none.status).toBe(401)
    expect(none.body).toEqual(unauthorized)
    expect((await kube(fake, "GET", jobsPath, { token: "k8s-aws-v1.bm90LWEtdXJs" })).status).toBe(401)
  })

  it("refuses tokens for another cluster, without the signed x-k8s-aws-id header, or signed with a wrong secret", async () => {
    const other = await startFakeKube({ clusterName: "other-cluster", now: () => clock })
    try {
      const forOther = await other.token()
      expect((await kube(fake, "GET", jobsPath, { token: forOther })).status).toBe(401)
    } finally {
      await other.stop()
    }
    expect(
      (await kube(fake, "GET", jobsPath, { token: await fake.token({ omitClusterHeader: true }) })).status,
    ).toBe(401)
    const wrongSecret = await fake.token({
      user: { accessKeyId: fake.users[0]?.accessKeyId ?? "", secretAccessKey: "wrong" },
    })
    expect((await kube(fake, "GET", jobsPath, { token: wrongSecret })).status).toBe(401)
    expect((await kube(fake, "GET", jobsPath, { token: await fake.token({ expiresIn: 901 }) })).status).toBe(
      401,
    )
  })

  it("expires a token 15 minutes after X-Amz-Date, by the fake's clock, whatever X-Amz-Expires says", async () => {
    const token = await fake.token({ expiresIn: 60 })
    clock += 14 * 60_000
    expect((await kube(fake, "GET", jobsPath, { token })).status).toBe(200)
    clock += 2 * 60_000
    const expired = await kube(fake, "GET", jobsPath, { token })
    expect(expired.status).toBe(401)
    expect(expired.body.reason).toBe("Unauthorized")
    expect((await kube(fake, "GET", jobsPath, { token: await fake.token() })).status).toBe(200)
  })

  it("answers a forbidden resource with 403 Forbidden naming the user, verb, resource and namespace", async () => {
    fake.forbid({ resource: "jobs", verb: "create", namespace: ns })
    const token = await fake.token()
    const res = await kube(fake, "POST", jobsPath, { token, body: job("nope", "true") })
    fake.allowAll()
    expect(res.status).toBe(403)
    expect(res.body).toEqual({
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: `jobs.batch is forbidden: User "arn:aws:iam::111122223333:user/swarmplane-test" cannot create resource "jobs" in API group "batch" in the namespace "${ns}"`,
      reason: "Forbidden",
      details: { group: "batch", kind: "jobs" },
      code: 403,
    })
    expect((await kube(fake, "GET", jobsPath, { token })).status).toBe(200)
  })
})

describe("fake Kubernetes: REST semantics", () => {
  let fake: FakeKube
  let token: string
  beforeAll(async () => {
    // No LocalQueue "parked": these Jobs stay suspended and run nothing.
    fake = await startFakeKube({ namespaces: [ns] })
    token = await fake.token()
  })
  afterAll(async () => {
    await fake.stop()
    expect(fake.controllerErrors).toEqual([])
  })

  it("creates with 201 and server-filled metadata, refuses a duplicate with 409 AlreadyExists", async () => {
    const created = await kube(fake, "POST", jobsPath, {
      token,
      body: job("train-42", "true", { queue: "parked" }),
    })
    expect(created.status).toBe(201)
    expect(created.body.metadata).toMatchObject({ name: "train-42", namespace: ns, generation: 1 })
    expect(created.body.metadata.uid).toMatch(/^[0-9a-f-]{36}$/)
    expect(created.body.metadata.creationTimestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/)
    expect(created.body.spec).toMatchObject({ suspend: true, backoffLimit: 0, completionMode: "NonIndexed" })
    const again = await kube(fake, "POST", jobsPath, {
      token,
      body: job("train-42", "true", { queue: "parked" }),
    })
    expect(again.status).toBe(409)
    expect(again.body).toEqual({
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: 'jobs.batch "train-42" already exists',
      reason: "AlreadyExists",
      details: { name: "train-42", group: "batch", kind: "jobs" },
      code: 409,
    })
  })

  it("answers a missing object with 404 NotFound (core resources with an empty group)", async () => {
    const job404 = await kube(fake, "GET", `${jobsPath}/nope`, { token })
    expect(job404.status).toBe(404)
    expect(job404.body).toEqual({
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: 'jobs.batch "nope" not found',
      reason: "NotFound",
      details: { name: "nope", group: "batch", kind: "jobs" },
      code: 404,
    })
    const pod404 = await kube(fake, "GET", `${podsPath}/nope`, { token })
    expect(pod404.body.message).toBe('pods "nope" not found')
    expect(pod404.body.details).toEqual({ name: "nope", group: "", kind: "pods" })
    const wl404 = await kube(fake, "GET", `${workloadsPath}/nope`, { token })
    expect(wl404.body.message).toBe('workloads.kueue.x-k8s.io "nope" not found')
  })

  it("refuses to create into a namespace that does not exist with 404 NotFound", async () => {
    const res = await kube(fake, "POST", "/apis/batch/v1/namespaces/ghost/jobs", {
      token,
      body: job("x", "true"),
    })
    expect(res.status).toBe(404)
    expect(res.body.message).toBe('namespaces "ghost" not found')
  })

  it("validates a Job's restartPolicy with 422 Invalid naming the field", async () => {
    const bad = job("bad-policy", "true", { queue: "parked" })
    bad.spec.template.spec.restartPolicy = "Always"
    const res = await kube(fake, "POST", jobsPath, { token, body: bad })
    expect(res.status).toBe(422)
    expect(res.body.reason).toBe("Invalid")
    expect(res.body.details.causes[0].field).toBe("spec.template.spec.restartPolicy")
  })

  it("lists with label selectors: =, !=, in, notin, exists, !exists", async () => {
    for (const [name, tier] of [
      ["sel-a", "gold"],
      ["sel-b", "silver"],
      ["sel-c", "bronze"],
    ] as const)
      await kube(fake, "POST", jobsPath, {
        token,
        body: job(name, "true", { queue: "parked", labels: { tier, group: "sel" } }),
      })
    await kube(fake, "POST", jobsPath, {
      token,
      body: job("sel-d", "true", { queue: "parked", labels: { group: "sel" } }),
    })
    const names = async (selector: string) => {
      const res = await kube(fake, "GET", `${jobsPath}?labelSelector=${encodeURIComponent(selector)}`, {
        token,
      })
      expect(res.status).toBe(200)
      expect(res.body.kind).toBe("JobList")
      return res.body.items.map((i: Wire) => i.metadata.name)
    }
    expect(await names("group=sel,tier=gold")).toEqual(["sel-a"])
    expect(await names("group==sel,tier!=gold")).toEqual(["sel-b", "sel-c", "sel-d"])
    expect(await names("tier in (gold, bronze)")).toEqual(["sel-a", "sel-c"])
    expect(await names("group=sel,tier notin (gold)")).toEqual(["sel-b", "sel-c", "sel-d"])
    expect(await names("group=sel,tier")).toEqual(["sel-a", "sel-b", "sel-c"])
    expect(await names("group=sel,!tier")).toEqual(["sel-d"])
    const bad = await kube(fake, "GET", `${jobsPath}?labelSelector=${encodeURIComponent("a in b")}`, {
      token,
    })
    expect(bad.status).toBe(400)
  })

  it("pages a list with limit and continue under one resourceVersion, and expires old tokens with 410", async () => {
    for (let i = 0; i < 5; i++)
      await kube(fake, "POST", jobsPath, {
        token,
        body: job(`page-${i}`, "true", { queue: "parked", labels: { group: "page" } }),
      })
    const seen: string[] = []
    let next: string | undefined
    let rv: string | undefined
    let pages = 0
    do {
      const q = `labelSelector=group%3Dpage&limit=2${next ? `&continue=${encodeURIComponent(next)}` : ""}`
      const res = await kube(fake, "GET", `${jobsPath}?${q}`, { token })
      expect(res.status).toBe(200)
      expect(res.body.items.length).toBeLessThanOrEqual(2)
      rv ??= res.body.metadata.resourceVersion
      expect(res.body.metadata.resourceVersion).toBe(rv)
      seen.push(...res.body.items.map((i: Wire) => i.metadata.name))
      next = res.body.metadata.continue
      pages++
    } while (next)
    expect(pages).toBe(3)
    expect(seen).toEqual(["page-0", "page-1", "page-2", "page-3", "page-4"])
    const first = await kube(fake, "GET", `${jobsPath}?labelSelector=group%3Dpage&limit=2`, { token })
    fake.expireContinueTokens()
    const expired = await kube(
      fake,
      "GET",
      `${jobsPath}?limit=2&continue=${encodeURIComponent(first.body.metadata.continue)}`,
      { token },
    )
    expect(expired.status).toBe(410)
    expect(expired.body.reason).toBe("Expired")
  })

  it("bumps resourceVersion on every write and refuses a stale PUT with 409 Conflict", async () => {
    const created = (
      await kube(fake, "POST", jobsPath, { token, body: job("rv-job", "true", { queue: "parked" }) })
    ).body
    const patched = await kube(fake, "PATCH", `${jobsPath}/rv-job`, {
      token,
      body: { metadata: { labels: { extra: "yes" } } },
      contentType: "application/merge-patch+json",
    })
    expect(patched.status).toBe(200)
    expect(patched.body.metadata.labels.extra).toBe("yes")
    expect(patched.body.metadata.resourceVersion).not.toBe(created.metadata.resourceVersion)
    const stale = await kube(fake, "PUT", `${jobsPath}/rv-job`, { token, body: created })
    expect(stale.status).toBe(409)
    expect(stale.body.reason).toBe("Conflict")
    expect(stale.body.message).toBe(
      'Operation cannot be fulfilled on jobs.batch "rv-job": the object has been modified; please apply your changes to the latest version and try again',
    )
  })

  it("deletes with a Success Status (Background), and warns when a Job's pods would be orphaned", async () => {
    const created = (
      await kube(fake, "POST", jobsPath, { token, body: job("del-a", "true", { queue: "parked" }) })
    ).body
    const res = await kube(fake, "DELETE", `${jobsPath}/del-a?propagationPolicy=Background`, { token })
    expect(res.status).toBe(200)
    expect(res.body).toEqual({
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Success",
      details: { name: "del-a", group: "batch", kind: "jobs", uid: created.metadata.uid },
    })
    expect((await kube(fake, "GET", `${jobsPath}/del-a`, { token })).status).toBe(404)
    await kube(fake, "POST", jobsPath, { token, body: job("del-b", "true", { queue: "parked" }) })
    const orphaning = await kube(fake, "DELETE", `${jobsPath}/del-b`, { token })
    expect(orphaning.status).toBe(200)
    expect(String(orphaning.headers.warning)).toContain(
      "child pods are preserved by default when jobs are deleted",
    )
  })

  it("answers injected faults: 429 with Retry-After and a TooManyRequests Status, then 500", async () => {
    fake.injectFault({ status: 429, retryAfterSeconds: 7, path: jobsPath })
    const limited = await kube(fake, "GET", jobsPath, { token })
    expect(limited.status).toBe(429)
    expect(limited.headers["retry-after"]).toBe("7")
    expect(limited.body).toMatchObject({
      kind: "Status",
      reason: "TooManyRequests",
      code: 429,
      details: { retryAfterSeconds: 7 },
    })
    fake.injectFault({ status: 500, method: "GET" })
    expect((await kube(fake, "GET", jobsPath, { token })).body).toMatchObject({
      reason: "InternalError",
      code: 500,
    })
    expect((await kube(fake, "GET", jobsPath, { token })).status).toBe(200)
  })
})

describe("fake Kueue: admission, pods that really run, logs", () => {
  let fake: FakeKube
  let token: string
  let dir: string
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "fake-kube-test-"))
    fake = await startFakeKube({
      namespaces: [ns],
      clusterQueues: [
        {
          name: "cluster-queue",
          flavors: [
            { name: "h100-ondemand", nominalQuota: { cpu: 16, memory: "64Gi", "nvidia.com/gpu": 4 } },
          ],
          preemption: "LowerPriority",
        },
      ],
      localQueues: [{ namespace: ns, name: "user-queue", clusterQueue: "cluster-queue" }],
      priorityClasses: { low: 100, high: 1000, top: 10000 },
    })
    token = await fake.token()
  })
  afterAll(async () => {
    await fake.stop()
    rmSync(dir, { recursive: true, force: true })
    expect(fake.controllerErrors).toEqual([])
  })

  const get = async (path: string) => (await kube(fake, "GET", path, { token })).body
  const workloadOf = async (jobName: string) => {
    const j = await get(`${jobsPath}/${jobName}`)
    const list = await get(
      `${workloadsPath}?labelSelector=${encodeURIComponent(`kueue.x-k8s.io/job-uid=${j.metadata.uid}`)}`,
    )
    return list.items[0]
  }
  const jobDone = (j: Wire) =>
    condition(j, "Complete")?.status === "True" || condition(j, "Failed")?.status === "True"
  /** A script that waits until the test creates `file` (a job that holds its quota until told). */
  const holdUntil = (file: string) => `while [ ! -f ${join(dir, file)} ]; do sleep 0.05; done; echo released`

  it("admits an Indexed gang within quota: Workload as C.2 names it, Job unsuspended, every pod runs with its index and env", async () => {
    const res = await kube(fake, "POST", jobsPath, {
      token,
      body: job("gang", 'echo "index=$JOB_COMPLETION_INDEX greeting=$GREETING host=$HOSTNAME"', {
        parallelism: 2,
        indexed: true,
        gpus: 2,
      }),
    })
    expect(res.status).toBe(201)
    const uid = res.body.metadata.uid
    const wl = await waitFor(
      () => workloadOf("gang"),
      (w) => condition(w, "Admitted")?.status === "True",
    )
    expect(wl.metadata.name).toBe(workloadName("gang", uid))
    expect(wl.metadata.name).toMatch(/^job-gang-[0-9a-f]{5}$/)
    expect(wl.metadata.ownerReferences).toEqual([
      { apiVersion: "batch/v1", kind: "Job", name: "gang", uid, controller: true, blockOwnerDeletion: true },
    ])
    expect(wl.spec.podSets[0]).toMatchObject({ name: "main", count: 2 })
    expect(condition(wl, "QuotaReserved")).toMatchObject({
      status: "True",
      reason: "QuotaReserved",
      message: "Quota reserved in ClusterQueue cluster-queue",
    })
    expect(condition(wl, "Admitted")).toMatchObject({
      reason: "Admitted",
      message: "The workload is admitted",
    })
    expect(wl.status.admission.podSetAssignments[0]).toMatchObject({
      flavors: { "nvidia.com/gpu": "h100-ondemand" },
      resourceUsage: { "nvidia.com/gpu": "4", cpu: "2", memory: "2Gi" },
      count: 2,
    })
    const done = await waitFor(() => get(`${jobsPath}/gang`), jobDone)
    expect(condition(done, "Complete")).toMatchObject({ status: "True", reason: "CompletionsReached" })
    expect(done.spec.suspend).toBe(false)
    expect(done.status).toMatchObject({ succeeded: 2, completedIndexes: "0-1" })
    const pods = (
      await get(`${podsPath}?labelSelector=${encodeURIComponent("batch.kubernetes.io/job-name=gang")}`)
    ).items
    expect(pods).toHaveLength(2)
    for (const pod of pods) {
      expect(pod.status.phase).toBe("Succeeded")
      expect(pod.status.containerStatuses[0].state.terminated).toMatchObject({
        exitCode: 0,
        reason: "Completed",
      })
      const index = pod.metadata.labels["batch.kubernetes.io/job-completion-index"]
      const log = await kube(fake, "GET", `${podsPath}/${pod.metadata.name}/log?container=main`, { token })
      expect(log.status).toBe(200)
      expect(log.body).toBe(`index=${index} greeting=hello-from-env host=${pod.metadata.name}\n`)
    }
    const finished = await waitFor(
      () => workloadOf("gang"),
      (w) => condition(w, "Finished")?.status === "True",
    )
    expect(condition(finished, "Finished").reason).toBe("Succeeded")
  })

  it("serves tailLines of a pod's log", async () => {
    await kube(fake, "POST", jobsPath, {
      token,
      body: job("lines", "for i in 1 2 3 4 5; do echo line-$i; done", { gpus: 0 }),
    })
    await waitFor(() => get(`${jobsPath}/lines`), jobDone)
    const pod = (await get(`${podsPath}?labelSelector=job-name%3Dlines`)).items[0]
    const tail = await kube(fake, "GET", `${podsPath}/${pod.metadata.name}/log?tailLines=2`, { token })
    expect(tail.body).toBe("line-4\nline-5\n")
  })

  it("keeps over-quota Workloads pending with Kueue's message, counts them in the queues, then admits by priority when quota frees", async () => {
    await kube(fake, "POST", jobsPath, {
      token,
      body: job("holder", holdUntil("holder"), { gpus: 4, priorityClass: "top" }),
    })
    await waitFor(
      () => workloadOf("holder"),
      (w) => condition(w, "Admitted")?.status === "True",
    )
    await kube(fake, "POST", jobsPath, {
      token,
      body: job("low-first", holdUntil("low"), { gpus: 3, priorityClass: "low" }),
    })
    await kube(fake, "POST", jobsPath, {
      token,
      body: job("high-second", holdUntil("high"), { gpus: 3, priorityClass: "high" }),
    })
    const pending = await waitFor(
      () => workloadOf("low-first"),
      (w) => condition(w, "QuotaReserved")?.reason === "Pending",
    )
    expect(condition(pending, "QuotaReserved")).toMatchObject({
      status: "False",
      message:
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100-ondemand, 3 more needed",
    })
    expect(pending.status.resourceRequests[0].resources["nvidia.com/gpu"]).toBe("3")
    expect((await get(`${jobsPath}/low-first`)).spec.suspend).toBe(true)
    expect((await get(`${podsPath}?labelSelector=job-name%3Dlow-first`)).items).toHaveLength(0)
    const lq = await waitFor(
      () => get(`/apis/kueue.x-k8s.io/v1beta1/namespaces/${ns}/localqueues/user-queue`),
      (q) => q.status?.pendingWorkloads === 2,
    )
    expect(lq.status).toMatchObject({ admittedWorkloads: 1, reservingWorkloads: 1 })
    expect(lq.status.flavorUsage[0].resources).toContainEqual({ name: "nvidia.com/gpu", total: "4" })
    const cq = await get("/apis/kueue.x-k8s.io/v1beta1/clusterqueues/cluster-queue")
    expect(cq.status).toMatchObject({ pendingWorkloads: 2, admittedWorkloads: 1 })
    expect(cq.status.flavorsUsage[0]).toMatchObject({ name: "h100-ondemand" })
    expect(cq.status.flavorsUsage[0].resources).toContainEqual({
      name: "nvidia.com/gpu",
      total: "4",
      borrowed: "0",
    })

    // Quota frees: the higher-priority Workload goes first although it came second.
    writeFileSync(join(dir, "holder"), "")
    await waitFor(
      () => workloadOf("high-second"),
      (w) => condition(w, "Admitted")?.status === "True",
    )
    expect(condition(await workloadOf("low-first"), "QuotaReserved")?.status).toBe("False")
    writeFileSync(join(dir, "high"), "")
    await waitFor(
      () => workloadOf("low-first"),
      (w) => condition(w, "Admitted")?.status === "True",
    )
    writeFileSync(join(dir, "low"), "")
    await waitFor(() => get(`${jobsPath}/low-first`), jobDone)
  })

  it("fails a Job past its backoffLimit, with each pod's exit code and reason Error", async () => {
    await kube(fake, "POST", jobsPath, {
      token,
      body: job("crash", "echo boom >&2; exit 3", { gpus: 0, backoffLimit: 1 }),
    })
    const failed = await waitFor(() => get(`${jobsPath}/crash`), jobDone)
    expect(condition(failed, "Failed")).toMatchObject({ status: "True", reason: "BackoffLimitExceeded" })
    expect(failed.status.failed).toBe(2)
    const pods = (await get(`${podsPath}?labelSelector=job-name%3Dcrash`)).items
    expect(pods).toHaveLength(2)
    for (const pod of pods) {
      expect(pod.status.phase).toBe("Failed")
      expect(pod.status.containerStatuses[0].state.terminated).toMatchObject({ exitCode: 3, reason: "Error" })
      expect((await kube(fake, "GET", `${podsPath}/${pod.metadata.name}/log`, { token })).body).toBe("boom\n")
    }
    const wl = await waitFor(
      () => workloadOf("crash"),
      (w) => condition(w, "Finished")?.status === "True",
    )
    expect(condition(wl, "Finished").reason).toBe("Failed")
  })

  it("reports a scripted OOM kill as terminated OOMKilled with exit code 137", async () => {
    fake.scriptTermination({ podPrefix: "oom-", reason: "OOMKilled" })
    await kube(fake, "POST", jobsPath, { token, body: job("oom-task", "sleep 30", { gpus: 0 }) })
    const failed = await waitFor(() => get(`${jobsPath}/oom-task`), jobDone)
    expect(condition(failed, "Failed")?.status).toBe("True")
    const pod = (await get(`${podsPath}?labelSelector=job-name%3Doom-task`)).items[0]
    expect(pod.status.phase).toBe("Failed")
    expect(pod.status.containerStatuses[0].state.terminated).toMatchObject({
      exitCode: 137,
      reason: "OOMKilled",
    })
  })

  it("keeps a pod whose image cannot be pulled Pending: ErrImagePull, then ImagePullBackOff", async () => {
    fake.failImagePull("bad/img:1")
    await kube(fake, "POST", jobsPath, {
      token,
      body: job("badimg", "true", { gpus: 0, image: "bad/img:1" }),
    })
    const pod = await waitFor(
      async () => (await get(`${podsPath}?labelSelector=job-name%3Dbadimg`)).items[0],
      (p) => p?.status?.containerStatuses?.[0]?.state?.waiting?.reason === "ImagePullBackOff",
    )
    expect(pod.status.phase).toBe("Pending")
    expect(pod.status.containerStatuses[0].state.waiting.message).toBe('Back-off pulling image "bad/img:1"')
    const log = await kube(fake, "GET", `${podsPath}/${pod.metadata.name}/log`, { token })
    expect(log.status).toBe(400)
    expect(log.body.message).toBe(
      `container "main" in pod "${pod.metadata.name}" is waiting to start: ImagePullBackOff`,
    )
    await kube(fake, "DELETE", `${jobsPath}/badimg?propagationPolicy=Background`, { token })
  })

  it("preempts a lower-priority Workload for a higher one: Evicted/Preempted, Job suspended, pods gone, then requeued", async () => {
    await kube(fake, "POST", jobsPath, {
      token,
      body: job("victim", holdUntil("victim"), { gpus: 4, priorityClass: "low" }),
    })
    await waitFor(
      async () => (await get(`${podsPath}?labelSelector=job-name%3Dvictim`)).items[0],
      (p) => p?.status?.phase === "Running",
    )
    await kube(fake, "POST", jobsPath, {
      token,
      body: job("preemptor", holdUntil("preemptor"), { gpus: 4, priorityClass: "top" }),
    })
    const evicted = await waitFor(
      () => workloadOf("victim"),
      (w) => condition(w, "Evicted")?.status === "True",
    )
    expect(condition(evicted, "Evicted").reason).toBe("Preempted")
    expect(condition(evicted, "Evicted").message).toMatch(
      /^Preempted to accommodate a workload \(UID: .+, JobUID: .+\) due to prioritization in the ClusterQueue$/,
    )
    expect(condition(evicted, "Preempted")).toMatchObject({ status: "True", reason: "InClusterQueue" })
    expect(condition(evicted, "Requeued")).toMatchObject({ status: "True", reason: "Preempted" })
    expect(condition(evicted, "QuotaReserved")?.status).toBe("False")
    expect(evicted.status.admission).toBeUndefined()
    expect((await get(`${jobsPath}/victim`)).spec.suspend).toBe(true)
    await waitFor(
      () => get(`${podsPath}?labelSelector=job-name%3Dvictim`),
      (l) => l.items.length === 0,
    )
    await waitFor(
      () => workloadOf("preemptor"),
      (w) => condition(w, "Admitted")?.status === "True",
    )
    // The preemptor finishes: the victim is admitted again, its Evicted condition now history.
    writeFileSync(join(dir, "preemptor"), "")
    const back = await waitFor(
      () => workloadOf("victim"),
      (w) => condition(w, "Admitted")?.status === "True",
    )
    expect(condition(back, "Evicted")).toMatchObject({ status: "False", reason: "QuotaReserved" })
    expect(condition(back, "Evicted").message).toMatch(/^Previously: Preempted to accommodate/)
    writeFileSync(join(dir, "victim"), "")
    await waitFor(() => get(`${jobsPath}/victim`), jobDone)
  })

  it("evicts a Workload when the test says so, holds it until released, and deleting a Job frees its quota", async () => {
    await kube(fake, "POST", jobsPath, { token, body: job("scripted", holdUntil("scripted"), { gpus: 4 }) })
    const wl = await waitFor(
      () => workloadOf("scripted"),
      (w) => condition(w, "Admitted")?.status === "True",
    )
    fake.evictWorkload(ns, wl.metadata.name, {
      reason: "PodsReadyTimeout",
      message: "Exceeded the PodsReady timeout",
      hold: true,
    })
    const evicted = await workloadOf("scripted")
    expect(condition(evicted, "Evicted")).toMatchObject({ status: "True", reason: "PodsReadyTimeout" })
    expect(condition(evicted, "Requeued")).toMatchObject({ status: "False", reason: "PodsReadyTimeout" })
    await waitFor(
      () => get(`${podsPath}?labelSelector=job-name%3Dscripted`),
      (l) => l.items.length === 0,
    )
    fake.releaseWorkload(ns, wl.metadata.name)
    await waitFor(
      () => workloadOf("scripted"),
      (w) => condition(w, "Admitted")?.status === "True",
    )
    await waitFor(
      async () => (await get(`${podsPath}?labelSelector=job-name%3Dscripted`)).items[0],
      (p) => p?.status?.phase === "Running",
    )
    const del = await kube(fake, "DELETE", `${jobsPath}/scripted?propagationPolicy=Background`, { token })
    expect(del.status).toBe(200)
    await waitFor(
      () => get(`${podsPath}?labelSelector=job-name%3Dscripted`),
      (l) => l.items.length === 0,
    )
    expect((await kube(fake, "GET", `${workloadsPath}/${wl.metadata.name}`, { token })).status).toBe(404)
    await waitFor(
      () => get("/apis/kueue.x-k8s.io/v1beta1/clusterqueues/cluster-queue"),
      (q) => q.status.admittedWorkloads === 0,
    )
  })
})

describe("fake Kubernetes: a Deployment behind its Service", () => {
  let fake: FakeKube
  let token: string
  beforeAll(async () => {
    fake = await startFakeKube({ namespaces: [ns] })
    token = await fake.token()
  })
  afterAll(async () => {
    await fake.stop()
    expect(fake.controllerErrors).toEqual([])
  })

  const deploymentsPath = `/apis/apps/v1/namespaces/${ns}/deployments`
  const get = async (path: string) => (await kube(fake, "GET", path, { token })).body

  it("refuses a rolling update that could never replace a pod, and a preStop sleep as long as the grace period (422, the field named)", async () => {
    const deployment = (strategy: object, lifecycle: object, grace?: number) => ({
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "bad-roll" },
      spec: {
        replicas: 1,
        strategy,
        selector: { matchLabels: { app: "bad-roll" } },
        template: {
          metadata: { labels: { app: "bad-roll" } },
          spec: {
            ...(grace === undefined ? {} : { terminationGracePeriodSeconds: grace }),
            containers: [{ name: "m", image: "x", command: ["true"], lifecycle }],
          },
        },
      },
    })
    const both0 = await kube(fake, "POST", deploymentsPath, {
      token,
      body: deployment({ type: "RollingUpdate", rollingUpdate: { maxSurge: 0, maxUnavailable: 0 } }, {}),
    })
    expect(both0.status).toBe(422)
    expect(both0.body.details.causes[0]).toMatchObject({
      field: "spec.strategy.rollingUpdate.maxUnavailable",
    })
    const longSleep = await kube(fake, "POST", deploymentsPath, {
      token,
      body: deployment({ type: "RollingUpdate" }, { preStop: { sleep: { seconds: 30 } } }, 30),
    })
    expect(longSleep.status).toBe(422)
    expect(longSleep.body.details.causes[0]).toMatchObject({
      field: "spec.template.spec.containers[0].lifecycle.preStop.sleep.seconds",
    })
  })

  it("runs echo-model replicas that turn Ready on their probe, answers through the Service URL, scales and rolls", async () => {
    const created = await kube(fake, "POST", deploymentsPath, {
      token,
      body: {
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: "swarm-a", labels: { "swarmplane.dev/swarm": "a" } },
        spec: {
          replicas: 2,
          selector: { matchLabels: { app: "swarm-a" } },
          template: {
            metadata: { labels: { app: "swarm-a" } },
            spec: {
              containers: [
                {
                  name: "model",
                  image: "swarmplane/agent:latest",
                  command: ["swarmplane-agent", "echo-server", "--port", "$(PORT)"],
                  ports: [{ name: "http", containerPort: 8080 }],
                  readinessProbe: { httpGet: { path: "/health", port: "http" } },
                  env: [{ name: "VERSION", value: "1" }],
                },
              ],
            },
          },
        },
      },
    })
    expect(created.status).toBe(201)
    const svc = await kube(fake, "POST", `/api/v1/namespaces/${ns}/services`, {
      token,
      body: {
        apiVersion: "v1",
        kind: "Service",
        metadata: { name: "swarm-a" },
        spec: {
          type: "LoadBalancer",
          selector: { app: "swarm-a" },
          ports: [{ port: 80, targetPort: "http" }],
        },
      },
    })
    expect(svc.status).toBe(201)
    const ready = await waitFor(
      () => get(`${deploymentsPath}/swarm-a`),
      (d) => d.status?.readyReplicas === 2,
      60_000,
    )
    expect(ready.status).toMatchObject({ replicas: 2, updatedReplicas: 2, availableReplicas: 2 })
    const service = await waitFor(
      () => get(`/api/v1/namespaces/${ns}/services/swarm-a`),
      (s) => s.metadata.annotations?.["fake-kube.swarmplane.dev/url"] !== undefined,
    )
    const url = service.metadata.annotations["fake-kube.swarmplane.dev/url"]
    expect(url).toBe(fake.serviceUrl(ns, "swarm-a"))
    expect(service.status.loadBalancer.ingress[0].ip).toBe("127.0.0.1")
    const chat = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "echo", messages: [{ role: "user", content: "hi there" }] }),
    })
    expect(chat.status).toBe(200)
    expect(JSON.stringify(await chat.json())).toContain("hi there")

    // Scale down with a merge patch: one pod goes.
    const scaled = await kube(fake, "PATCH", `${deploymentsPath}/swarm-a`, {
      token,
      body: { spec: { replicas: 1 } },
      contentType: "application/merge-patch+json",
    })
    expect(scaled.status).toBe(200)
    expect(scaled.body.metadata.generation).toBe(2)
    await waitFor(
      () => get(`${podsPath}?labelSelector=app%3Dswarm-a`),
      (l) => l.items.length === 1,
    )

    // A template change (strategic merge of the container by name) rolls the pod.
    const before = (await get(`${podsPath}?labelSelector=app%3Dswarm-a`)).items[0].metadata.name
    const rolled = await kube(fake, "PATCH", `${deploymentsPath}/swarm-a`, {
      token,
      body: {
        spec: {
          template: { spec: { containers: [{ name: "model", env: [{ name: "VERSION", value: "2" }] }] } },
        },
      },
      contentType: "application/strategic-merge-patch+json",
    })
    expect(rolled.status).toBe(200)
    expect(rolled.body.spec.template.spec.containers[0].command[0]).toBe("swarmplane-agent")
    const pods = await waitFor(
      () => get(`${podsPath}?labelSelector=app%3Dswarm-a`),
      (l) =>
        l.items.length === 1 && l.items[0].metadata.name !== before && l.items[0].status?.phase === "Running",
      60_000,
    )
    expect(pods.items[0].spec.containers[0].env).toContainEqual({ name: "VERSION", value: "2" })
    await waitFor(
      () => get(`${deploymentsPath}/swarm-a`),
      (d) => d.status?.readyReplicas === 1 && d.status?.updatedReplicas === 1,
      60_000,
    )
    expect((await fetch(`${url}/health`)).status).toBe(200)

    // Deleting both removes the pods and closes the Service's URL.
    await kube(fake, "DELETE", `${deploymentsPath}/swarm-a`, { token })
    await kube(fake, "DELETE", `/api/v1/namespaces/${ns}/services/swarm-a`, { token })
    await waitFor(
      () => get(`${podsPath}?labelSelector=app%3Dswarm-a`),
      (l) => l.items.length === 0,
    )
    await waitFor(
      () =>
        fetch(`${url}/health`).then(
          () => "open",
          () => "closed",
        ),
      (v) => v === "closed",
    )
  })
})

describe.skipIf(!hasKubectl())("fake Kubernetes: kubectl pointed at it with a kubeconfig", () => {
  let fake: FakeKube
  let dir: string
  let kubeconfig: string
  beforeAll(async () => {
    fake = await startFakeKube({
      namespaces: [ns],
      clusterQueues: [
        {
          name: "cq",
          flavors: [{ name: "default-flavor", nominalQuota: { cpu: 4, memory: "8Gi", "nvidia.com/gpu": 2 } }],
        },
      ],
      localQueues: [{ namespace: ns, name: "user-queue", clusterQueue: "cq" }],
    })
    dir = mkdtempSync(join(tmpdir(), "fake-kube-kubectl-"))
    kubeconfig = join(dir, "config")
    writeFileSync(kubeconfig, fake.kubeconfig(await fake.token()))
  })
  afterAll(async () => {
    await fake.stop()
    rmSync(dir, { recursive: true, force: true })
    expect(fake.controllerErrors).toEqual([])
  })

  // kubectl runs as a child process while the fake serves it from this one: never a sync exec here.
  const kubectl = async (...args: string[]) =>
    (await execFileAsync("kubectl", ["--kubeconfig", kubeconfig, "-n", ns, ...args], { encoding: "utf8" }))
      .stdout

  it("lists, describes, shows the logs of and deletes a Job and its pods", async () => {
    const token = await fake.token()
    await kube(fake, "POST", jobsPath, { token, body: job("kc-job", "echo from-kubectl-job", { gpus: 1 }) })
    await waitFor(
      async () => (await kube(fake, "GET", `${jobsPath}/kc-job`, { token })).body,
      (j) => condition(j, "Complete")?.status === "True",
    )
    expect(await kubectl("get", "jobs")).toMatch(/kc-job\s+Complete\s+1\/1/)
    expect(await kubectl("get", "pods")).toMatch(/kc-job-\w+\s+0\/1\s+Completed\s+0/)
    expect(await kubectl("get", "workloads.kueue.x-k8s.io")).toMatch(
      /job-kc-job-[0-9a-f]{5}\s+user-queue\s+cq\s+True\s+True/,
    )
    const described = await kubectl("describe", "job", "kc-job")
    expect(described).toContain("batch.kubernetes.io/controller-uid=")
    expect(described).toMatch(/Pods Statuses:\s+0 Active \(0 Ready\) \/ 1 Succeeded \/ 0 Failed/)
    expect(await kubectl("logs", "job/kc-job")).toBe("from-kubectl-job\n")
    expect(await kubectl("delete", "job", "kc-job")).toContain('job.batch "kc-job" deleted')
    await waitFor(
      async () =>
        (await kube(fake, "GET", `${podsPath}?labelSelector=job-name%3Dkc-job`, { token })).body.items,
      (items) => items.length === 0,
    )
    expect(await kubectl("get", "jobs")).not.toContain("kc-job")
  }, 120_000)
})

describe("fake Kubernetes: a crashing Deployment pod", () => {
  let fake: FakeKube
  beforeAll(async () => {
    fake = await startFakeKube({ namespaces: [ns] })
  })
  afterAll(async () => {
    await fake.stop()
    expect(fake.controllerErrors).toEqual([])
  })

  it("restarts its container (restartPolicy Always), counting restarts and keeping the last termination", async () => {
    const token = await fake.token()
    const res = await kube(fake, "POST", `/apis/apps/v1/namespaces/${ns}/deployments`, {
      token,
      body: {
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: "crasher" },
        spec: {
          replicas: 1,
          selector: { matchLabels: { app: "crasher" } },
          template: {
            metadata: { labels: { app: "crasher" } },
            spec: {
              containers: [{ name: "main", image: "x", command: ["/bin/sh", "-c", "echo crashing; exit 2"] }],
            },
          },
        },
      },
    })
    expect(res.status).toBe(201)
    const pod = await waitFor(
      async () =>
        (await kube(fake, "GET", `${podsPath}?labelSelector=app%3Dcrasher`, { token })).body.items[0],
      (p) => (p?.status?.containerStatuses?.[0]?.restartCount ?? 0) >= 2,
    )
    expect(pod.status.phase).toBe("Running")
    expect(pod.status.containerStatuses[0].lastState.terminated).toMatchObject({
      exitCode: 2,
      reason: "Error",
    })
    const log = await kube(fake, "GET", `${podsPath}/${pod.metadata.name}/log`, { token })
    expect(log.body).toMatch(/^(crashing\n)?$/) // this run's output only (it may not have printed yet)
    const previous = await kube(fake, "GET", `${podsPath}/${pod.metadata.name}/log?previous=true`, { token })
    expect(previous.body).toBe("crashing\n")
    const deployment = (
      await kube(fake, "GET", `/apis/apps/v1/namespaces/${ns}/deployments/crasher`, { token })
    ).body
    expect(deployment.status.readyReplicas).toBeUndefined()
    expect(deployment.status.conditions[0]).toMatchObject({ type: "Available", status: "False" })
  })
})

describe("fake Kubernetes: stop()", () => {
  it("ends the processes of running pods", async () => {
    const fake = await startFakeKube({
      namespaces: [ns],
      clusterQueues: [
        {
          name: "cq",
          flavors: [{ name: "f", nominalQuota: { cpu: 4, memory: "8Gi", "nvidia.com/gpu": 1 } }],
        },
      ],
      localQueues: [{ namespace: ns, name: "user-queue", clusterQueue: "cq" }],
    })
    const token = await fake.token()
    await kube(fake, "POST", jobsPath, { token, body: job("sleeper", "sleep 60", { gpus: 1 }) })
    await waitFor(
      async () =>
        (await kube(fake, "GET", `${podsPath}?labelSelector=job-name%3Dsleeper`, { token })).body.items[0],
      (p) => p?.status?.phase === "Running",
    )
    const pids = fake.livePids()
    expect(pids).toHaveLength(1)
    await fake.stop()
    const alive = (pid: number) => {
      try {
        process.kill(pid, 0)
        return true
      } catch {
        return false
      }
    }
    expect(pids.filter(alive)).toEqual([])
  })
})
