/**
 * The `lepton` backend's node-group placement and status, end to end against the fake Lepton: the
 * backend's status shows its node group (nodes, GPUs summed over the group's nodes, the shapes offered
 * in it) beside the workspace; a config naming the group by name places jobs by the group's id; a
 * config naming a group the workspace does not have is the backend's error, listing the groups there
 * are, and its jobs wait rather than fail. Swarms are placed the same way: a swarm's deployment names
 * the group's id, and a swarm on a group the workspace lacks waits with that error, no deployment made.
 * A swarm scaled to 0 replicas is STOPPED (Lepton stops its deployment), and starts again when scaled up.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest"
import { type LeptonPlane, leptonPlane } from "./support/lepton-plane"
import { until } from "./support/plane"

let l: LeptonPlane

beforeAll(async () => {
  l = await leptonPlane({
    nodeGroups: [
      {
        id: "ng-fake0001",
        name: "fake-node-group",
        gpuProduct: "NVIDIA-H100-80GB-HBM3",
        desiredNodes: 3,
        readyNodes: 2,
        gpusPerNode: 8,
        shapes: ["cpu.small", "gpu.1xh100-80gb"],
      },
      { id: "ng-other", name: "other-pool", shapes: ["cpu.large"] },
    ],
  })
  await l.register("lep") // nodeGroup: "fake-node-group", by name
}, 60_000)

afterAll(async () => {
  await l?.stop()
})

describe("lepton node groups", () => {
  test("status shows the node group: id, name, GPU product, nodes ready of desired, GPUs over its nodes, its shapes", async () => {
    const res = await l.p.call("GET", "/v1/backends/lep/status")
    expect(res.status, JSON.stringify(res.json)).toBe(200)
    expect(res.json.status).toMatchObject({
      healthy: true,
      detail: {
        state: "normal",
        quota: expect.any(Object),
        nodeGroup: {
          id: "ng-fake0001",
          name: "fake-node-group",
          gpuProduct: "NVIDIA-H100-80GB-HBM3",
          nodes: { ready: 2, desired: 3 },
          gpus: { allocated: 0, total: 16 },
          shapes: ["cpu.small", "gpu.1xh100-80gb"],
        },
      },
    })
    // The other group's shapes are not offered in this one.
    expect(JSON.stringify(res.json.status.detail.nodeGroup)).not.toContain("cpu.large")
  })

  test("a config naming the group by name places jobs with its id; one naming an id places with that id", {
    timeout: 60_000,
  }, async () => {
    await l.register("lep-other", { nodeGroup: "ng-other" })
    const byName = await l.submit("lep", { command: ["true"] })
    const byId = await l.submit("lep-other", { command: ["true"] })
    expect((await l.finished(byName)).status).toBe("SUCCEEDED")
    expect((await l.finished(byId)).status).toBe("SUCCEEDED")
    const targetOf = async (id: string) => (await l.job(id)).tasks[0].attempts.at(-1).target as string
    const placed = (target: string) => l.fake.placements.find((p) => p.kind === "job" && p.id === target)
    expect(placed(await targetOf(byName))?.nodeGroups).toEqual(["ng-fake0001"])
    expect(placed(await targetOf(byId))?.nodeGroups).toEqual(["ng-other"])
  })

  test("a node group the workspace does not have is the backend's error listing the groups there are; its job waits", {
    timeout: 60_000,
  }, async () => {
    await l.register("lep-missing", { nodeGroup: "no-such-pool" })
    const posts = () => l.fake.requests.filter((r) => r.method === "POST" && r.path === "/jobs").length
    const postsBefore = posts()
    const stuck = await l.submit("lep-missing", { command: ["true"] })
    const backend = await until(
      "the missing node group to show on the backend",
      async () => {
        const b = (await l.p.call("GET", "/v1/backends/lep-missing")).json
        return b.status?.healthy === false && b
      },
      30_000,
    )
    expect(backend.status.message).toContain("no-such-pool")
    expect(backend.status.message).toContain("fake-node-group (ng-fake0001)")
    expect(backend.status.message).toContain("other-pool (ng-other)")
    const live = (await l.p.call("GET", "/v1/backends/lep-missing/status")).json
    expect(live.status).toMatchObject({ healthy: false })
    expect(live.status.message).toContain("other-pool (ng-other)")
    // The attempt is deferred with the reason, to be tried again; it is not failed.
    const waiting = await until(
      "the job to say why it waits",
      async () => {
        const j = await l.job(stuck)
        return j.tasks[0].pendingReason?.includes("no node group no-such-pool") && j
      },
      30_000,
    )
    expect(waiting.tasks[0].state).toBe("ASSIGNED")
    expect(waiting.tasks[0].attempts.at(-1).target).toBeUndefined()
    expect(waiting.tasks[0].pendingReason).toContain("fake-node-group (ng-fake0001)")
    expect(posts()).toBe(postsBefore)
  })
})

describe("swarms placed by node group", () => {
  const swarmOf = async (name: string) => (await l.p.call("GET", `/v1/swarms/${name}`)).json
  const deploymentPosts = () =>
    l.fake.requests.filter((r) => r.method === "POST" && r.path === "/deployments").length

  test("a swarm on a backend naming its group by name is RUNNING, its deployment placed on the group's id; scaled to 0 it is STOPPED, and scaled up it serves again", {
    timeout: 150_000,
  }, async () => {
    await l.applySwarm("lep", { name: "ng-echo", model: "echo", replicas: 1 })
    const running = await l.running("ng-echo")
    const deployment: string = running.handle.meta.deployment
    expect(l.fake.placements.filter((p) => p.kind === "deployment" && p.id === deployment)).toEqual([
      { kind: "deployment", id: deployment, nodeGroups: ["ng-fake0001"] },
    ])
    const onLepton = (await l.lepton("GET", `/deployments/${deployment}`)).body
    expect(onLepton.spec.resource_requirement.affinity).toEqual({
      allowed_dedicated_node_groups: ["ng-fake0001"],
    })

    const spec = { name: "ng-echo", model: "echo" }
    await l.applySwarm("lep", { ...spec, replicas: 0 })
    const stopped = await until(
      "the swarm scaled to 0 to be STOPPED",
      async () => {
        const s = await swarmOf("ng-echo")
        return s.phase === "STOPPED" && s
      },
      60_000,
    )
    expect(stopped.desired).toBe("running")
    expect(stopped.message).toContain("0 replicas")
    expect(stopped.url).toBeUndefined()
    // The plane counts a deployment asked for 0 replicas as stopped while Lepton still says Stopping.
    await until(
      "Lepton to finish stopping the deployment",
      async () => (await l.lepton("GET", `/deployments/${deployment}`)).body.status.state === "Stopped",
      30_000,
    )

    await l.applySwarm("lep", { ...spec, replicas: 1 })
    const again = await l.running("ng-echo")
    expect(again.url).toBe(running.url)
    // One deployment throughout: scaling is a PATCH of the same one.
    expect(
      (await l.lepton("GET", "/deployments")).body.map((d: { metadata: { id: string } }) => d.metadata.id),
    ).toEqual([deployment])
    expect((await l.p.call("DELETE", "/v1/swarms/ng-echo")).status).toBe(202)
    await until(
      "the swarm to be deleted",
      async () => (await l.lepton("GET", `/deployments/${deployment}`)).status === 404,
      30_000,
    )
  })

  test("a swarm on a node group the workspace does not have waits with the backend's error listing the groups, and no deployment is made", {
    timeout: 60_000,
  }, async () => {
    await l.register("lep-nowhere", { nodeGroup: "no-such-swarm-pool" })
    const postsBefore = deploymentPosts()
    await l.applySwarm("lep-nowhere", { name: "ng-nowhere", model: "echo", replicas: 1 })
    const waiting = await until(
      "the swarm to say why it waits",
      async () => {
        const s = await swarmOf("ng-nowhere")
        return s.message?.includes("no node group no-such-swarm-pool") && s
      },
      30_000,
    )
    expect(waiting.phase).toBe("UNKNOWN")
    expect(waiting.message).toContain("fake-node-group (ng-fake0001)")
    expect(waiting.message).toContain("other-pool (ng-other)")
    expect(waiting.handle).toBeUndefined()
    const backend = await until(
      "the missing node group to show on the backend",
      async () => {
        const b = (await l.p.call("GET", "/v1/backends/lep-nowhere")).json
        return b.status?.healthy === false && b
      },
      30_000,
    )
    expect(backend.status.message).toContain("no node group no-such-swarm-pool")
    expect(deploymentPosts()).toBe(postsBefore)
    expect((await l.lepton("GET", "/deployments")).body).toEqual([])
    expect((await l.p.call("DELETE", "/v1/swarms/ng-nowhere")).status).toBe(202)
  })
})
