/**
 * A swarm's deployment: placed on the backend's node group by the group's id (none made when the
 * group cannot be resolved), updated by the merge patch of only what changed, and a swarm scaled to 0
 * read as stopped.
 */
import { describe, expect, test } from "vitest"
import { LeptonBackendConfig } from "../../model/backend"
import { type Swarm, SwarmSpec } from "../../model/swarm"
import { LeptonApiError, type LeptonClient } from "./client"
import { LeptonServing, mergePatchOf } from "./serving"
import { deploymentBody, type LeptonConfig } from "./spec"
import { LeptonDeployment, type LeptonDeploymentBody } from "./types"

describe("mergePatchOf", () => {
  const current = {
    container: { image: "echo:1", command: ["serve"], ports: [{ container_port: 8000 }] },
    resource_requirement: { resource_shape: "cpu.small", min_replicas: 1, max_replicas: 1, replicas: 1 },
    envs: [{ name: "MODEL", value: "echo" }],
    // A field Lepton filled in that swarmplane never sets.
    health: { liveness: { initial_delay_seconds: 600 } },
  }

  test("a new replica count patches only the range", () => {
    const wanted = {
      container: { image: "echo:1", command: ["serve"], ports: [{ container_port: 8000 }] },
      resource_requirement: { resource_shape: "cpu.small", min_replicas: 3, max_replicas: 3 },
      envs: [{ name: "MODEL", value: "echo" }],
    }
    expect(mergePatchOf(current, wanted)).toEqual({
      resource_requirement: { min_replicas: 3, max_replicas: 3 },
    })
  })

  test("nothing changed: no patch", () => {
    const { health: _, ...same } = current
    expect(mergePatchOf(current, same)).toBeUndefined()
  })

  test("a list that changed is sent whole (a merge patch replaces lists)", () => {
    const wanted = {
      envs: [
        { name: "MODEL", value: "echo" },
        { name: "X", value: "1" },
      ],
    }
    expect(mergePatchOf(current, wanted)).toEqual(wanted)
  })

  test("a field Lepton lacks is sent", () => {
    expect(mergePatchOf(current, { api_tokens: [] })).toEqual({ api_tokens: [] })
  })
})

const config = LeptonBackendConfig.parse({
  type: "lepton",
  workspaceId: "ws123",
  tokenSecret: "lepton/token",
  nodeGroup: "h100-pool",
  resourceShape: "cpu.small",
}) as LeptonConfig

function swarm(fields: Record<string, unknown> = {}): Swarm {
  return {
    ...SwarmSpec.parse({ name: "llm", model: "echo", replicas: 1, ...fields }),
    project: "team-a",
    phase: "PENDING",
    desired: "running",
    generation: 1,
    observedGeneration: 0,
    replicaStatus: { ready: 0, total: 1, items: [] },
    createdAt: "2026-01-01T00:00:00.000Z",
    updatedAt: "2026-01-01T00:00:00.000Z",
  }
}

/** A deployment as Lepton lists it: the body it was made from, in `state`. */
const asDeployment = (body: LeptonDeploymentBody, state: string) =>
  LeptonDeployment.parse({ ...body, status: { state } })

/** A workspace's deployments in memory, recording each call the serving code makes. */
function workspace(existing: LeptonDeployment[] = []) {
  const calls: string[] = []
  const items = new Map(existing.map((d) => [d.metadata.name ?? d.metadata.id, d]))
  /** The bodies of the deployments created, as sent. */
  const created: LeptonDeploymentBody[] = []
  const deployments: Partial<LeptonClient["deployments"]> = {
    async get(name) {
      calls.push(`get ${name}`)
      return items.get(name)
    },
    async create(body: LeptonDeploymentBody) {
      calls.push(`create ${body.metadata.name}`)
      created.push(body)
      const made = asDeployment(body, "Starting")
      items.set(body.metadata.name, made)
      return made
    },
    async patch(name, patch) {
      calls.push(`patch ${name} ${JSON.stringify(patch)}`)
      return items.get(name)
    },
    async readiness() {
      return {}
    },
  }
  const client = { deployments } as LeptonClient
  return { calls, items, created, call: <T>(use: (c: LeptonClient) => Promise<T>) => use(client) }
}

const serving = (ws: ReturnType<typeof workspace>, nodeGroupId: () => Promise<string>) =>
  LeptonServing({
    project: "team-a",
    config,
    call: ws.call,
    nodeGroupId,
    endpointToken: async () => undefined,
  })

describe("LeptonServing", () => {
  test("a new deployment is placed on the node group by its resolved id, in resource_requirement.affinity", async () => {
    const ws = workspace()
    const handle = await serving(ws, async () => "ng-h100").createOrUpdate(swarm())
    expect(ws.created.map((b) => b.metadata.name)).toEqual([handle.id])
    const spec = ws.created[0]!.spec
    expect(spec.resource_requirement?.affinity).toEqual({ allowed_dedicated_node_groups: ["ng-h100"] })
    // The job field's place (`spec.affinity`) is not where a deployment says it.
    expect("affinity" in spec).toBe(false)
    expect(ws.calls).toEqual([`get ${handle.id}`, `create ${handle.id}`])
  })

  test("a node group that cannot be resolved makes no call on deployments, and the swarm gets the error", async () => {
    const ws = workspace()
    const missing = new LeptonApiError(
      "Lepton workspace ws123 has no node group h100-pool; its node groups: cpu-pool (ng-cpu)",
      true,
      "GET",
      "/dedicated-node-groups",
    )
    await expect(serving(ws, () => Promise.reject(missing)).createOrUpdate(swarm())).rejects.toThrow(
      /no node group h100-pool; its node groups: cpu-pool \(ng-cpu\)/,
    )
    expect(ws.calls).toEqual([])
    expect(ws.items.size).toBe(0)
  })

  test("a deployment placed by the group's name before is moved to its id with one PATCH of the affinity", async () => {
    const s = swarm()
    const byName = deploymentBody({ project: "team-a", swarm: s, config })
    expect(byName.spec.resource_requirement?.affinity).toEqual({
      allowed_dedicated_node_groups: ["h100-pool"],
    })
    const ws = workspace([asDeployment(byName, "Ready")])
    await serving(ws, async () => "ng-h100").createOrUpdate(s)
    expect(ws.calls).toEqual([
      `get ${byName.metadata.name}`,
      `patch ${byName.metadata.name} ${JSON.stringify({
        spec: { resource_requirement: { affinity: { allowed_dedicated_node_groups: ["ng-h100"] } } },
      })}`,
    ])
  })

  test("a swarm scaled to 0 whose deployment Lepton has stopped is STOPPED, not FAILED", async () => {
    const s = {
      ...swarm({ replicas: 0 }),
      handle: { id: "d", url: "", meta: { generation: 1, deployment: "d" } },
    }
    const stopped = LeptonDeployment.parse({ metadata: { id: "d", name: "d" }, status: { state: "Stopped" } })
    const status = await serving(workspace(), async () => "ng-h100").status(s, stopped)
    expect(status).toMatchObject({ phase: "STOPPED", replicas: { ready: 0, total: 0 } })
    const one = { ...swarm({ replicas: 1 }), handle: s.handle }
    expect(await serving(workspace(), async () => "ng-h100").status(one, stopped)).toMatchObject({
      phase: "FAILED",
    })
  })
})
