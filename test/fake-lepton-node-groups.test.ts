/**
 * The fake Lepton checks a deployment's placement as it checks a job's: a deployment whose
 * `resource_requirement.affinity` names a node group id the workspace has is made and its placement
 * recorded; one naming an id it does not have (a group's name, say) is refused with Lepton's 400
 * `InvalidRequest` and not made, on create and on a PATCH that moves it. Built from the fake's parts,
 * wired as `startFakeLepton` wires them, with 0 replicas so no process starts.
 */
import { afterEach, describe, expect, test } from "vitest"
import { Deployments } from "./support/fake-lepton/deployments"
import { NodeGroups } from "./support/fake-lepton/node-groups"
import { LeptonError, Workspace } from "./support/fake-lepton/state"
import { processRunner } from "./support/local-processes"

const runner = processRunner()
afterEach(async () => {
  await runner.stopAll()
})

function workspace() {
  const ws = new Workspace("ws-fake", runner, Date.now, new Map())
  const groups = new NodeGroups(ws, [
    { id: "ng-h100", name: "h100-pool" },
    { id: "ng-cpu", name: "cpu-pool" },
  ])
  const deployments = new Deployments(ws, {
    restartReplicas: true,
    place: (id, affinity) => groups.place("deployment", id, affinity),
  })
  return { groups, deployments }
}

const body = (name: string, nodeGroups: string[]) => ({
  metadata: { id: name, name },
  spec: {
    container: { image: "echo", command: ["serve"] },
    resource_requirement: {
      resource_shape: "cpu.small",
      min_replicas: 0,
      max_replicas: 0,
      affinity: { allowed_dedicated_node_groups: nodeGroups },
    },
  },
})

/** What the fake answered: the object, or Lepton's error. */
function attempt(act: () => unknown) {
  try {
    return { ok: act() }
  } catch (error) {
    if (error instanceof LeptonError)
      return { status: error.status, code: error.code, message: error.message }
    throw error
  }
}

describe("the fake Lepton's deployment placement", () => {
  test("a deployment on a known group id is made and its placement recorded", () => {
    const { groups, deployments } = workspace()
    expect(attempt(() => deployments.create(body("on-h100", ["ng-h100"])))).toHaveProperty("ok")
    expect(groups.placements).toEqual([{ kind: "deployment", id: "on-h100", nodeGroups: ["ng-h100"] }])
  })

  test("a deployment naming a group by its name, or an unknown id, is refused with a 400 and not made", () => {
    const { groups, deployments } = workspace()
    for (const wanted of ["h100-pool", "ng-gone"]) {
      const refused = attempt(() => deployments.create(body(`by-${wanted}`, [wanted])))
      expect(refused).toMatchObject({ status: 400, code: "InvalidRequest" })
      expect(refused.message).toContain(
        `resource_requirement.affinity.allowed_dedicated_node_groups: node group ${wanted} not found`,
      )
    }
    expect(deployments.list()).toEqual([])
    expect(groups.placements).toEqual([])
  })

  test("a PATCH moving a deployment to another group is checked and recorded; one to an unknown group is refused", () => {
    const { groups, deployments } = workspace()
    deployments.create(body("moving", ["ng-h100"]))
    const affinity = (ids: string[]) => ({
      spec: { resource_requirement: { affinity: { allowed_dedicated_node_groups: ids } } },
    })
    expect(attempt(() => deployments.patch("moving", affinity(["ng-cpu"]), false))).toHaveProperty("ok")
    expect(attempt(() => deployments.patch("moving", affinity(["cpu-pool"]), false))).toMatchObject({
      status: 400,
      code: "InvalidRequest",
    })
    const kept = deployments.get("moving") as { spec: { resource_requirement: { affinity: unknown } } }
    expect(kept.spec.resource_requirement.affinity).toEqual({ allowed_dedicated_node_groups: ["ng-cpu"] })
    // A scale that leaves the affinity alone is not a new placement.
    deployments.patch(
      "moving",
      { spec: { resource_requirement: { min_replicas: 0, max_replicas: 1 } } },
      false,
    )
    expect(groups.placements.map((p) => p.nodeGroups)).toEqual([["ng-h100"], ["ng-cpu"]])
  })
})
