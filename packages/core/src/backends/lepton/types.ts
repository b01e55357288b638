/**
 * The Lepton v2 API's objects as swarmplane sends and reads them (backend-contracts.md Part A.4-A.6).
 * Request bodies are plain types; responses are parsed with loose zod schemas that keep unknown fields
 * and accept any state name (a new Lepton state must reach the state mapping as its raw name, not fail
 * the parse), so one odd field in a response never hides the rest of it.
 */
import { z } from "zod"

/** Deployment states of the contract; `""` is Lepton's own unknown state. */
export const LeptonDeploymentStates = [
  "Ready",
  "Not Ready",
  "Starting",
  "Updating",
  "Scaling",
  "Migrating",
  "Stopping",
  "Stopped",
  "Deleting",
  "Restarting",
  "Error",
] as const
export type LeptonDeploymentState = (typeof LeptonDeploymentStates)[number]

/** Job states of the contract. */
export const LeptonJobStates = [
  "Starting",
  "Running",
  "Failed",
  "Completed",
  "Stopped",
  "Stopping",
  "Deleting",
  "Deleted",
  "Restarting",
  "Archived",
  "Queueing",
  "Awaiting",
  "PendingRetry",
  "Terminating",
] as const
export type LeptonJobState = (typeof LeptonJobStates)[number]

/** Readiness reasons of a replica (`ReplicaReadinessReason`). */
export const LeptonReadinessReasons = [
  "Ready",
  "InProgress",
  "Deleting",
  "Deleted",
  "NoCapacity",
  "ConfigError",
  "SystemError",
  "RequireReadinessApproval",
  "Queueing",
  "Unknown",
] as const

/** A number Lepton may send as null: read as absent. */
const count = z.number().nullish()
const text = z.string().nullish()

export const Metadata = z.looseObject({
  id: z.string(),
  name: text,
  created_at: count,
  version: count,
  labels: z.record(z.string(), z.string()).nullish(),
})
export type Metadata = z.infer<typeof Metadata>

/** A plain value or a reference to a workspace secret: never both. */
export type EnvVar =
  | { name: string; value: string }
  | { name: string; value_from: { secret_name_ref: string } }

export interface Mount {
  path: string
  from: string
  mount_path: string
  mount_options?: { read_only?: boolean; local_cache_size_mib?: number }
}

export interface LeptonContainer {
  image?: string
  command?: string[]
  ports?: {
    name?: string
    container_port: number
    protocol?: "TCP" | "UDP" | "SCTP"
    expose_strategies?: string[]
  }[]
}

export interface ResourceAffinity {
  allowed_dedicated_node_groups?: string[]
  allowed_nodes_in_node_group?: string[] | null
}

export interface QueueConfig {
  priority_class: string
  can_be_preempted?: boolean
  can_preempt?: boolean
}

/** An endpoint token: always a reference to a workspace secret when swarmplane sends it. */
export type ApiToken = { value: string } | { value_from: { token_name_ref: string } }

/** The deployment spec fields swarmplane sets. */
export interface LeptonDeploymentSpec {
  container: LeptonContainer
  resource_requirement: {
    resource_shape?: string
    min_replicas: number
    max_replicas: number
    affinity?: ResourceAffinity
  }
  auto_scaler?: {
    scale_down?: { no_traffic_timeout?: number; not_ready_timeout?: number | null }
    target_gpu_utilization_percentage?: number
    target_throughput?: { qpm?: number }
  }
  api_tokens?: ApiToken[]
  envs: EnvVar[]
  mounts: Mount[]
  image_pull_secrets: string[]
  health?: Record<string, unknown>
  queue_config?: QueueConfig
}

/** What `POST /deployments` takes. */
export interface LeptonDeploymentBody {
  metadata: { id: string; name: string; labels?: Record<string, string> }
  spec: LeptonDeploymentSpec
}

/** The job spec fields swarmplane sets. */
export interface LeptonJobSpec {
  resource_shape: string
  affinity?: ResourceAffinity
  container: LeptonContainer
  completions: number
  parallelism: number
  envs: EnvVar[]
  mounts: Mount[]
  image_pull_secrets: string[]
  queue_config?: QueueConfig
  intra_job_communication?: boolean
  max_failure_retry?: number | null
  max_job_failure_retry?: number | null
  ttl_seconds_after_finished?: number
  stopped?: boolean | null
}

/** What `POST /jobs` takes. */
export interface LeptonJobBody {
  metadata: { id: string; name: string; labels?: Record<string, string> }
  spec: LeptonJobSpec
}

export const DeploymentStatus = z.looseObject({
  /** Any text: unknown names are mapped to UNKNOWN, not refused. */
  state: z.string().nullish(),
  endpoint: z.looseObject({ internal_endpoint: text, external_endpoint: text }).nullish(),
  autoscaler_status: z
    .looseObject({
      desired_replicas: count,
      conditions: z.array(z.looseObject({ type: text, status: text, message: text })).nullish(),
    })
    .nullish(),
})

export const LeptonDeployment = z.looseObject({
  metadata: Metadata,
  spec: z.looseObject({}).nullish(),
  status: DeploymentStatus.nullish(),
})
export type LeptonDeployment = z.infer<typeof LeptonDeployment>

/** One readiness entry of a replica; the first entry of each is the current one. */
export const ReadinessEntry = z.looseObject({
  reason: z.string().nullish(),
  message: text,
  creationTimestamp: z.union([z.string(), z.number()]).nullish(),
})
/** `GET /deployments/{name}/readiness`: replica id → its readiness entries. */
export const Readiness = z.record(z.string(), z.array(ReadinessEntry).nullable())
export type Readiness = z.infer<typeof Readiness>

export const Replica = z.looseObject({
  id: z.string(),
  metadata: Metadata.partial().nullish(),
  status: z
    .looseObject({ public_ip: text, node: z.looseObject({ name: text, id: text }).nullish() })
    .nullish(),
})
export type Replica = z.infer<typeof Replica>

const JobStatusCore = {
  job_name: text,
  state: z.string().nullish(),
  ready: count,
  active: count,
  failed: count,
  succeeded: count,
  creation_time: count,
  completion_time: count,
  /** Not in the contract's example, but read when present: the words of a failure. */
  reason: text,
  message: text,
}
export const JobHistoryEntry = z.looseObject(JobStatusCore)
export type JobHistoryEntry = z.infer<typeof JobHistoryEntry>

export const JobStatus = z.looseObject({
  ...JobStatusCore,
  job_history: z.array(JobHistoryEntry).nullish(),
})
export type JobStatus = z.infer<typeof JobStatus>

export const LeptonJob = z.looseObject({
  metadata: Metadata,
  spec: z.looseObject({ stopped: z.boolean().nullish() }).nullish(),
  status: JobStatus.nullish(),
})
export type LeptonJob = z.infer<typeof LeptonJob>

/** `GET /jobs` answers `{"jobs": [...]}` or, per the SDK's reading, a bare array. */
export const JobPage = z.union([z.array(LeptonJob), z.looseObject({ jobs: z.array(LeptonJob).nullish() })])

/** Lepton's error body. */
export const ErrorBody = z.looseObject({ code: z.string().nullish(), message: z.string().nullish() })

export const WorkspaceInfo = z.looseObject({
  workspace_name: text,
  workspace_tier: text,
  /** `normal | paused | all-pods-terminated | terminated`; anything else is read as it is. */
  workspace_state: text,
  supported_shapes: z
    .record(
      z.string(),
      z.looseObject({
        description: text,
        cpu: count,
        memory: count,
        accelerator_type: text,
        accelerator_num: count,
      }),
    )
    .nullish(),
  resource_quota: z
    .looseObject({
      limit: z.record(z.string(), z.number()).nullish(),
      used: z.record(z.string(), z.number()).nullish(),
    })
    .nullish(),
})
export type WorkspaceInfo = z.infer<typeof WorkspaceInfo>

/** `GET /dedicated-node-groups` item (Part A.7): the group's id is what placement names. */
export const DedicatedNodeGroup = z.looseObject({
  metadata: z.looseObject({ id: z.string(), name: text }),
  spec: z.looseObject({ gpu_product: text, desired_nodes: count }).nullish(),
  status: z.looseObject({ ready_nodes: count, quota_enabled: z.boolean().nullish() }).nullish(),
})
export type DedicatedNodeGroup = z.infer<typeof DedicatedNodeGroup>

/** One resource of a node: what is allocated of what there is. */
const NodeResource = z.looseObject({ product: text, allocated: count, total: count }).nullish()

/** `GET /dedicated-node-groups/{id}/nodes` item. */
export const NodeGroupNode = z.looseObject({
  metadata: z.looseObject({ id: z.string() }),
  spec: z
    .looseObject({
      dedicated_node_group: text,
      resource: z.looseObject({ gpu: NodeResource, cpu: NodeResource, memory: NodeResource }).nullish(),
      unschedulable: z.boolean().nullish(),
    })
    .nullish(),
  status: z.looseObject({ status: z.array(z.string()).nullish() }).nullish(),
})
export type NodeGroupNode = z.infer<typeof NodeGroupNode>

/** `GET /shapes` item. */
export const Shape = z.looseObject({
  spec: z.looseObject({
    name: z.string(),
    description: text,
    cpu: count,
    memory_in_mb: count,
    accelerator_type: text,
    accelerator_num: count,
    node_group_id: text,
  }),
})
export type Shape = z.infer<typeof Shape>
