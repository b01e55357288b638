/**
 * A swarm's Deployment and Service on EKS, against an in-memory namespace that answers as the API server
 * does where it matters (201 create, 409 AlreadyExists, JSON merge patch, a generation bumped by a spec
 * change, 404 after delete), recording each call: create makes one of each, an update is one PATCH of
 * what changed, delete removes both and an object already gone is fine; then the status table (ready
 * replicas, rollout, pods' reasons, the endpoint and its health) and the Service's URL. The same
 * paths against the fake EKS cluster, and through swarmplane's API, are in test/eks-serving.test.ts.
 */
import { describe, expect, test } from "vitest"
import { EksBackendConfig } from "../../model/backend"
import { type Swarm, SwarmSpec } from "../../model/swarm"
import { isRetryable } from "../../util/errors"
import { KubeApiError } from "./api-error"
import type { KubeClient, NamespacedResource } from "./client"
import { EksServing, podState, servingPhase } from "./serving"
import {
  deploymentObject,
  endpointOf,
  LastAppliedAnnotation,
  mergePatchOf,
  ServingLabel,
  servingName,
  updatePatch,
} from "./serving-objects"
import type { EksConfig } from "./spec"
import type { Deployment, KubeObject, Pod, Service } from "./types"

const config = EksBackendConfig.parse({
  type: "eks",
  clusterName: "gpu",
  region: "us-west-2",
  namespace: "team-a",
  localQueue: "user-queue",
}) as EksConfig

function swarm(fields: Record<string, unknown> = {}, generation = 1): Swarm {
  return {
    ...SwarmSpec.parse({ name: "llm", model: "echo", replicas: 2, ...fields }),
    project: "proj",
    phase: "PENDING",
    desired: "running",
    generation,
    observedGeneration: 0,
    replicaStatus: { ready: 0, total: 2, items: [] },
    createdAt: "2026-01-01T00:00:00.000Z",
    updatedAt: "2026-01-01T00:00:00.000Z",
  }
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v)
function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return patch
  const out: Record<string, unknown> = isObject(target) ? { ...target } : {}
  for (const [k, v] of Object.entries(patch))
    if (v === null) delete out[k]
    else out[k] = applyMergePatch(out[k], v)
  return out
}

/** One namespace's Deployments, Services and pods in memory, as the API server keeps them. */
function namespace() {
  const calls: string[] = []
  const stores = { deployments: new Map<string, KubeObject>(), services: new Map<string, KubeObject>() }
  const pods: Pod[] = []
  /** Objects whose next GET answers 404 (a read that came before another pass's create). */
  const staleGets = new Set<string>()
  const notFound = (path: string) =>
    new KubeApiError(`${path} not found`, false, "PATCH", path, 404, "NotFound")
  function resource<T extends KubeObject>(kind: keyof typeof stores): NamespacedResource<T> {
    const items = stores[kind]
    return {
      async create(_ns, object) {
        const name = object.metadata.name ?? ""
        calls.push(`POST ${kind}/${name}`)
        if (items.has(name)) throw new KubeApiError("exists", false, "POST", kind, 409, "AlreadyExists")
        const made = structuredClone({ ...object, metadata: { ...object.metadata, generation: 1 } })
        items.set(name, made)
        return structuredClone(made) as T
      },
      async get(_ns, name) {
        calls.push(`GET ${kind}/${name}`)
        if (staleGets.delete(`${kind}/${name}`)) return undefined
        const found = items.get(name)
        return found ? (structuredClone(found) as T) : undefined
      },
      async list() {
        return [...items.values()].map((o) => structuredClone(o) as T)
      },
      async patch(_ns, name, patch) {
        calls.push(`PATCH ${kind}/${name} ${JSON.stringify(patch)}`)
        const current = items.get(name) as (KubeObject & { spec?: unknown }) | undefined
        if (!current) throw notFound(`${kind}/${name}`)
        const next = applyMergePatch(current, patch) as KubeObject & { spec?: unknown }
        if (JSON.stringify(next.spec) !== JSON.stringify(current.spec))
          next.metadata.generation = (current.metadata.generation ?? 1) + 1
        items.set(name, next)
        return structuredClone(next) as T
      },
      async delete(_ns, name) {
        calls.push(`DELETE ${kind}/${name}`)
        return items.delete(name)
      },
    }
  }
  const kube = {
    deployments: resource<Deployment>("deployments"),
    services: resource<Service>("services"),
    pods: {
      async list(_ns: string, options?: { labelSelector?: string }) {
        calls.push(`LIST pods ${options?.labelSelector}`)
        return structuredClone(pods)
      },
    },
  } as unknown as KubeClient
  return {
    calls,
    pods,
    staleGets,
    deployment: (name: string) => stores.deployments.get(name) as Deployment | undefined,
    service: (name: string) => stores.services.get(name) as Service | undefined,
    setStatus(kind: keyof typeof stores, name: string, status: unknown) {
      const o = stores[kind].get(name) as KubeObject & { status?: unknown }
      o.status = status
    },
    call: <T>(use: (k: KubeClient) => Promise<T>) => use(kube),
  }
}

/** A fetch that answers the health path with `status`, recording the URLs it was asked. */
function health(status: number) {
  const asked: string[] = []
  const doFetch = (async (url: string) => {
    asked.push(url)
    return new Response("ok", { status })
  }) as unknown as typeof fetch
  return { asked, fetch: doFetch }
}

const serving = (ns: ReturnType<typeof namespace>, doFetch?: typeof fetch) =>
  EksServing({
    project: "proj",
    backendId: "eks-a",
    config,
    call: ns.call,
    ...(doFetch ? { fetch: doFetch } : {}),
  })

describe("EksServing.createOrUpdate", () => {
  test("a new swarm is one Deployment and one Service of one name, labelled for swarmplane and the LocalQueue", async () => {
    const ns = namespace()
    const s = swarm()
    const handle = await serving(ns).createOrUpdate(s)
    const name = servingName("proj", s)
    expect(ns.calls).toEqual([
      `GET deployments/${name}`,
      `POST deployments/${name}`,
      `GET services/${name}`,
      `POST services/${name}`,
    ])
    expect(handle).toEqual({
      id: name,
      url: `http://${name}.team-a.svc.cluster.local`,
      meta: { generation: 1, deployment: name, service: name, namespace: "team-a" },
    })
    const d = ns.deployment(name)!
    const labels = {
      "swarmplane.dev/project": "proj",
      "swarmplane.dev/backend": "eks-a",
      "swarmplane.dev/swarm": "llm",
      "kueue.x-k8s.io/queue-name": "user-queue",
    }
    expect(d.metadata.labels).toEqual(labels)
    expect(ns.service(name)!.metadata.labels).toEqual(labels)
    expect(d.spec?.replicas).toBe(2)
    expect(d.spec?.selector).toEqual({ matchLabels: { [ServingLabel]: name } })
    const container = d.spec!.template.spec.containers[0]!
    expect(container.command).toEqual(["swarmplane-agent", "echo-server", "--host", "0.0.0.0"])
    expect(container.ports).toEqual([{ name: "http", containerPort: 8000, protocol: "TCP" }])
    expect(container.readinessProbe).toEqual({ httpGet: { path: "/health", port: "http" }, periodSeconds: 5 })
    expect(container.env).toEqual([
      { name: "MODEL", value: "echo" },
      { name: "PORT", value: "8000" },
    ])
    expect(container.resources?.requests).toEqual({ cpu: "1", memory: "4Gi" })
    // The pods carry the selector, not the backend's label: the task pass's pod LIST does not see them.
    expect(d.spec!.template.metadata?.labels).toEqual({ [ServingLabel]: name, "swarmplane.dev/swarm": "llm" })
    expect(ns.service(name)!.spec).toEqual({
      type: "ClusterIP",
      selector: { [ServingLabel]: name },
      ports: [{ name: "http", port: 80, targetPort: "http", protocol: "TCP" }],
    })
  })

  test("the same spec again changes nothing; 2 → 3 replicas is one PATCH of the same Deployment, of the count alone", async () => {
    const ns = namespace()
    await serving(ns).createOrUpdate(swarm())
    const name = servingName("proj", swarm())
    ns.calls.length = 0
    await serving(ns).createOrUpdate(swarm())
    expect(ns.calls.filter((c) => !c.startsWith("GET"))).toEqual([])

    const handle = await serving(ns).createOrUpdate(swarm({ replicas: 3 }, 2))
    expect(handle.meta.generation).toBe(2)
    const writes = ns.calls.filter((c) => !c.startsWith("GET"))
    expect(writes).toHaveLength(1)
    expect(writes[0]).toMatch(new RegExp(`^PATCH deployments/${name} `))
    const patch = JSON.parse(writes[0]!.slice(writes[0]!.indexOf(" {") + 1))
    expect(patch.spec).toEqual({ replicas: 3 })
    expect(Object.keys(patch.metadata)).toEqual(["annotations"])
    expect(ns.deployment(name)?.spec?.replicas).toBe(3)
    // The template is the same: Kubernetes scales the pods, it does not roll them.
    expect(ns.deployment(name)?.spec?.template).toEqual(
      deploymentObject({ project: "proj", backendId: "eks-a", swarm: swarm(), config }).spec?.template,
    )
  })

  test("a new image, args and env are one PATCH of the container list (a merge patch replaces lists whole)", async () => {
    const ns = namespace()
    await serving(ns).createOrUpdate(swarm({ env: { A: "1", B: "2" } }))
    ns.calls.length = 0
    await serving(ns).createOrUpdate(swarm({ image: "echo:2", args: ["--seed", "7"], env: { A: "1" } }, 2))
    const writes = ns.calls.filter((c) => !c.startsWith("GET"))
    expect(writes).toHaveLength(1)
    const patch = JSON.parse(writes[0]!.slice(writes[0]!.indexOf(" {") + 1))
    expect(Object.keys(patch.spec)).toEqual(["template"])
    const container = patch.spec.template.spec.containers[0]
    expect(container.image).toBe("echo:2")
    expect(container.command).toEqual(["swarmplane-agent", "echo-server", "--host", "0.0.0.0", "--seed", "7"])
    expect(container.env.map((e: { name: string }) => e.name)).toEqual(["A", "MODEL", "PORT"])
  })

  test("a Service type change patches the Service alone", async () => {
    const ns = namespace()
    await serving(ns).createOrUpdate(swarm())
    ns.calls.length = 0
    await serving(ns).createOrUpdate(swarm({ serving: { eks: { serviceType: "LoadBalancer" } } }, 2))
    const writes = ns.calls.filter((c) => !c.startsWith("GET"))
    expect(writes).toHaveLength(1)
    expect(writes[0]).toContain("PATCH services/")
    expect(writes[0]).toContain('"spec":{"type":"LoadBalancer"}')
  })

  test("a Deployment made meanwhile by another pass (409) is updated, not made twice", async () => {
    const ns = namespace()
    await serving(ns).createOrUpdate(swarm())
    const name = servingName("proj", swarm())
    // This pass's GET came before the other pass's create landed: its create meets 409 AlreadyExists.
    ns.staleGets.add(`deployments/${name}`)
    ns.calls.length = 0
    await serving(ns).createOrUpdate(swarm({ replicas: 4 }, 2))
    expect(ns.calls.filter((c) => c.includes("deployments")).map((c) => c.split(" {")[0])).toEqual([
      `GET deployments/${name}`,
      `POST deployments/${name}`,
      `GET deployments/${name}`,
      `PATCH deployments/${name}`,
    ])
    expect(ns.deployment(name)?.spec?.replicas).toBe(4)
  })

  test("an object of that name without swarmplane's record is brought to the whole spec", () => {
    const wanted = deploymentObject({ project: "proj", backendId: "eks-a", swarm: swarm(), config })
    const foreign: Deployment = {
      metadata: { name: wanted.metadata.name },
      spec: { ...wanted.spec!, replicas: 9 },
    }
    const patch = updatePatch(foreign, wanted) as {
      spec: unknown
      metadata: { annotations: Record<string, string> }
    }
    expect(patch.spec).toEqual(wanted.spec)
    expect(JSON.parse(patch.metadata.annotations[LastAppliedAnnotation]!)).toEqual({
      labels: wanted.metadata.labels,
      spec: wanted.spec,
    })
  })

  test("a swarm with autoscaling is refused for good, and nothing is made", async () => {
    const ns = namespace()
    const refused = serving(ns).createOrUpdate(
      swarm({ replicas: 1, autoscaling: { minReplicas: 1, maxReplicas: 3 } }),
    )
    await expect(refused).rejects.toThrow(/do not autoscale swarms/)
    expect(isRetryable(await refused.catch((e: unknown) => e))).toBe(false)
    expect(ns.calls).toEqual([])
  })
})

describe("mergePatchOf", () => {
  test("changed fields only, lists whole, null for what was dropped", () => {
    const before = {
      replicas: 2,
      template: { nodeSelector: { a: "1", b: "2" }, containers: [{ name: "s", image: "x" }] },
    }
    const after = {
      replicas: 2,
      template: { nodeSelector: { a: "1" }, containers: [{ name: "s", image: "y" }] },
    }
    expect(mergePatchOf(before, after)).toEqual({
      template: { nodeSelector: { b: null }, containers: [{ name: "s", image: "y" }] },
    })
    expect(mergePatchOf(before, structuredClone(before))).toBeUndefined()
  })
})

describe("endpointOf", () => {
  // `ports` (a load balancer's port status) is in the API's LoadBalancerIngress, not in types.ts.
  const svc = (type: "ClusterIP" | "LoadBalancer", ingress?: object[]): Service => ({
    metadata: { name: "sp-llm-1" },
    spec: { type, ports: [{ name: "http", port: 80, targetPort: "http" }] },
    ...(ingress ? { status: { loadBalancer: { ingress: ingress as { ip?: string }[] } } } : {}),
  })
  const cases: Record<string, [Service, ReturnType<typeof endpointOf>]> = {
    "an EKS load balancer's host name, on the Service's port": [
      svc("LoadBalancer", [{ hostname: "k8s-team-a-sp-123.elb.us-west-2.amazonaws.com" }]),
      { url: "http://k8s-team-a-sp-123.elb.us-west-2.amazonaws.com", reported: true },
    ],
    "an address with its port status": [
      svc("ClusterIP", [{ ip: "127.0.0.1", ports: [{ port: 40123, protocol: "TCP" }] }]),
      { url: "http://127.0.0.1:40123", reported: true },
    ],
    "an IPv6 address": [
      svc("LoadBalancer", [{ ip: "fd00::1" }]),
      { url: "http://[fd00::1]", reported: true },
    ],
    "a ClusterIP Service: its cluster DNS name": [
      svc("ClusterIP"),
      { url: "http://sp-llm-1.team-a.svc.cluster.local", reported: false },
    ],
    "a load balancer not made yet: none": [svc("LoadBalancer", []), undefined],
  }
  for (const [name, [service, want]] of Object.entries(cases))
    test(name, () => expect(endpointOf(service, "team-a")).toEqual(want))
})

const readyPod = (name: string): Pod => ({
  metadata: { name },
  status: { phase: "Running", conditions: [{ type: "Ready", status: "True" }] },
})
const waitingPod = (name: string, reason: string, message = "why"): Pod => ({
  metadata: { name },
  status: {
    phase: "Pending",
    containerStatuses: [
      { name: "server", ready: false, restartCount: 0, state: { waiting: { reason, message } } },
    ],
  },
})
const deployment = (replicas: number, status: Deployment["status"], generation = 1): Deployment => ({
  metadata: { name: "sp-llm-1", generation },
  spec: { replicas, selector: {}, template: { spec: { containers: [] } } },
  status,
})
const settled = (n: number) => ({ observedGeneration: 1, replicas: n, updatedReplicas: n, readyReplicas: n })
const lb = { url: "http://lb.example", reported: true }
const dns = { url: "http://sp-llm-1.team-a.svc.cluster.local", reported: false }

describe("servingPhase", () => {
  const cases: Record<
    string,
    [Parameters<typeof servingPhase>[0], { phase: string; current: boolean; detail?: RegExp; ready?: number }]
  > = {
    "all ready and healthy through the reported address: RUNNING at this generation": [
      {
        deployment: deployment(2, settled(2)),
        pods: [readyPod("a"), readyPod("b")],
        endpoint: lb,
        healthy: true,
      },
      { phase: "RUNNING", current: true, ready: 2 },
    ],
    "all ready, the health path not answering 200 yet: INITIALIZING": [
      {
        deployment: deployment(2, settled(2)),
        pods: [readyPod("a"), readyPod("b")],
        endpoint: lb,
        healthy: false,
      },
      { phase: "INITIALIZING", current: true, detail: /http:\/\/lb.example has not answered 200/ },
    ],
    "behind a ClusterIP Service the readiness probes are the health check": [
      {
        deployment: deployment(2, settled(2)),
        pods: [readyPod("a"), readyPod("b")],
        endpoint: dns,
        healthy: false,
      },
      { phase: "RUNNING", current: true },
    ],
    "a load balancer without an address yet: INITIALIZING": [
      { deployment: deployment(1, settled(1)), pods: [readyPod("a")], healthy: false },
      { phase: "INITIALIZING", current: true, detail: /load balancer has no address yet/ },
    ],
    "scaling 2 → 3, two ready and healthy: RUNNING, not yet at this generation": [
      {
        deployment: deployment(
          3,
          { observedGeneration: 2, replicas: 3, updatedReplicas: 3, readyReplicas: 2 },
          2,
        ),
        pods: [readyPod("a"), readyPod("b"), waitingPod("c", "ContainerCreating")],
        endpoint: lb,
        healthy: true,
      },
      { phase: "RUNNING", current: false, detail: /rolling out: 2\/3 replicas ready/ },
    ],
    "a rollout whose old pod is still there is not current": [
      {
        deployment: deployment(
          1,
          { observedGeneration: 2, replicas: 2, updatedReplicas: 1, readyReplicas: 2 },
          2,
        ),
        pods: [readyPod("a"), readyPod("b")],
        endpoint: lb,
        healthy: true,
      },
      { phase: "RUNNING", current: false },
    ],
    "no pod ready, an image that cannot be pulled: PENDING with the reason": [
      {
        deployment: deployment(1, { observedGeneration: 1, replicas: 1, updatedReplicas: 1 }),
        pods: [waitingPod("a", "ImagePullBackOff", 'Back-off pulling image "nope"')],
        endpoint: lb,
        healthy: false,
      },
      {
        phase: "PENDING",
        current: false,
        detail: /0\/1 replicas ready; ImagePullBackOff: a: Back-off pulling image "nope"/,
      },
    ],
    "no pod ready, one running (the model loading): INITIALIZING": [
      {
        deployment: deployment(1, { observedGeneration: 1, replicas: 1, updatedReplicas: 1 }),
        pods: [
          {
            metadata: { name: "a" },
            status: { phase: "Running", conditions: [{ type: "Ready", status: "False" }] },
          },
        ],
        endpoint: lb,
        healthy: false,
      },
      { phase: "INITIALIZING", current: false },
    ],
    "replicas held by Kueue's scheduling gate: PENDING, waiting for admission": [
      {
        deployment: deployment(1, { observedGeneration: 1, replicas: 1, updatedReplicas: 1 }),
        pods: [
          {
            metadata: { name: "a" },
            status: {
              phase: "Pending",
              conditions: [
                {
                  type: "PodScheduled",
                  status: "False",
                  reason: "SchedulingGated",
                  message: "Scheduling is blocked due to non-empty scheduling gates",
                },
              ],
            },
          },
        ],
        endpoint: lb,
        healthy: false,
      },
      {
        phase: "PENDING",
        current: false,
        detail: /waiting for Kueue to admit the replicas \(a: Scheduling is blocked/,
      },
    ],
    "Kubernetes gave up on the rollout: FAILED": [
      {
        deployment: deployment(1, {
          observedGeneration: 1,
          replicas: 1,
          conditions: [
            {
              type: "Progressing",
              status: "False",
              reason: "ProgressDeadlineExceeded",
              message: 'ReplicaSet "sp-llm-1-abc" has timed out progressing.',
            },
          ],
        }),
        pods: [waitingPod("a", "CrashLoopBackOff", "back-off 5m0s restarting failed container")],
        endpoint: lb,
        healthy: false,
      },
      { phase: "FAILED", current: false, detail: /timed out progressing.*CrashLoopBackOff/ },
    ],
    "0 replicas asked and none left: STOPPED": [
      { deployment: deployment(0, { observedGeneration: 1 }), pods: [], endpoint: lb, healthy: false },
      { phase: "STOPPED", current: true },
    ],
  }
  for (const [name, [view, want]] of Object.entries(cases))
    test(name, () => {
      const got = servingPhase(view)
      expect(got.phase).toBe(want.phase)
      expect(got.current).toBe(want.current)
      if (want.detail) expect(got.detail).toMatch(want.detail)
      if (want.ready !== undefined) expect(got.replicas.ready).toBe(want.ready)
    })

  test("pods are listed by name with their state and reason", () => {
    expect(podState(waitingPod("x", "ErrImagePull", "not found"))).toEqual({
      state: "ErrImagePull",
      message: "not found",
    })
    const unschedulable: Pod = {
      metadata: { name: "y" },
      status: {
        phase: "Pending",
        conditions: [
          {
            type: "PodScheduled",
            status: "False",
            reason: "Unschedulable",
            message: "0/3 nodes have nvidia.com/gpu",
          },
        ],
      },
    }
    const got = servingPhase({
      deployment: deployment(2, { observedGeneration: 1, replicas: 2 }),
      pods: [unschedulable, readyPod("b")],
      endpoint: lb,
      healthy: false,
    })
    expect(got.replicas.items).toEqual([
      { index: 0, state: "READY", message: "b" },
      { index: 1, state: "Unschedulable", message: "y: 0/3 nodes have nvidia.com/gpu" },
    ])
  })
})

describe("EksServing.status and delete", () => {
  /** A created swarm whose Deployment reports `n` Ready replicas behind a load balancer at lb.example. */
  async function running(n: number) {
    const ns = namespace()
    const s = swarm({ replicas: n })
    const handle = await serving(ns).createOrUpdate(s)
    ns.setStatus("deployments", handle.id, settled(n))
    ns.setStatus("services", handle.id, { loadBalancer: { ingress: [{ hostname: "lb.example" }] } })
    for (let i = 0; i < n; i++) ns.pods.push(readyPod(`${handle.id}-${i}`))
    return { ns, s: { ...s, handle } }
  }

  test("ready replicas and a 200 through the Service's address: RUNNING at its URL and generation", async () => {
    const { ns, s } = await running(2)
    const h = health(200)
    ns.calls.length = 0
    const status = await serving(ns, h.fetch).status(s)
    expect(status).toMatchObject({
      phase: "RUNNING",
      url: "http://lb.example",
      generation: 1,
      replicas: { ready: 2, total: 2 },
    })
    expect(h.asked).toEqual(["http://lb.example/health"])
    expect(ns.calls).toContain(`LIST pods ${ServingLabel}=${s.handle.id}`)
  })

  test("the health path answering 503: INITIALIZING, no URL, no generation", async () => {
    const { ns, s } = await running(1)
    const status = await serving(ns, health(503).fetch).status(s)
    expect(status).toMatchObject({ phase: "INITIALIZING" })
    expect(status).not.toHaveProperty("url")
    expect(status).not.toHaveProperty("generation")
  })

  test("a Service deleted outside swarmplane fails the swarm (its teardown removes the Deployment)", async () => {
    const { ns, s } = await running(1)
    await ns.call((k) => k.services.delete("team-a", s.handle.id))
    expect(await serving(ns, health(200).fetch).status(s)).toMatchObject({
      phase: "FAILED",
      detail: `Service ${s.handle.id} was deleted outside swarmplane`,
    })
  })

  test("delete removes the Deployment and the Service; then the swarm is gone, and a second delete is fine", async () => {
    const { ns, s } = await running(2)
    ns.calls.length = 0
    const deleted = { ...s, desired: "deleted" as const }
    await serving(ns).delete(deleted)
    expect(ns.calls).toEqual([`DELETE deployments/${s.handle.id}`, `DELETE services/${s.handle.id}`])
    expect(ns.deployment(s.handle.id)).toBeUndefined()
    expect(ns.service(s.handle.id)).toBeUndefined()
    expect(await serving(ns).status(deleted)).toEqual({ gone: true })
    await expect(serving(ns).delete(deleted)).resolves.toBeUndefined()
  })

  test("after a delete, an object still there keeps the swarm waiting (the next pass deletes again)", async () => {
    const { ns, s } = await running(1)
    await ns.call((k) => k.deployments.delete("team-a", s.handle.id))
    const status = await serving(ns).status({ ...s, desired: "deleted", phase: "RUNNING" })
    expect(status).toMatchObject({ phase: "RUNNING", detail: `deleting: Service ${s.handle.id} still there` })
  })
})
