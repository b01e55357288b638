/**
 * Swarms: N replicas of an OpenAI-compatible model server behind one endpoint. The spec is what the
 * user asks for; the swarm read back adds the phase, the endpoint, replica states and the persisted
 * `ServingHandle` (everything a later, different process needs to find the deployment again).
 */

import { bytesAtMost, Command, Env, Image, Labels, Name, Timestamp } from "./common"
import { Limits } from "./limits"
import {
  oneLine,
  programText,
  SlurmGrammarText,
  SlurmPartitionsPattern,
  SlurmTimePattern,
} from "./slurm-grammar"
import { BackendType, SwarmDesired, SwarmPhase } from "./states"
import { DefaultRollout, SwarmSpecFields } from "./swarm-fields"
import { z } from "./zod"

const path = z
  .string()
  .max(256)
  .regex(/^\/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$/, { message: "an absolute URL path such as `/health`" })

export const Autoscaling = z
  .object({
    minReplicas: z.number().int().min(0).max(Limits.replicasPerSwarm).describe("Replicas at least."),
    maxReplicas: z.number().int().min(1).max(Limits.replicasPerSwarm).describe("Replicas at most."),
    targetInflightPerReplica: z
      .number()
      .int()
      .min(1)
      .max(10_000)
      .default(32)
      .describe("Concurrent requests per replica the autoscaler aims for."),
    targetFirstTokenP99S: z
      .number()
      .min(0.005)
      .max(120)
      .optional()
      .describe(
        "Time to first token (first byte of the answer), 99th percentile, the autoscaler keeps under: above it, one replica more per reading of the router's counters that began after the last decision (after `scaleUpDelayS`), whatever the in-flight target says, and no scale-down. Read from the router's histogram, so compared at bucket bounds (…, 0.25, 0.5, 1, 2.5, 5, 10 s …).",
      ),
    scaleUpDelayS: z
      .number()
      .int()
      .min(0)
      .max(86_400)
      .default(0)
      .describe("High load this long before adding replicas (0: at the first reading above the target)."),
    scaleDownDelayS: z
      .number()
      .int()
      .min(0)
      .max(86_400)
      .default(300)
      .describe(
        "Low load this long before removing replicas; with `minReplicas` 0, no request at all this long before scaling to zero.",
      ),
    wakeTimeoutS: z
      .number()
      .int()
      .min(1)
      .max(3600)
      .default(300)
      .describe(
        "Scaled to zero, how long the router holds a request while a replica starts before it answers 503 with `Retry-After`.",
      ),
  })
  .strict()
  .refine((a) => a.minReplicas <= a.maxReplicas, {
    message: "minReplicas must not exceed maxReplicas",
    path: ["minReplicas"],
  })
  .openapi("SwarmAutoscaling")

/**
 * How a spec change reaches the replicas. On backends where swarmplane rolls them itself (`workers`,
 * `slurm`): new replicas come up beside the old, each joins the router once healthy, and an old one
 * leaves the router (draining) only while enough others serve. On `eks`: the Deployment's rolling
 * update with the same `maxSurge` and `maxUnavailable`, and `drainTimeoutS` as each old pod's
 * `preStop` sleep (it leaves the Service at once and stops after it).
 */
export const Rollout = z
  .object({
    maxSurge: z
      .number()
      .int()
      .min(0)
      .max(Limits.replicasPerSwarm)
      .default(1)
      .describe("Replicas of the new spec that may run beyond `replicas` during an update."),
    maxUnavailable: z
      .number()
      .int()
      .min(0)
      .max(Limits.replicasPerSwarm)
      .default(0)
      .describe("Replicas that may be missing from the router during an update, below `replicas`."),
    drainTimeoutS: z
      .number()
      .int()
      .min(1)
      .max(3600)
      .default(30)
      .describe(
        "How long a replica taken out of the router keeps running, so the requests it has finish: at least the longest request, plus a router heartbeat.",
      ),
  })
  .strict()
  .refine((r) => r.maxSurge > 0 || r.maxUnavailable > 0, {
    message: "maxSurge and maxUnavailable cannot both be 0: an update could never replace a replica",
    path: ["maxSurge"],
  })
  .openapi("SwarmRollout")
export type Rollout = z.infer<typeof Rollout>
DefaultRollout satisfies Rollout

/** Backend-specific serving options; only the member for the swarm's backend type is used. */
export const ServingOptions = z
  .object({
    slurm: z
      .object({
        partition: z
          .string()
          .max(1100)
          .regex(SlurmPartitionsPattern, { message: SlurmGrammarText.partitions })
          .optional()
          .describe("Partition for the replicas; the backend's when absent."),
        timeLimit: z
          .string()
          .max(32)
          .regex(SlurmTimePattern, { message: SlurmGrammarText.time })
          .optional()
          .describe(
            "Time limit of the replica and router jobs, e.g. `7-00:00:00`; the backend's when absent.",
          ),
        nodesPerReplica: z
          .number()
          .int()
          .min(1)
          .max(64)
          .optional()
          .describe(
            "Nodes each replica spans (`--nodes`), its GPUs split evenly over them; the server starts on the first and finds the others in `SLURM_JOB_NODELIST` (a multi-node vLLM needs Ray there). From a domyn-swarm file's `gpus_per_replica` over `gpus_per_node`.",
          ),
        replicasPerNode: z
          .number()
          .int()
          .min(1)
          .max(64)
          .optional()
          .describe(
            "Replicas that may share a node (from a domyn-swarm file's `replicas_per_node`, checked against `gpus_per_node`). Slurm packs the replicas' array tasks onto nodes by the GPUs and CPUs they ask for.",
          ),
        routerPort: z
          .number()
          .int()
          .min(1024)
          .max(65535)
          .optional()
          .describe("Port of the router on its node."),
      })
      .strict()
      .optional()
      .describe("Options for `slurm` backends."),
    lepton: z
      .object({
        resourceShape: z
          .string()
          .max(64)
          .optional()
          .describe("Resource shape of each replica; the backend's when absent."),
      })
      .strict()
      .optional()
      .describe("Options for `lepton` backends."),
    eks: z
      .object({
        serviceType: z
          .enum(["ClusterIP", "LoadBalancer"])
          .default("ClusterIP")
          .describe(
            "Kubernetes Service type in front of the replicas: `ClusterIP` (the swarm's URL is the Service's cluster DNS name, reachable by pods in the cluster) or `LoadBalancer` (the URL is the load balancer's address).",
          ),
      })
      .strict()
      .optional()
      .describe("Options for `eks` backends."),
    workers: z
      .object({
        scaleGroup: Name.optional().describe("Scale group to run the replicas in; any when absent."),
      })
      .strict()
      .optional()
      .describe("Options for `workers` backends."),
  })
  .strict()
  .openapi("ServingOptions")

export const SwarmSpec = z
  .object({
    name: Name.describe("Swarm name, unique in the project; a DNS label such as `llama-70b`."),
    model: z
      .string()
      .min(1)
      .max(256)
      .refine((text) => oneLine(text) && programText(text), {
        message: "a model name on one line (no control characters or lone surrogates)",
      })
      .describe(
        "Model to serve, e.g. `meta-llama/Llama-3.1-8B-Instruct`, or `echo` for the built-in test server.",
      ),
    replicas: z
      .number()
      .int()
      .min(0)
      .max(Limits.replicasPerSwarm)
      .default(1)
      .describe("Number of model server replicas."),
    gpusPerReplica: z.number().int().min(0).max(Limits.gpusPerTask).default(0).describe("GPUs per replica."),
    cpusPerReplica: z.number().positive().max(1024).default(1).describe("CPU cores per replica."),
    memoryMiBPerReplica: z
      .number()
      .int()
      .positive()
      .max(16 * 1024 * 1024)
      .default(4096)
      .describe("Memory per replica, MiB."),
    image: Image.optional().describe(
      "Container image of the model server; the backend's default when absent.",
    ),
    command: Command.optional().describe(
      "Model server command (argv); a vLLM-style server of `model` when absent.",
    ),
    args: z
      .array(
        z
          .string()
          .max(Limits.commandArgLength)
          .refine(programText, { message: SlurmGrammarText.programText }),
      )
      .max(Limits.commandArgs)
      .default([])
      .describe("Extra arguments appended to the command."),
    env: Env.default({}).describe("Environment of each replica."),
    port: z.number().int().min(1).max(65535).default(8000).describe("Port the model server listens on."),
    healthPath: path.default("/health").describe("Path that answers 200 when a replica is ready."),
    backendId: Name.optional().describe(
      "Backend to run on; the project's only backend (of `backendType`, when given) when absent.",
    ),
    backendType: BackendType.optional().describe(
      "Type of backend the swarm must run on (`slurm`, `lepton`, `eks`, `workers`), e.g. from a domyn-swarm file's `backend.type`: never another type. With no `backendId`, the project's only backend of this type.",
    ),
    serving: ServingOptions.default({}).describe("Backend-specific serving options."),
    autoscaling: Autoscaling.optional().describe("Replica autoscaling; a fixed `replicas` when absent."),
    rollout: Rollout.optional().describe(
      "How an update replaces the replicas (`workers`, `slurm` and `eks` backends); when absent, `maxSurge` 1, `maxUnavailable` 0, `drainTimeoutS` 30.",
    ),
    labels: Labels.default({}).describe("Free-form labels."),
  })
  .strict()
  .openapi("SwarmSpec")
export type SwarmSpec = z.infer<typeof SwarmSpec>

/** What `POST /v1/swarms` takes: the spec, bounded in total size. */
export const SwarmRequest = SwarmSpec.superRefine(bytesAtMost(Limits.specBytes))

export const ServingHandle = z
  .object({
    id: z.string().describe("The platform's identifier of the deployment."),
    url: z.string().describe("Base URL of the endpoint; empty until ready."),
    meta: z
      .record(z.string(), z.union([z.string(), z.number(), z.boolean(), z.array(z.string())]))
      .describe(
        "Job ids, nodes, ports: whatever the backend needs to find the deployment again. Never secrets.",
      ),
  })
  .openapi("ServingHandle")
export type ServingHandle = z.infer<typeof ServingHandle>

export const ReplicaStatus = z
  .object({
    index: z.number().int().describe("Replica index."),
    state: z
      .string()
      .describe("Replica state as the backend reports it (e.g. `PENDING`, `RUNNING`, `READY`)."),
    url: z.string().optional().describe("Address of the replica, where known."),
    message: z.string().optional().describe("Detail, e.g. a pending reason."),
  })
  .openapi("ReplicaStatus")

/** One replica of a swarm whose backend swarmplane rolls itself, as the control plane keeps it. */
export const ReplicaSlot = z
  .object({
    slot: z.number().int().min(0).describe("The replica's number in the swarm, never reused."),
    generation: z.number().int().describe("The swarm generation (spec) it runs."),
    state: z
      .enum(["starting", "serving", "draining"])
      .describe(
        "`starting` until healthy; `serving` while the router sends it requests; `draining` once taken out of the router, until it is stopped.",
      ),
    since: Timestamp.describe("When it entered its state."),
    url: z.string().optional().describe("Where it serves, once healthy."),
  })
  .openapi("SwarmReplicaSlot")
export type ReplicaSlot = z.infer<typeof ReplicaSlot>

export const ReplicaSet = z
  .object({
    nextSlot: z.number().int().min(0).describe("The number the next replica gets."),
    replicas: z.array(ReplicaSlot).describe("Every replica that runs or is being stopped."),
    rolledBack: z
      .object({
        generation: z.number().int().describe("The generation that failed."),
        reason: z.string().describe("Why its replicas were taken down."),
      })
      .optional()
      .describe(
        "An update whose new replicas failed: they were taken down and the previous generation serves on.",
      ),
    lastChange: z
      .string()
      .optional()
      .describe(
        "The last step the rollout took and why, e.g. `replica 4 (generation 3) started: surge 1/1`.",
      ),
  })
  .openapi("SwarmReplicaSet")
export type ReplicaSet = z.infer<typeof ReplicaSet>

export const AutoscaleDecision = z
  .object({
    at: Timestamp.describe("When it was decided."),
    from: z.number().int().describe("Replicas before."),
    to: z.number().int().describe("Replicas after."),
    reason: z.string().describe("What the autoscaler read and why it moved."),
  })
  .openapi("SwarmAutoscaleDecision")
export type AutoscaleDecision = z.infer<typeof AutoscaleDecision>

export const AutoscalerState = z
  .object({
    replicas: z.number().int().describe("The replica count the autoscaler decided."),
    reading: z
      .object({
        at: Timestamp.describe("The router sample it ends at."),
        seconds: z.number().describe("The time it covers, s."),
        inFlight: z.number().describe("Mean requests in flight over it."),
        requests: z.number().int().describe("Requests answered in it."),
        ttftP99S: z
          .number()
          .nullable()
          .optional()
          .describe("Time to first byte over it, 99th percentile (its bucket's upper bound), s."),
        wanted: z.number().int().describe("The replicas that load asks for, within min and max."),
      })
      .optional()
      .describe("The last load reading from the router's counters."),
    lastRequestAt: Timestamp.optional().describe(
      "The end of the last reading with a request in it (a swarm goes to zero only after none for `scaleDownDelayS`).",
    ),
    pressure: z
      .object({
        since: Timestamp.describe("Since when the load has asked for another count."),
        wanted: z.number().int().describe("What it asks for now."),
      })
      .optional()
      .describe("Load asking for a change, held until the policy's delay has passed."),
    wake: z
      .object({
        requestedAt: Timestamp.describe("When a request arrived while scaled to zero."),
        readyAt: Timestamp.optional().describe("When a replica served again."),
        seconds: z.number().optional().describe("Wake time: from the request to a replica serving, s."),
      })
      .optional()
      .describe("The last wake from zero replicas."),
    decisions: z.array(AutoscaleDecision).describe("The last decisions, oldest first."),
  })
  .openapi("SwarmAutoscaler")
export type AutoscalerState = z.infer<typeof AutoscalerState>

export const Swarm = SwarmSpec.extend({
  project: Name.describe("Project the swarm belongs to."),
  phase: SwarmPhase.describe(
    "Where the deployment is: PENDING, INITIALIZING, RUNNING, FAILED, STOPPED or UNKNOWN.",
  ),
  desired: SwarmDesired.describe("`running`, or `deleted` after DELETE until it is STOPPED."),
  url: z
    .string()
    .optional()
    .describe(
      "The swarm's single endpoint (OpenAI-compatible), once known; kept while the router restarts or moves, and on a `workers` backend the same for the swarm's life while its router can be placed on the same host (another host keeps the port, not the host).",
    ),
  generation: z.number().int().describe("Increments on every spec change."),
  replicaGeneration: z
    .number()
    .int()
    .optional()
    .describe(
      "The generation whose replica spec the replicas run: a change of only `replicas`, `autoscaling`, `rollout` or `labels` keeps it, so scaling adds or removes replicas instead of replacing them. `generation` when absent.",
    ),
  observedGeneration: z
    .number()
    .int()
    .describe(
      "The generation the backend last applied; a RUNNING swarm serves the current spec once it equals `generation`.",
    ),
  replicaStatus: z
    .object({
      ready: z.number().int().describe("Replicas that pass their health check."),
      total: z.number().int().describe("Replicas asked for."),
      items: z.array(ReplicaStatus).describe("Per-replica state."),
    })
    .describe("Replica readiness."),
  handle: ServingHandle.optional().describe("Where the deployment is, once created."),
  autoscaler: AutoscalerState.optional().describe(
    "With `autoscaling`: the count it decided, the load it read, and its last decisions with their reasons.",
  ),
  replicaSet: ReplicaSet.optional().describe(
    "On backends where swarmplane rolls the replicas itself (`workers`): each replica, its generation and whether the router sends it requests.",
  ),
  message: z.string().optional().describe("Latest detail from the backend (an error, a pending reason)."),
  createdAt: Timestamp.describe("When the swarm was first created."),
  updatedAt: Timestamp.describe("When it last changed."),
}).openapi("Swarm")
export type Swarm = z.infer<typeof Swarm>

export const SwarmGetQuery = z.object({
  wait: SwarmPhase.optional().describe(
    "Wait until the swarm reaches this phase (or a terminal one) before answering.",
  ),
  timeoutS: z.coerce
    .number()
    .int()
    .min(0)
    .max(25)
    .default(20)
    .describe("How long to wait, seconds (at most 25)."),
})

export { DefaultRollout, isSwarmActive } from "./swarm-fields"

// The plain list of spec fields names exactly SwarmSpec's (a field added to one and not the other
// fails to compile).
type SpecKey = keyof z.infer<typeof SwarmSpec>
type Listed = (typeof SwarmSpecFields)[number]
SwarmSpecFields satisfies readonly SpecKey[]
export type SwarmSpecFieldsComplete = [SpecKey] extends [Listed] ? true : never
const _complete: SwarmSpecFieldsComplete = true
void _complete

const seconds = z.number().nullable().optional()
const WindowFigures = z
  .object({
    seconds: z
      .number()
      .describe("The time the figures cover, s (shorter than the window while samples are few)."),
    requests: z.number().int().describe("Requests answered to the end."),
    requestsPerS: z.number().describe("Requests answered per second."),
    errorRate: z
      .number()
      .optional()
      .describe("Requests no replica answered, and 5xx answers, over all; absent with none."),
    latencyP50S: seconds.describe("Request duration, median, s."),
    latencyP99S: seconds.describe("Request duration, 99th percentile, s."),
    ttftP50S: seconds.describe("Time to the first byte (the first token of a stream), median, s."),
    ttftP99S: seconds.describe("Time to the first byte, 99th percentile, s."),
    queueWaitP50S: seconds.describe(
      "Time a request waited in the router before a replica took it (held while one wakes), median, s.",
    ),
    queueWaitP99S: seconds.describe("Time waited in the router, 99th percentile, s."),
    tokensPerS: z.number().describe("Completion tokens answered per second."),
  })
  .openapi("SwarmMetricsWindow")

const ReplicaMetrics = z
  .object({
    url: z.string().describe("The replica, as the router reaches it."),
    slot: z
      .number()
      .int()
      .optional()
      .describe("Its slot in the swarm's replica set, when it is one of them."),
    generation: z.number().int().optional().describe("The swarm generation it runs, when known."),
    seconds: z.number().describe("The time the figures cover (between the router's last two samples), s."),
    inFlight: z.number().int().describe("Requests it was answering at the last sample."),
    meanInFlight: z.number().optional().describe("Requests in flight on average over the time covered."),
    requestsPerS: z.number().describe("Requests it answered per second."),
    errorRate: z.number().optional().describe("Its failed and 5xx answers over all; absent with none."),
    ttftP50S: seconds.describe("Its time to first byte (first token of a stream), median, s."),
    ttftP99S: seconds.describe("Its time to first byte, 99th percentile, s."),
    tokensPerS: z.number().describe("Completion tokens it answered per second."),
  })
  .openapi("SwarmReplicaMetrics")

export const SwarmMetrics = z
  .object({
    name: Name.describe("Swarm name."),
    sampledAt: Timestamp.optional().describe(
      "When the router's counters were last sampled; absent before any.",
    ),
    inFlight: z.number().int().optional().describe("Requests being answered at the last sample."),
    windows: z
      .object({
        "1m": WindowFigures.optional().describe("The last minute."),
        "5m": WindowFigures.optional().describe("The last 5 minutes."),
        "15m": WindowFigures.optional().describe("The last 15 minutes."),
      })
      .describe("The figures over the last 1, 5 and 15 minutes, each ending at the last sample."),
    replicas: z
      .array(ReplicaMetrics)
      .describe(
        "Per replica the router routes to, its figures between the router's last two samples (about 10 s); empty before two samples.",
      ),
    series: z
      .array(
        z
          .object({
            at: Timestamp.describe("End of the step (a sample's time)."),
            requestsPerS: z.number().describe("Requests answered per second in the step."),
            errorRate: z
              .number()
              .optional()
              .describe("Failed and 5xx over all in the step; absent with none."),
            latencyP99S: seconds.describe("Request duration, 99th percentile, s."),
            tokensPerS: z.number().describe("Completion tokens per second in the step."),
          })
          .describe("One step between two samples."),
      )
      .describe("Step by step over the last 15 minutes, oldest first: what the dashboard charts."),
  })
  .openapi("SwarmMetrics")
export type SwarmMetrics = z.infer<typeof SwarmMetrics>
