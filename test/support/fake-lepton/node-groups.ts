/**
 * The fake Lepton's dedicated node groups and resource shapes (Part A.7): the groups a workspace can
 * place work on, their nodes (GPUs allocated out of total) and the shapes each offers. Placement names a
 * group by its id in `allowed_dedicated_node_groups` of an affinity (a job's `spec.affinity`, a
 * deployment's `spec.resource_requirement.affinity`); an id the fake does not know is refused as the
 * real service would, so a client that sends a group's name instead of its id is caught.
 */
import { invalid, isObject, type Json, type JsonObject, metadata, notFound, type Workspace } from "./state"

/** A node group as a test describes it. */
export interface FakeNodeGroup {
  id: string
  name: string
  /** Default `NVIDIA-FAKE-GPU`. */
  gpuProduct?: string
  /** Nodes the group wants (default 1) and those ready (default: all of them). */
  desiredNodes?: number
  readyNodes?: number
  /** GPUs of each node (default 8). */
  gpusPerNode?: number
  /** Shape names offered in the group (default `["cpu.small"]`). */
  shapes?: string[]
}

export const DefaultNodeGroup: FakeNodeGroup = { id: "ng-fake0001", name: "fake-node-group" }

/** One placement a job or deployment asked for: which node group ids its affinity named. */
export interface Placement {
  kind: "job" | "deployment"
  id: string
  nodeGroups: string[] | undefined
}

export class NodeGroups {
  readonly placements: Placement[] = []

  constructor(
    private readonly ws: Workspace,
    readonly groups: FakeNodeGroup[],
  ) {}

  list(): JsonObject[] {
    return this.groups.map((g) => this.view(g))
  }

  get(id: string): JsonObject {
    return this.view(this.find(id))
  }

  /**
   * The group's nodes. The work the fake runs counts as GPUs allocated on the first group's nodes, one
   * per running process, filling node by node (the fake has no real GPUs to place on).
   */
  nodes(id: string): JsonObject[] {
    const g = this.find(id)
    const perNode = g.gpusPerNode ?? 8
    let busy = g === this.groups[0] ? this.ws.used() : 0
    return Array.from({ length: g.readyNodes ?? g.desiredNodes ?? 1 }, (_, i) => {
      const allocated = Math.min(perNode, busy)
      busy -= allocated
      return {
        metadata: { id: `${g.id}-node-${i}` },
        spec: {
          dedicated_node_group: g.id,
          resource: {
            gpu: { product: g.gpuProduct ?? "NVIDIA-FAKE-GPU", allocated, total: perNode },
            cpu: { allocated, total: 128 },
            memory: { allocated: allocated * 1024, total: 1_000_000 },
          },
          unschedulable: false,
        },
        status: { status: ["Ready"], workloads: [] },
      }
    })
  }

  /** Every group's shapes, or one group's (`node_groups=<id>`). */
  shapes(nodeGroupId?: string): JsonObject[] {
    const groups = nodeGroupId === undefined ? this.groups : this.groups.filter((g) => g.id === nodeGroupId)
    return groups.flatMap((g) =>
      (g.shapes ?? ["cpu.small"]).map((name) => ({
        metadata: metadata(`${g.id}-${name}`, name, this.ws.now()),
        spec: {
          name,
          description: `${name} in ${g.name}`,
          listable_in: ["deployment", "pod", "job"],
          cpu: 1,
          memory_in_mb: 1024,
          ephemeral_storage_in_gb: 10,
          is_adaptive: false,
          accelerator_type: name.startsWith("gpu.") ? (g.gpuProduct ?? "NVIDIA-FAKE-GPU") : "",
          accelerator_num: 0,
          accelerator_fraction: 0,
          accelerator_memory_in_mb: 0,
          accelerator_pass_all: false,
          node_group_id: g.id,
        },
      })),
    )
  }

  /**
   * Record a job's or deployment's affinity, refusing (Lepton's 400) any `allowed_dedicated_node_groups`
   * entry that is not a known group id. `check: false` records without checking, for a test that wants
   * to see what a client sent whatever it is.
   */
  place(kind: Placement["kind"], id: string, affinity: Json | undefined, check = true): void {
    const named = isObject(affinity) ? affinity.allowed_dedicated_node_groups : undefined
    const field = `${kind === "deployment" ? "resource_requirement." : ""}affinity.allowed_dedicated_node_groups`
    if (check && named !== undefined && named !== null) {
      if (!Array.isArray(named) || !named.every((n) => typeof n === "string"))
        throw invalid(`${field}: an array of node group ids`)
      for (const n of named)
        if (!this.groups.some((g) => g.id === n)) throw invalid(`${field}: node group ${n} not found`)
    }
    this.placements.push({ kind, id, nodeGroups: Array.isArray(named) ? (named as string[]) : undefined })
  }

  private find(id: string): FakeNodeGroup {
    const g = this.groups.find((x) => x.id === id)
    if (!g) throw notFound(`dedicated node group ${id}`)
    return g
  }

  private view(g: FakeNodeGroup): JsonObject {
    const desired = g.desiredNodes ?? 1
    return {
      metadata: metadata(g.id, g.name, this.ws.now()),
      spec: {
        workspaces: [this.ws.id],
        gpu_product: g.gpuProduct ?? "NVIDIA-FAKE-GPU",
        desired_nodes: desired,
      },
      status: { ready_nodes: g.readyNodes ?? desired, quota_enabled: true },
    }
  }
}
