/**
 * Swarms on the `eks` backend against the fake EKS cluster, whose Deployments' pods run the echo model
 * as local processes behind a loopback listener per Service (reported as the Service's
 * `status.loadBalancer.ingress`, as a load balancer's address is). First `EksServing` alone through the
 * real Kubernetes client (TLS to the cluster CA, an EKS token): one Deployment and one Service made,
 * one PATCH per update, both removed. Then end to end through swarmplane's API with the backend
 * registered: a 2-replica echo swarm comes up RUNNING and answers a chat completion at its URL,
 * 2 → 3 replicas is one PATCH of the same Deployment, and DELETE removes the Deployment and the Service;
 * and a steady request rate through two rolling updates and a scale 2 → 4 → 2 fails no request (the
 * swarm's `rollout` is the Deployment's strategy and each old pod's `preStop` drain).
 */
import { type KubeClient, kubeClient } from "@swarmplane/core/backends/eks/client"
import { EksServing } from "@swarmplane/core/backends/eks/serving"
import { ServingLabel } from "@swarmplane/core/backends/eks/serving-objects"
import type { EksConfig } from "@swarmplane/core/backends/eks/spec"
import { EksBackendConfig } from "@swarmplane/core/model/backend"
import { type Swarm, SwarmSpec } from "@swarmplane/core/model/swarm"
import { afterAll, beforeAll, describe, expect, test } from "vitest"
import { type EksPlane, eksPlane } from "./support/eks-plane"
import { type FakeKube, startFakeKube, Types } from "./support/fake-kube"
import { until } from "./support/plane"
import { phaseTable, steadyLoad } from "./support/steady-load"

const ns = "team-a"
const deploymentsPath = `/apis/apps/v1/namespaces/${ns}/deployments`
const servicesPath = `/api/v1/namespaces/${ns}/services`
const count = (fake: FakeKube, method: string, path: string) =>
  fake.requests.filter((r) => r.method === method && r.path === path).length

/** A chat completion through `url`: the echo model's answer. */
async function chat(url: string, content: string): Promise<string> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ model: "echo", messages: [{ role: "user", content }] }),
  })
  expect(res.status).toBe(200)
  return (await res.json()).choices[0].message.content
}

describe("EksServing through the Kubernetes client, against the fake cluster", () => {
  let fake: FakeKube
  let kube: KubeClient
  const config = EksBackendConfig.parse({
    type: "eks",
    clusterName: "fake-eks",
    region: "us-west-2",
    namespace: ns,
    localQueue: "user-queue",
  }) as EksConfig
  beforeAll(async () => {
    fake = await startFakeKube({ namespaces: [ns] })
    kube = kubeClient({
      access: {
        cluster: async () => ({ endpoint: fake.server, caPem: fake.caPem }),
        token: () => fake.token(),
      },
    })
  }, 60_000)
  afterAll(async () => {
    await fake?.stop()
    expect(fake.controllerErrors).toEqual([])
  })

  const swarm = (fields: Record<string, unknown>, generation: number): Swarm => ({
    ...SwarmSpec.parse({ name: "direct", model: "echo", ...fields }),
    project: "default",
    phase: "PENDING",
    desired: "running",
    generation,
    observedGeneration: 0,
    replicaStatus: { ready: 0, total: 0, items: [] },
    createdAt: "2026-01-01T00:00:00.000Z",
    updatedAt: "2026-01-01T00:00:00.000Z",
  })

  test("one Deployment and one Service; RUNNING at the Service's address; a new count is one PATCH; delete removes both, twice is fine", {
    timeout: 120_000,
  }, async () => {
    const serving = EksServing({ project: "default", backendId: "eks", config, call: (use) => use(kube) })
    const first = swarm({ replicas: 1 }, 1)
    const handle = await serving.createOrUpdate(first)
    const name = handle.id
    expect(count(fake, "POST", deploymentsPath)).toBe(1)
    expect(count(fake, "POST", servicesPath)).toBe(1)
    const d = fake.object(Types.deployments, ns, name)
    expect(d?.metadata).toMatchObject({
      labels: { "kueue.x-k8s.io/queue-name": "user-queue", "swarmplane.dev/backend": "eks" },
    })

    const running = await until(
      "the swarm's Deployment to serve",
      async () => {
        const s = await serving.status({ ...first, handle })
        return "phase" in s && s.phase === "RUNNING" && s.generation === 1 && s
      },
      60_000,
    )
    // The address the Service reports (the fake's loopback listener stands in for a load balancer).
    expect(running.url).toBe(fake.serviceUrl(ns, name))
    expect(await chat(running.url!, "straight through")).toBe("echo: straight through")

    const second = swarm({ replicas: 2 }, 2)
    await serving.createOrUpdate(second)
    expect(count(fake, "PATCH", `${deploymentsPath}/${name}`)).toBe(1)
    expect(count(fake, "PATCH", `${servicesPath}/${name}`)).toBe(0)
    expect(count(fake, "POST", deploymentsPath)).toBe(1)
    await until(
      "two replicas at generation 2",
      async () => {
        const s = await serving.status({
          ...second,
          handle: { ...handle, meta: { ...handle.meta, generation: 2 } },
        })
        return "phase" in s && s.phase === "RUNNING" && s.generation === 2 && s.replicas.ready === 2
      },
      60_000,
    )

    await serving.delete({ ...second, handle, desired: "deleted" })
    expect(fake.object(Types.deployments, ns, name)).toBeUndefined()
    expect(fake.object(Types.services, ns, name)).toBeUndefined()
    await serving.delete({ ...second, handle, desired: "deleted" })
    expect(await serving.status({ ...second, handle, desired: "deleted" })).toEqual({ gone: true })
    await until(
      "the Deployment's pods to go",
      async () => (await kube.pods.list(ns, { labelSelector: `${ServingLabel}=${name}` })).length === 0,
      30_000,
    )
  })
})

describe("a swarm on an eks backend, through swarmplane's API", () => {
  let e: EksPlane
  beforeAll(async () => {
    e = await eksPlane({
      namespaces: [ns],
      clusterQueues: [
        { name: "cq", flavors: [{ name: "default-flavor", nominalQuota: { cpu: 8, memory: "32Gi" } }] },
      ],
      localQueues: [{ namespace: ns, name: "user-queue", clusterQueue: "cq" }],
    })
    await e.register("eks")
  }, 60_000)
  afterAll(async () => {
    await e?.stop()
  })

  /** The swarm, once RUNNING at its latest generation with `ready` replicas Ready. */
  const running = (name: string, ready: number, timeoutMs = 90_000) =>
    until(
      `swarm ${name} to be RUNNING with ${ready} ready`,
      async () => {
        const s = (await e.p.call("GET", `/v1/swarms/${name}?wait=RUNNING&timeoutS=10`)).json
        return (
          s.phase === "RUNNING" &&
          s.observedGeneration === s.generation &&
          s.replicaStatus.ready === ready &&
          s
        )
      },
      timeoutMs,
    )
  const apply = async (spec: Record<string, unknown>) => {
    const res = await e.p.call("POST", "/v1/swarms", { backendId: "eks", ...spec })
    expect(res.status, JSON.stringify(res.json)).toBe(202)
  }

  test("a 2-replica echo swarm reaches RUNNING and answers at its URL; 2 → 3 replicas is one PATCH of the same Deployment; DELETE removes the Deployment and the Service", {
    timeout: 240_000,
  }, async () => {
    await apply({ name: "eks-echo", model: "echo", replicas: 2 })
    const serving = await running("eks-echo", 2)
    const name: string = serving.handle.meta.deployment
    expect(serving.url).toBe(e.fake.serviceUrl(ns, name))
    expect(await chat(serving.url, "from eks")).toBe("echo: from eks")
    expect(count(e.fake, "POST", deploymentsPath)).toBe(1)
    expect(count(e.fake, "POST", servicesPath)).toBe(1)

    await apply({ name: "eks-echo", model: "echo", replicas: 3 })
    const three = await until(
      "three replicas ready on the new generation",
      async () => {
        const s = await running("eks-echo", 3)
        return s.generation > serving.generation && s
      },
      90_000,
    )
    expect(three.url).toBe(serving.url)
    expect(count(e.fake, "PATCH", `${deploymentsPath}/${name}`)).toBe(1)
    expect(count(e.fake, "POST", deploymentsPath)).toBe(1)
    const deployments = e.fake.object(Types.deployments, ns, name)
    expect(deployments?.spec).toMatchObject({ replicas: 3 })
    expect(await chat(three.url, "after scaling")).toBe("echo: after scaling")

    expect((await e.p.call("DELETE", "/v1/swarms/eks-echo")).status).toBe(202)
    const stopped = await until(
      "the swarm to be STOPPED",
      async () => {
        const s = (await e.p.call("GET", "/v1/swarms/eks-echo?wait=STOPPED&timeoutS=10")).json
        return s.phase === "STOPPED" && s
      },
      60_000,
    )
    expect(stopped.desired).toBe("deleted")
    expect(count(e.fake, "DELETE", `${deploymentsPath}/${name}`)).toBeGreaterThan(0)
    expect(count(e.fake, "DELETE", `${servicesPath}/${name}`)).toBeGreaterThan(0)
    expect(e.fake.object(Types.deployments, ns, name)).toBeUndefined()
    expect(e.fake.object(Types.services, ns, name)).toBeUndefined()
    await until(
      "the swarm's URL to close",
      () =>
        fetch(`${serving.url}/health`).then(
          () => false,
          () => true,
        ),
      30_000,
    )
  })

  test("a steady request rate through two rolling updates and a scale 2 → 4 → 2 on EKS: zero failed requests, one URL, one Deployment", {
    timeout: 300_000,
  }, async () => {
    const spec = (replicas: number, delayMs: number) => ({
      name: "eks-roll",
      model: "echo",
      replicas,
      cpusPerReplica: 0.5,
      memoryMiBPerReplica: 256,
      args: ["--delay-ms", String(delayMs)],
      // Each old pod leaves the Service at once and stops 3 s later: longer than any request here.
      rollout: { maxSurge: 1, maxUnavailable: 0, drainTimeoutS: 3 },
    })
    const posts = count(e.fake, "POST", deploymentsPath)
    await apply(spec(2, 20))
    const first = await running("eks-roll", 2)
    const name: string = first.handle.meta.deployment
    const deployment = e.fake.object(Types.deployments, ns, name)!
    expect(deployment.spec).toMatchObject({
      strategy: { type: "RollingUpdate", rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } },
    })
    const pod = (deployment.spec as { template: { spec: Record<string, unknown> } }).template.spec
    expect(pod.terminationGracePeriodSeconds).toBe(33)
    expect(pod.containers).toMatchObject([{ lifecycle: { preStop: { sleep: { seconds: 3 } } } }])

    const load = steadyLoad(first.url, { ratePerS: 20, stream: true })
    await new Promise((r) => setTimeout(r, 2_000))
    let generation = first.generation
    const step = async (phase: string, replicas: number, delayMs: number) => {
      load.mark(phase)
      await apply(spec(replicas, delayMs))
      const after = await until(
        `the swarm to settle after ${phase}`,
        async () => {
          const s = await running("eks-roll", replicas)
          return s.generation > generation && s
        },
        90_000,
      )
      generation = after.generation
      expect(after.url).toBe(first.url)
    }
    await step("update 1", 2, 21)
    await step("update 2", 2, 20)
    await step("scale 2 → 4", 4, 20)
    await step("scale 4 → 2", 2, 20)
    load.mark("after")
    await new Promise((r) => setTimeout(r, 4_000))
    const { phases, failures } = await load.stop()
    console.log(
      `steady load on EKS (the fake cluster's Service), 20 req/s of streamed chat completions, 20 ms service time\n${phaseTable(phases)}`,
    )
    expect(failures).toEqual([])
    expect(phases.every((ph) => ph.requests > 0)).toBe(true)
    // Every step was a PATCH of the one Deployment.
    expect(count(e.fake, "POST", deploymentsPath)).toBe(posts + 1)
    expect(count(e.fake, "PATCH", `${deploymentsPath}/${name}`)).toBe(4)
    expect((await e.p.call("DELETE", "/v1/swarms/eks-roll")).status).toBe(202)
  })

  test("a replica whose image cannot be pulled keeps the swarm PENDING with Kubernetes' reason; DELETE still removes both objects", {
    timeout: 120_000,
  }, async () => {
    e.fake.failImagePull("registry.example/missing:1")
    await apply({ name: "eks-bad-image", model: "echo", image: "registry.example/missing:1", replicas: 1 })
    const waiting = await until(
      "the swarm to say why it does not start",
      async () => {
        const s = (await e.p.call("GET", "/v1/swarms/eks-bad-image")).json
        return /ImagePullBackOff|ErrImagePull/.test(s.message ?? "") && s
      },
      60_000,
    )
    expect(waiting.phase).toBe("PENDING")
    expect(waiting.message).toContain("0/1 replicas ready")
    expect(waiting.url).toBeUndefined()
    const name: string = waiting.handle.meta.deployment
    expect((await e.p.call("DELETE", "/v1/swarms/eks-bad-image")).status).toBe(202)
    await until(
      "the swarm to be STOPPED",
      async () => (await e.p.call("GET", "/v1/swarms/eks-bad-image")).json.phase === "STOPPED",
      60_000,
    )
    expect(e.fake.object(Types.deployments, ns, name)).toBeUndefined()
    expect(e.fake.object(Types.services, ns, name)).toBeUndefined()
  })
})
