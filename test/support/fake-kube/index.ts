/**
 * A fake Amazon EKS cluster running Kueue that really runs what it is given, for the `eks` backend's
 * tests: `startFakeKube()` serves EKS `DescribeCluster` (Part B.1) on plain HTTP for
 * `@aws-sdk/client-eks` (`endpoint: fake.eksUrl`), and the Kubernetes API (Part D) over HTTPS with a
 * CA made at start, checking EKS IAM bearer tokens (B.2) signed with the credentials the test gave.
 * Jobs are admitted by a Kueue simulator (Part C) against the ClusterQueues the test configures, and
 * their pods (and Deployments' pods) run as local processes. All pods share 127.0.0.1, so a container
 * that declares ports must listen on `$PORT`: the free loopback port its first `containerPort` is
 * remapped to (`$(PORT)` in `command`/`args` expands to it, as Kubernetes expands env references).
 * A Service's loopback URL is in its annotation `fake-kube.swarmplane.dev/url`, its
 * `status.loadBalancer.ingress`, and `serviceUrl()`. `stop()` ends every process the fake started.
 */
import { createServer as createHttpsServer } from "node:https"
import type { AddressInfo } from "node:net"
import { serve } from "@hono/node-server"
import { processRunner } from "../local-processes"
import { admit, validate } from "./admission"
import { type ApiState, type ForbiddenRule, fakeKubeApp } from "./api"
import { DeploymentController, Services } from "./deployments"
import { type ClusterStatus, type EksState, fakeEksApp } from "./eks"
import type { Fault } from "./faults"
import { JobController, selectJobPods } from "./jobs"
import { Kubelet, type ScriptedTermination } from "./kubelet"
import { type EvictOptions, Kueue } from "./kueue"
import { type JsonObject, type ResourceType, Types } from "./resources"
import { Store } from "./store"
import { makeClusterTls } from "./tls"
import { type FakeIamUser, makeToken } from "./token"

export type { ForbiddenRule } from "./api"
export { ServiceUrlAnnotation } from "./deployments"
export type { ClusterStatus } from "./eks"
export type { Fault } from "./faults"
export type { ScriptedTermination } from "./kubelet"
export { PortsAnnotation } from "./kubelet"
export type { EvictOptions } from "./kueue"
export { workloadName } from "./kueue"
export { Types } from "./resources"
export type { FakeIamUser } from "./token"

/** A ClusterQueue with one resource group: its flavors in the order Kueue tries them. */
export interface FakeClusterQueue {
  name: string
  flavors: {
    name: string
    nominalQuota: Record<string, string | number>
    nodeLabels?: Record<string, string>
  }[]
  /** `preemption.withinClusterQueue`; default `Never`. */
  preemption?: "Never" | "LowerPriority" | "LowerOrNewerEqualPriority"
  queueingStrategy?: "BestEffortFIFO" | "StrictFIFO"
}

export interface FakeKubeOptions {
  /** Default `fake-eks`. */
  clusterName?: string
  /** Default `us-west-2`. */
  region?: string
  /** The IAM users whose tokens the API accepts. Default: one, `FakeKube.defaultUser`. */
  users?: FakeIamUser[]
  /** The cluster's status in DescribeCluster; endpoint and CA are only shown while ACTIVE. */
  status?: ClusterStatus
  /** The clock for token expiry and timestamps. Default `Date.now`. */
  now?: () => number
  /**
   * How long a Service keeps sending requests to a pod after it starts terminating, ms: the time
   * Kubernetes takes to take it out of the Service's endpoints everywhere (kube-proxy, a load
   * balancer's targets), which races the pod's SIGTERM. Default 1,000.
   */
  endpointLagMs?: number
  /** Namespaces that exist. Default `["default"]`, plus those of `localQueues`. */
  namespaces?: string[]
  clusterQueues?: FakeClusterQueue[]
  localQueues?: { namespace: string; name: string; clusterQueue: string }[]
  /** WorkloadPriorityClasses by name: their values. */
  priorityClasses?: Record<string, number>
}

export interface FakeKube {
  readonly clusterName: string
  readonly region: string
  /** For `new EKSClient({ endpoint: fake.eksUrl, region, credentials })`. */
  readonly eksUrl: string
  /** The Kubernetes API endpoint (what DescribeCluster returns as `endpoint`). */
  readonly server: string
  /** The cluster CA, PEM. */
  readonly caPem: string
  readonly users: FakeIamUser[]
  /** Kubernetes API requests, in order (path and query). */
  readonly requests: ApiState["requests"]
  /** DescribeCluster calls, in order. */
  readonly eksRequests: string[]
  /** A valid token for a user (default the first), as `aws eks get-token` would make it. */
  token(options?: {
    user?: FakeIamUser
    signingDate?: Date
    expiresIn?: number
    omitClusterHeader?: boolean
  }): Promise<string>
  setClusterStatus(status: ClusterStatus): void
  /** The next DescribeCluster answers with this AWS error. */
  injectEksFault(fault: { status: 400 | 500 | 503; type: string }): void
  /** The next matching Kubernetes API requests answer with this fault (429 with Retry-After, 500, 503). */
  injectFault(fault: Fault): void
  /** Make the callers forbidden (403) for a resource (and verb, namespace). */
  forbid(rule: ForbiddenRule): void
  allowAll(): void
  /** Pulling this image fails: ErrImagePull, then ImagePullBackOff; the pod stays Pending. */
  failImagePull(image: string): void
  /** The next pod whose name starts with `podPrefix` is killed once running and reports this termination (e.g. OOMKilled, 137). */
  scriptTermination(termination: ScriptedTermination): void
  /** Evict a Workload (Evicted, and Preempted for reason Preempted): the Job is suspended and its pods deleted. */
  evictWorkload(namespace: string, name: string, options?: EvictOptions): void
  /** Let a Workload evicted with `hold` be admitted again. */
  releaseWorkload(namespace: string, name: string): void
  /** Every continue token handed out so far answers 410 Expired. */
  expireContinueTokens(): void
  /** A stored object, as the API would return it (undefined when absent). */
  object(t: ResourceType, namespace: string, name: string): JsonObject | undefined
  /** The loopback URL of a Service (also its `fake-kube.swarmplane.dev/url` annotation) once it listens. */
  serviceUrl(namespace: string, name: string): string | undefined
  /** A kubeconfig for this cluster with a static token (for kubectl). */
  kubeconfig(token: string): string
  /** Errors the fake's controllers threw (a test can assert there are none). */
  readonly controllerErrors: string[]
  livePids(): number[]
  stop(): Promise<void>
}

export const defaultUser: FakeIamUser = {
  accessKeyId: "AKIAFAKEKUBE00000001",
  secretAccessKey: "fake-kube-secret-access-key",
  arn: "arn:aws:iam::111122223333:user/swarmplane-test",
}

export async function startFakeKube(options: FakeKubeOptions = {}): Promise<FakeKube> {
  const clusterName = options.clusterName ?? "fake-eks"
  const region = options.region ?? "us-west-2"
  const now = options.now ?? Date.now
  const users = options.users ?? [defaultUser]
  const tls = makeClusterTls(clusterName)
  const store = new Store(now, (t, o) => {
    if (t === Types.jobs) selectJobPods(o)
  })
  const runner = processRunner()
  const kubelet = new Kubelet(store, runner)
  const kueue = new Kueue(store)
  const jobs = new JobController(store)
  const deployments = new DeploymentController(store)
  const services = new Services(store, kubelet, options.endpointLagMs ?? 1_000)

  // Controllers run after writes, coalesced: every write schedules one more pass until nothing changes.
  const controllerErrors: string[] = []
  let scheduled = false
  let stopping = false
  const pass = () => {
    scheduled = false
    if (stopping) return
    try {
      kueue.sync()
      jobs.sync()
      deployments.sync()
      kubelet.sync()
      services.sync()
    } catch (error) {
      // A controller bug must not pass silently as "nothing happens": record it for the test to see.
      controllerErrors.push(error instanceof Error ? (error.stack ?? error.message) : String(error))
    }
  }
  store.onChange(() => {
    if (scheduled || stopping) return
    scheduled = true
    setImmediate(pass)
  })

  seed(store, options)

  const api: ApiState = {
    clusterName,
    users,
    now,
    store,
    faults: [],
    forbidden: [],
    requests: [],
    admit,
    validate,
    podLog: (namespace, name, container, previous) => kubelet.log(namespace, name, container, previous),
  }
  const apiServer = await listen(
    serve({
      fetch: fakeKubeApp(api).fetch,
      hostname: "127.0.0.1",
      port: 0,
      createServer: createHttpsServer,
      serverOptions: { key: tls.key, cert: tls.cert },
    }),
  )
  const server = `https://127.0.0.1:${(apiServer.address() as AddressInfo).port}`
  const eks: EksState = {
    name: clusterName,
    region,
    status: options.status ?? "ACTIVE",
    endpoint: server,
    caPem: tls.caPem,
    createdAt: now(),
    faults: [],
    requests: [],
  }
  const eksServer = await listen(serve({ fetch: fakeEksApp(eks).fetch, hostname: "127.0.0.1", port: 0 }))
  const eksUrl = `http://127.0.0.1:${(eksServer.address() as AddressInfo).port}`
  let stopped: Promise<void> | undefined

  return {
    clusterName,
    region,
    eksUrl,
    server,
    caPem: tls.caPem,
    users,
    requests: api.requests,
    eksRequests: eks.requests,
    token: (o = {}) =>
      makeToken({
        clusterName,
        region,
        credentials: o.user ?? users[0] ?? defaultUser,
        signingDate: o.signingDate ?? new Date(now()),
        expiresIn: o.expiresIn,
        omitClusterHeader: o.omitClusterHeader,
      }),
    setClusterStatus(status) {
      eks.status = status
    },
    injectEksFault: (fault) => void eks.faults.push(fault),
    injectFault: (fault) => void api.faults.push({ ...fault }),
    forbid: (rule) => void api.forbidden.push(rule),
    allowAll: () => void api.forbidden.splice(0),
    failImagePull: (image) => void kubelet.badImages.add(image),
    scriptTermination: (t) => void kubelet.terminations.push(t),
    evictWorkload: (namespace, name, o) => kueue.evict(namespace, name, o),
    releaseWorkload: (namespace, name) => kueue.release(namespace, name),
    expireContinueTokens: () => store.compact(),
    object: (t, namespace, name) => {
      const o = store.find(t, namespace, name)
      return o ? structuredClone(o) : undefined
    },
    serviceUrl: (namespace, name) => services.url(namespace, name),
    kubeconfig: (token) =>
      JSON.stringify({
        apiVersion: "v1",
        kind: "Config",
        clusters: [
          {
            name: clusterName,
            cluster: { server, "certificate-authority-data": Buffer.from(tls.caPem).toString("base64") },
          },
        ],
        users: [{ name: "fake", user: { token } }],
        contexts: [
          { name: clusterName, context: { cluster: clusterName, user: "fake", namespace: "default" } },
        ],
        "current-context": clusterName,
      }),
    controllerErrors,
    livePids: () => runner.livePids(),
    stop() {
      stopped ??= (async () => {
        stopping = true
        services.closeAll()
        kubelet.stopAll()
        await runner.stopAll()
        for (const s of [apiServer, eksServer])
          await new Promise<void>((resolve) => {
            s.close(() => resolve())
            // Kept-alive client connections would hold the close open.
            if ("closeAllConnections" in s) s.closeAllConnections()
          })
      })()
      return stopped
    },
  }
}

type NodeServer = ReturnType<typeof serve>

function listen(s: NodeServer): Promise<NodeServer> {
  return new Promise((resolve, reject) => {
    if (s.listening) resolve(s)
    s.once("listening", () => resolve(s))
    s.once("error", reject)
  })
}

/** The namespaces, queues, flavors and priority classes the test configured, as stored objects. */
function seed(store: Store, options: FakeKubeOptions): void {
  const namespaces = new Set([
    ...(options.namespaces ?? ["default"]),
    ...(options.localQueues ?? []).map((q) => q.namespace),
  ])
  for (const ns of namespaces)
    store.create(Types.namespaces, "", {
      metadata: { name: ns },
      spec: { finalizers: ["kubernetes"] },
      status: { phase: "Active" },
    })
  for (const [name, value] of Object.entries(options.priorityClasses ?? {}))
    store.create(Types.workloadpriorityclasses, "", {
      metadata: { name },
      value,
      description: `fake priority ${value}`,
    })
  for (const cq of options.clusterQueues ?? []) {
    for (const f of cq.flavors)
      if (!store.find(Types.resourceflavors, "", f.name))
        store.create(Types.resourceflavors, "", {
          metadata: { name: f.name },
          spec: { nodeLabels: f.nodeLabels ?? {} },
        })
    const covered = [...new Set(cq.flavors.flatMap((f) => Object.keys(f.nominalQuota)))]
    store.create(Types.clusterqueues, "", {
      metadata: { name: cq.name },
      spec: {
        namespaceSelector: {},
        queueingStrategy: cq.queueingStrategy ?? "BestEffortFIFO",
        resourceGroups: [
          {
            coveredResources: covered,
            flavors: cq.flavors.map((f) => ({
              name: f.name,
              resources: covered.map((r) => ({ name: r, nominalQuota: String(f.nominalQuota[r] ?? 0) })),
            })),
          },
        ],
        preemption: { withinClusterQueue: cq.preemption ?? "Never", reclaimWithinCohort: "Never" },
        stopPolicy: "None",
      },
    })
  }
  for (const q of options.localQueues ?? [])
    store.create(Types.localqueues, q.namespace, {
      metadata: { name: q.name },
      spec: { clusterQueue: q.clusterQueue, stopPolicy: "None" },
    })
}
