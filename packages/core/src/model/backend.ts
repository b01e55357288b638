/**
 * Backend configs: a discriminated union on `type` (`slurm` | `lepton` | `eks` | `workers`), one
 * member per platform with the fields a user of that platform needs. Secrets are never stored in a
 * config: a config names a secret (`sshKeySecret`, `tokenSecret`) that the deployment resolves.
 */

import { kindOfType } from "./backend-kinds"
import { Attributes, bytesAtMost, Env, Name, notReserved, Resources, Text, Timestamp } from "./common"
import { Limits } from "./limits"
import {
  HostPattern,
  oneLine,
  programText,
  ReservedSbatchOptions,
  SbatchOptionPattern,
  SlurmGrammarText,
  SlurmNamePattern,
  SlurmPathPattern,
  SlurmTimePattern,
  sbatchOptionName,
} from "./slurm-grammar"
import { BackendKind, type BackendKinds } from "./states"
import { z } from "./zod"

/** The name of a secret held by the deployment (SST secret / SSM parameter / local file), never its value. */
const SecretName = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[A-Za-z0-9][A-Za-z0-9._/-]*$/, {
    message: "a secret name (letters, digits, '.', '_', '/', '-'), not the secret itself",
  })

const ScriptLine = z.string().max(Limits.scriptLineLength)
const ShellLine = ScriptLine.refine((line) => oneLine(line, { tab: true }), {
  message: SlurmGrammarText.shellLine,
})
/** An argv word that reaches a login-node command (quoted there): anything a program can receive as it is. */
const ArgvWord = z
  .string()
  .max(Limits.scriptLineLength)
  .refine(programText, { message: SlurmGrammarText.programText })
const SlurmName = z.string().min(1).max(64).regex(SlurmNamePattern, { message: SlurmGrammarText.name })
const SbatchOption = ScriptLine.regex(SbatchOptionPattern, { message: SlurmGrammarText.sbatchOption }).refine(
  (line) => !ReservedSbatchOptions.includes(sbatchOptionName(line) ?? ""),
  {
    message: `swarmplane sets ${ReservedSbatchOptions.filter((o) => o.length > 1)
      .map((o) => `--${o}`)
      .join(", ")} itself (it names, retries and logs each attempt); leave them out`,
  },
)

/**
 * A URL that credentials are sent to: https, or http only to this machine (local fakes and tunnels),
 * so a config cannot send a workspace token to an arbitrary plain-text server.
 */
const HttpsUrl = z
  .string()
  .max(1024)
  .refine(
    (value) => {
      try {
        const url = new URL(value)
        return (
          url.protocol === "https:" ||
          (url.protocol === "http:" && ["127.0.0.1", "localhost", "[::1]"].includes(url.hostname))
        )
      } catch {
        return false
      }
    },
    { message: "must be an https:// URL (http:// only to 127.0.0.1 or localhost)" },
  )

const common = {
  displayName: Text.optional().describe("Human-friendly name shown in the CLI and dashboard."),
  attributes: Attributes.optional().describe(
    'Attributes this backend advertises to job constraints, e.g. `{ "accelerator": "h100" }`.',
  ),
}

export const SlurmBackendConfig = z
  .object({
    type: z.literal("slurm").describe("Slurm cluster reached over SSH through its login node."),
    ...common,
    loginHost: z
      .string()
      .min(1)
      .max(253)
      .regex(HostPattern, { message: SlurmGrammarText.host })
      .describe("Login node host name or address."),
    port: z.number().int().min(1).max(65535).default(22).describe("SSH port of the login node."),
    user: z
      .string()
      .min(1)
      .max(64)
      .regex(/^[a-z_][a-z0-9_.-]*$/i, { message: "a POSIX user name" })
      .describe("User to log in as; jobs run as this user."),
    sshKeySecret: SecretName.describe("Name of the secret holding the private SSH key (PEM/OpenSSH)."),
    hostKey: z
      .string()
      .min(16)
      .max(16 * 1024)
      .describe(
        "Pinned host key of the login node, as in known_hosts (`ssh-ed25519 AAAA...`) or its SHA256 fingerprint (`SHA256:...`). A changed key is refused.",
      ),
    partition: SlurmName.describe("Default partition (`--partition`)."),
    gpuPartition: SlurmName.optional().describe(
      "Partition for tasks that ask for GPUs; `partition` when absent.",
    ),
    account: SlurmName.optional().describe("Account to charge (`--account`)."),
    qos: SlurmName.optional().describe("Quality of service (`--qos`)."),
    timeLimit: z
      .string()
      .max(32)
      .regex(SlurmTimePattern, { message: SlurmGrammarText.time })
      .default("01:00:00")
      .describe("Default time limit (`--time`) when a job gives none."),
    gresGpuName: SlurmName.default("gpu").describe("GRES name of GPUs (`--gres=<name>:N`)."),
    extraSbatch: z
      .array(SbatchOption)
      .max(Limits.scriptLines)
      .default([])
      .describe(
        "Extra `#SBATCH` options, one per entry, e.g. `--exclusive`. Not the ones swarmplane sets itself (`--job-name`, `--output`, `--array`, `--requeue`, ...).",
      ),
    setup: z
      .array(ShellLine)
      .max(Limits.scriptLines)
      .default([])
      .describe("Shell lines run before each task, e.g. `module load cuda/12.4`."),
    container: z
      .object({
        launcher: z
          .enum(["none", "apptainer", "enroot"])
          .default("none")
          .describe("How an image runs: directly on the node (`none`), `apptainer exec`, or `enroot start`."),
        extraArgs: z
          .array(ArgvWord)
          .max(Limits.scriptLines)
          .default([])
          .describe("Extra launcher arguments, e.g. `--nv`."),
      })
      .strict()
      .default({ launcher: "none", extraArgs: [] })
      .describe("Container launcher for jobs that name an image."),
    agentCommand: z
      .array(ArgvWord)
      .min(1)
      .max(64)
      .default(["swarmplane-agent"])
      .describe(
        'How the cluster runs the agent\'s program (`npm run build:agent` makes it one file): it replaces a leading `swarmplane-agent` in commands, e.g. `["node", "/shared/swarmplane-agent.mjs"]`.',
      ),
    routerCommand: z
      .array(ArgvWord)
      .max(64)
      .optional()
      .describe(
        "Command of the swarm router job; the agent's `router` when absent. It is given `--upstream-list F` (the swarm's routing file: one replica URL a line, rewritten by the control plane when the replicas that serve change), `--counters-file F` (where it writes its counters for the control plane to read), `--wake-hold-s S` for a swarm that scales to zero (hold requests that long while a replica wakes), and `--port P`; once it routes, `GET /_swarmplane/router` must answer with `ready` true.",
      ),
    outputDir: z
      .string()
      .min(1)
      .max(1024)
      .regex(SlurmPathPattern, { message: SlurmGrammarText.path })
      .default("~/.swarmplane/jobs")
      .describe(
        "Folder on the cluster for job scripts' output files; nothing else is left on the login node.",
      ),
    connectTimeoutS: z.number().int().min(1).max(120).default(15).describe("SSH connect timeout, seconds."),
    commandTimeoutS: z
      .number()
      .int()
      .min(1)
      .max(600)
      .default(60)
      .describe("Timeout of one remote command, seconds."),
  })
  .strict()
  .openapi("SlurmBackendConfig")

export const LeptonPriorityClasses = [
  "low-1000",
  "low-2000",
  "low-3000",
  "mid-4000",
  "mid-5000",
  "mid-6000",
  "high-7000",
  "high-8000",
  "high-9000",
] as const

export const LeptonBackendConfig = z
  .object({
    type: z.literal("lepton").describe("NVIDIA DGX Cloud Lepton workspace."),
    ...common,
    workspaceId: z
      .string()
      .min(1)
      .max(128)
      .regex(/^[A-Za-z0-9-]+$/, { message: "a workspace id such as `ws123`" })
      .describe("Workspace id."),
    workspaceUrl: HttpsUrl.optional().describe(
      "The workspace's API base; when absent, the DGX Cloud Lepton gateway's: `https://gateway.dgxc-lepton.nvidia.com/api/v2/workspaces/<workspaceId>`.",
    ),
    tokenSecret: SecretName.describe("Name of the secret holding the workspace token."),
    nodeGroup: z
      .string()
      .min(1)
      .max(128)
      .describe("Dedicated node group (name or id) that jobs and deployments run in."),
    resourceShape: z.string().min(1).max(64).describe("Default resource shape, e.g. `gpu.8xh100-80gb`."),
    priorityClass: z.enum(LeptonPriorityClasses).default("mid-4000").describe("Queue priority class."),
    canBePreempted: z
      .boolean()
      .default(false)
      .describe("Whether work may be preempted by higher priorities."),
    canPreempt: z.boolean().default(false).describe("Whether work may preempt lower priorities."),
    mounts: z
      .array(
        z
          .object({
            path: z.string().min(1).max(1024).describe("Path in the storage, e.g. `/shared/models`."),
            from: z.string().min(1).max(256).describe("Storage, e.g. `node-nfs:shared`."),
            mountPath: z.string().min(1).max(1024).describe("Where it appears in the container."),
            readOnly: z.boolean().default(false).describe("Mount read-only."),
          })
          .strict(),
      )
      .max(32)
      .default([])
      .describe("Storage mounts added to every job and deployment."),
    imagePullSecrets: z
      .array(z.string().min(1).max(128))
      .max(16)
      .default([])
      .describe("Image pull secret names in the workspace."),
    env: Env.optional().describe(
      "Environment variables set in every job and deployment of this backend; a job's or swarm's own `env` wins on a clash. Plain values: use `envSecrets` for anything secret.",
    ),
    envSecrets: z
      .record(
        z
          .string()
          .regex(/^[A-Za-z_][A-Za-z0-9_]*$/)
          .refine(notReserved, { message: "a reserved name; choose another" }),
        z.string().min(1).max(128),
      )
      .optional()
      .describe('Environment variables taken from workspace secrets: `{ "HF_TOKEN": "<secret name>" }`.'),
    endpointTokenSecret: SecretName.optional().describe(
      "Secret holding the bearer token of swarm endpoints; endpoints are public when absent.",
    ),
    agentCommand: z
      .array(ArgvWord)
      .min(1)
      .max(64)
      .default(["swarmplane-agent"])
      .describe(
        'How the job\'s image runs the agent\'s program (`npm run build:agent` makes it one file): it replaces a leading `swarmplane-agent` in job commands (a batch job\'s shards run `swarmplane-agent run-batch`), e.g. `["node", "/shared/swarmplane-agent.mjs"]`.',
      ),
  })
  .strict()
  .openapi("LeptonBackendConfig")

export const EksBackendConfig = z
  .object({
    type: z.literal("eks").describe("Amazon EKS cluster running Kueue."),
    ...common,
    clusterName: z.string().min(1).max(100).describe("EKS cluster name."),
    region: z
      .string()
      .regex(/^[a-z]{2}(-[a-z]+)+-\d$/, { message: "an AWS region such as `us-west-2`" })
      .describe("AWS region of the cluster."),
    roleArn: z
      .string()
      .regex(/^arn:aws[a-z-]*:iam::\d{12}:role\/.+$/, { message: "an IAM role ARN" })
      .optional()
      .describe("Role to assume for cluster access; the function's own role when absent."),
    endpoint: HttpsUrl.optional().describe("Override of the EKS API endpoint (private endpoints, tests)."),
    namespace: Name.default("default").describe("Namespace for Jobs, Deployments and Services."),
    localQueue: Name.describe("Kueue LocalQueue the Jobs are labelled for (`kueue.x-k8s.io/queue-name`)."),
    workloadPriorityClass: Name.optional().describe(
      "Kueue WorkloadPriorityClass (`kueue.x-k8s.io/priority-class`).",
    ),
    serviceAccount: Name.optional().describe("Service account of the pods."),
    gpuResourceName: z
      .string()
      .min(1)
      .max(128)
      .default("nvidia.com/gpu")
      .describe("Extended resource name of GPUs."),
    nodeSelector: Attributes.optional().describe("Node selector added to every pod."),
    tolerations: z
      .array(
        z
          .object({
            key: z.string().max(253).optional().describe("Taint key."),
            operator: z.enum(["Exists", "Equal"]).default("Equal").describe("`Equal` or `Exists`."),
            value: z.string().max(253).optional().describe("Taint value for `Equal`."),
            effect: z
              .enum(["NoSchedule", "PreferNoSchedule", "NoExecute"])
              .optional()
              .describe("Taint effect; all when absent."),
          })
          .strict(),
      )
      .max(16)
      .default([])
      .describe("Tolerations added to every pod."),
    imagePullSecrets: z.array(Name).max(16).default([]).describe("Image pull secrets in the namespace."),
    imagePullGraceS: z
      .number()
      .int()
      .min(0)
      .max(3600)
      .default(120)
      .describe(
        "How long a task's pod may fail to pull its image (or start its container) before the attempt FAILS with Kubernetes' reason.",
      ),
    agentCommand: z
      .array(ArgvWord)
      .min(1)
      .max(64)
      .default(["swarmplane-agent"])
      .describe(
        'How the job\'s image runs the agent\'s program (`npm run build:agent` makes it one file): it replaces a leading `swarmplane-agent` in job commands (a batch job\'s shards run `swarmplane-agent run-batch`), e.g. `["node", "/shared/swarmplane-agent.mjs"]`.',
      ),
  })
  .strict()
  .openapi("EksBackendConfig")

const LocalProvider = z
  .object({
    type: z
      .literal("local")
      .describe(
        "Worker agents started as processes on the control plane's machine; only an operator key may register it.",
      ),
  })
  .strict()

const SlurmPilotProvider = z
  .object({
    type: z
      .literal("slurm")
      .describe("Worker agents started as Slurm pilot jobs on a registered `slurm` backend."),
    backendId: Name.describe("Id of the `slurm` backend that runs the pilot jobs."),
    timeLimit: z
      .string()
      .max(32)
      .optional()
      .describe("Pilot job time limit; the Slurm backend's default when absent."),
  })
  .strict()

export const ScaleGroup = z
  .object({
    name: Name.describe("Scale group name, unique within the backend."),
    provider: z
      .discriminatedUnion("type", [LocalProvider, SlurmPilotProvider])
      .describe("What starts and stops this group's workers."),
    min: z.number().int().min(0).max(10_000).default(0).describe("Workers kept at all times."),
    max: z.number().int().min(0).max(10_000).describe("Workers at most."),
    buffer: z
      .number()
      .int()
      .min(0)
      .max(1000)
      .default(0)
      .describe("Idle workers kept above demand, for fast starts."),
    resources: Resources.describe("Resources of each worker in this group."),
    attributes: Attributes.default({}).describe("Attributes each worker of this group advertises."),
    scaleUpPerMinute: z
      .number()
      .int()
      .min(1)
      .max(1000)
      .default(10)
      .describe("Workers started per minute at most."),
    scaleDownPerMinute: z
      .number()
      .int()
      .min(1)
      .max(1000)
      .default(5)
      .describe("Workers stopped per minute at most."),
    idleTimeoutS: z
      .number()
      .int()
      .min(0)
      .max(86_400)
      .default(300)
      .describe("Idle time before a worker may be stopped."),
  })
  .strict()
  .refine((g) => g.min <= g.max, { message: "min must not exceed max", path: ["min"] })
  .openapi("ScaleGroup")
export type ScaleGroup = z.infer<typeof ScaleGroup>

export const WorkersBackendConfig = z
  .object({
    type: z
      .literal("workers")
      .describe("Worker agents that register with swarmplane; swarmplane schedules them itself."),
    ...common,
    scaleGroups: z
      .array(ScaleGroup)
      .max(Limits.scaleGroups)
      .default([])
      .describe("Autoscaled groups of workers."),
    heartbeatIntervalS: z
      .number()
      .int()
      .min(1)
      .max(300)
      .default(5)
      .describe("How often agents heartbeat; new work reaches a worker within this time."),
    heartbeatGraceS: z
      .number()
      .int()
      .min(5)
      .max(3600)
      .default(50)
      .describe("Silence after which a worker is marked dead and its attempts are requeued."),
    deadWorkerRetentionS: z
      .number()
      .int()
      .min(60)
      .max(30 * 86_400)
      .default(86_400)
      .describe("How long dead workers are kept for inspection before they are pruned."),
  })
  .strict()
  .refine((c) => c.heartbeatIntervalS * 2 <= c.heartbeatGraceS, {
    message: "heartbeatGraceS must be at least twice heartbeatIntervalS",
    path: ["heartbeatGraceS"],
  })
  .refine((c) => new Set(c.scaleGroups.map((g) => g.name)).size === c.scaleGroups.length, {
    message: "scale group names must be unique",
    path: ["scaleGroups"],
  })
  .openapi("WorkersBackendConfig")

export const BackendConfig = z
  .discriminatedUnion("type", [
    SlurmBackendConfig,
    LeptonBackendConfig,
    EksBackendConfig,
    WorkersBackendConfig,
  ])
  .openapi("BackendConfig")
export type BackendConfig = z.infer<typeof BackendConfig>
export type BackendConfigOf<T extends BackendConfig["type"]> = Extract<BackendConfig, { type: T }>

export { kindOfType } from "./backend-kinds"

// Every type has its kind.
kindOfType satisfies Record<BackendConfig["type"], (typeof BackendKinds)[number]>

export const CreateBackendRequest = z
  .object({
    id: Name.describe("Backend id, unique in the project, e.g. `hpc-a`."),
    config: BackendConfig.describe("The platform and how to reach it; `type` selects the fields."),
  })
  .strict()
  .superRefine(bytesAtMost(Limits.specBytes))
  .openapi("CreateBackendRequest")

export const Backend = z
  .object({
    id: Name.describe("Backend id."),
    project: Name.describe("Project the backend belongs to."),
    kind: BackendKind.describe(
      "`worker-daemon` (swarmplane schedules) or `delegated` (the cluster's scheduler places).",
    ),
    config: BackendConfig.describe("The backend's config (never holds secret values, only secret names)."),
    status: z
      .object({
        healthy: z
          .boolean()
          .optional()
          .describe("Whether the last contact succeeded; absent before the first."),
        message: z.string().optional().describe("Last error or note from the control loop."),
        checkedAt: Timestamp.optional().describe("When the control loop last contacted the backend."),
      })
      .describe("What the control loop last saw of this backend."),
    createdAt: Timestamp.describe("When the backend was registered."),
    updatedAt: Timestamp.describe("When the config last changed."),
  })
  .openapi("Backend")
export type Backend = z.infer<typeof Backend>
