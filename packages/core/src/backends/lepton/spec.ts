/**
 * The bodies swarmplane sends Lepton (backend-contracts.md Part A.5, A.6), built from its own models.
 * Pure: a swarm and the backend's config give a deployment; a task attempt gives a job.
 *
 * Names are deterministic and Lepton-safe (lowercase, DNS-like, at most `MaxNameLength`): the same swarm
 * (the same incarnation of it) always names the same deployment, and the same attempt the same job, so
 * a pass that crashed after creating one finds it again by name instead of creating a second.
 *
 * No secret value is ever in a body: environment secrets are `secret_name_ref`s to workspace secrets,
 * and a swarm's endpoint token is a `token_name_ref`.
 */
import { createHash } from "node:crypto"
import type { BackendConfigOf } from "../../model/backend"
import type { Job } from "../../model/job"
import type { Swarm } from "../../model/swarm"
import { ProgressStdoutVariable } from "../progress-log"
import type {
  EnvVar,
  LeptonDeploymentBody,
  LeptonJobBody,
  Mount,
  QueueConfig,
  ResourceAffinity,
} from "./types"

export type LeptonConfig = BackendConfigOf<"lepton">

/**
 * Lepton's limit on names is not documented; deployment names end up in endpoint host names
 * (`<workspace>-<name>.xenon.lepton.run`), so they are kept well inside a DNS label.
 */
export const MaxNameLength = 36
/** The CLI's default job image (the contract's `JOB_BASE_IMAGE`). */
export const DefaultJobImage = "nvcr.io/nvidia/pytorch:25.08-py3"
/** The server of a swarm that names no image: vLLM's OpenAI-compatible one. */
export const DefaultServingImage = "vllm/vllm-openai:latest"
/** How long a finished job stays listed before Lepton archives it: long enough to be seen by a late pass. */
export const JobTtlSeconds = 3600

const hash = (text: string, length: number) =>
  createHash("sha256").update(text).digest("hex").slice(0, length)

/** `text` as lowercase letters, digits and single dashes, with no dash at either end. */
function dnsSafe(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
}

/**
 * `sp-<readable part>-<hash of key>`, cut to `MaxNameLength`. The hash is of the whole key, so two keys
 * whose readable parts agree (or are cut alike) still name two objects.
 */
export function leptonName(readable: string, key: string): string {
  const tag = hash(key, 8)
  const room = MaxNameLength - "sp-".length - tag.length - 1
  const middle = dnsSafe(readable).slice(0, room).replace(/-+$/, "")
  return middle ? `sp-${middle}-${tag}` : `sp-${tag}`
}

/** The deployment of a swarm: one per swarm incarnation (a swarm deleted and made again gets a new one). */
export const deploymentName = (project: string, swarm: Pick<Swarm, "name" | "createdAt">) =>
  leptonName(swarm.name, `${project}/${swarm.name}/${swarm.createdAt}`)

/** The job of a task attempt. */
export const jobName = (attemptUid: string) => leptonName(attemptUid, attemptUid)

function mountsOf(config: LeptonConfig): Mount[] {
  return config.mounts.map((m) => ({
    path: m.path,
    from: m.from,
    mount_path: m.mountPath,
    mount_options: { read_only: m.readOnly },
  }))
}

/**
 * The backend's plain values, then the job's or swarm's (which win), then workspace secret references
 * (which win on a clash), then swarmplane's own.
 */
function envsOf(plain: Record<string, string>, config: LeptonConfig, own: Record<string, string>): EnvVar[] {
  const byName = new Map<string, EnvVar>()
  for (const [name, value] of Object.entries({ ...config.env, ...plain })) byName.set(name, { name, value })
  for (const [name, secret] of Object.entries(config.envSecrets ?? {}))
    byName.set(name, { name, value_from: { secret_name_ref: secret } })
  for (const [name, value] of Object.entries(own)) byName.set(name, { name, value })
  return [...byName.values()]
}

function queueOf(config: LeptonConfig): QueueConfig {
  return {
    priority_class: config.priorityClass,
    can_be_preempted: config.canBePreempted,
    can_preempt: config.canPreempt,
  }
}

/** Placement in the backend's node group, by id (`nodeGroupId` once resolved from a name). */
const affinityOf = (config: LeptonConfig, nodeGroupId?: string): ResourceAffinity => ({
  allowed_dedicated_node_groups: [nodeGroupId ?? config.nodeGroup],
})

/** The replica's server: the swarm's own command, the built-in echo server, or vLLM. */
export function servingCommand(swarm: Pick<Swarm, "command" | "args" | "model">): string[] {
  if (swarm.command) return [...swarm.command, ...swarm.args]
  if (swarm.model === "echo") return ["swarmplane-agent", "echo-server", ...swarm.args]
  return ["sh", "-c", 'exec vllm serve "$MODEL" --host 0.0.0.0 --port "$PORT" "$@"', "vllm", ...swarm.args]
}

export interface DeploymentInput {
  project: string
  swarm: Swarm
  config: LeptonConfig
  /** The node group's id, when `config.nodeGroup` is a name that was resolved. */
  nodeGroupId?: string
}

/**
 * The deployment for a swarm: fixed replicas (`min = max = replicas`) or the swarm's autoscaling range;
 * its endpoint behind a workspace token reference when the backend has `endpointTokenSecret`, public
 * (`api_tokens: []`) otherwise. The whole spec doubles as the JSON merge patch of an update: its lists
 * replace Lepton's, and a field swarmplane does not set is left as Lepton has it.
 */
export function deploymentBody({
  project,
  swarm,
  config,
  nodeGroupId,
}: DeploymentInput): LeptonDeploymentBody {
  const name = deploymentName(project, swarm)
  const range = swarm.autoscaling
    ? { min_replicas: swarm.autoscaling.minReplicas, max_replicas: swarm.autoscaling.maxReplicas }
    : { min_replicas: swarm.replicas, max_replicas: swarm.replicas }
  return {
    metadata: { id: name, name, labels: { "swarmplane-project": project, "swarmplane-swarm": swarm.name } },
    spec: {
      container: {
        image: swarm.image ?? DefaultServingImage,
        command: servingCommand(swarm),
        ports: [
          { name: "http", container_port: swarm.port, protocol: "TCP", expose_strategies: ["IngressProxy"] },
        ],
      },
      resource_requirement: {
        resource_shape: swarm.serving.lepton?.resourceShape ?? config.resourceShape,
        ...range,
        affinity: affinityOf(config, nodeGroupId),
      },
      ...(swarm.autoscaling
        ? { auto_scaler: { scale_down: { no_traffic_timeout: swarm.autoscaling.scaleDownDelayS } } }
        : {}),
      api_tokens: config.endpointTokenSecret
        ? [{ value_from: { token_name_ref: config.endpointTokenSecret } }]
        : [],
      envs: envsOf(swarm.env, config, { MODEL: swarm.model, PORT: String(swarm.port) }),
      mounts: mountsOf(config),
      image_pull_secrets: [...config.imagePullSecrets],
      queue_config: queueOf(config),
    },
  }
}

/**
 * A job's command with a leading `swarmplane-agent` replaced by how the image runs the agent
 * (`config.agentCommand`): a batch job's shards run `swarmplane-agent run-batch ...`, and the job's
 * image need not have the agent installed under that name.
 */
export function agentArgv(config: Pick<LeptonConfig, "agentCommand">, command: readonly string[]): string[] {
  if (command[0] !== "swarmplane-agent") return [...command]
  return [...config.agentCommand, ...command.slice(1)]
}

export interface JobInput {
  job: Pick<Job, "id" | "project" | "spec">
  taskIndex: number
  attemptUid: string
  config: LeptonConfig
  nodeGroupId?: string
  /** The URL of the swarm the job calls (`job.spec.swarm`), once it serves. */
  swarmUrl?: string
}

/**
 * The Lepton job of one task attempt: one worker (`completions = parallelism = 1`; a task is one
 * process), with `SHARD_ID`, `NSHARDS`, `ATTEMPT_UID` and `SWARM_ENDPOINT` as every backend sets them,
 * and for a batch job `SWARMPLANE_PROGRESS_STDOUT=1` (its progress is read from its log).
 * A leading `swarmplane-agent` in the command is the backend's `agentCommand`.
 * Lepton does not retry it (`max_failure_retry: 0`): a failed attempt is retried by swarmplane as a new
 * attempt, under its failure budget, with a job of its own.
 */
export function jobBody({
  job,
  taskIndex,
  attemptUid,
  config,
  nodeGroupId,
  swarmUrl,
}: JobInput): LeptonJobBody {
  const name = jobName(attemptUid)
  return {
    metadata: {
      id: name,
      name,
      labels: {
        "swarmplane-project": job.project,
        "swarmplane-job": job.id,
        "swarmplane-attempt": attemptUid,
      },
    },
    spec: {
      resource_shape: config.resourceShape,
      affinity: affinityOf(config, nodeGroupId),
      container: { image: job.spec.image ?? DefaultJobImage, command: agentArgv(config, job.spec.command) },
      completions: 1,
      parallelism: 1,
      envs: envsOf(job.spec.env, config, {
        SHARD_ID: String(taskIndex),
        NSHARDS: String(job.spec.tasks),
        ATTEMPT_UID: attemptUid,
        ...(swarmUrl ? { SWARM_ENDPOINT: swarmUrl } : {}),
        ...(job.spec.batch ? { [ProgressStdoutVariable]: "1" } : {}),
      }),
      mounts: mountsOf(config),
      image_pull_secrets: [...config.imagePullSecrets],
      queue_config: queueOf(config),
      max_failure_retry: 0,
      max_job_failure_retry: 0,
      ttl_seconds_after_finished: JobTtlSeconds,
    },
  }
}
