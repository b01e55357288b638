/**
 * Workers of `workers` (worker-daemon) backends: they register, then heartbeat with the attempts they
 * observe; each heartbeat's answer is the complete desired set of attempts (pull-based, so the control
 * plane never has to reach a worker).
 */

import { Attributes, Command, Env, LineText, Name, Resources, Timestamp } from "./common"
import { WorkerHealth } from "./states"
import { WorkerCredentialHeader } from "./worker-credential"
import { z } from "./zod"

export const RegisterWorkerRequest = z
  .object({
    backendId: Name.describe("The `workers` backend this worker serves."),
    scaleGroup: Name.optional().describe(
      "Scale group that started the worker; absent for hand-started workers.",
    ),
    name: LineText(128).optional().describe("Host name or label, for display."),
    address: LineText(256)
      .optional()
      .describe("`host:port` where the worker's router or replicas can be reached."),
    resources: Resources.describe("Resources the worker offers."),
    attributes: Attributes.default({}).describe(
      'Attributes the worker advertises, e.g. `{ "accelerator": "h100" }`.',
    ),
    agentVersion: LineText(64).optional().describe("Version of the agent."),
    instanceId: LineText(128)
      .optional()
      .describe("Id the scale group's provider gave the machine or process, to match it on scale-down."),
  })
  .strict()
  .openapi("RegisterWorkerRequest")

export const Worker = z
  .object({
    id: z.string().describe("Worker id."),
    project: Name.describe("Project the worker belongs to."),
    backendId: Name.describe("Backend the worker serves."),
    scaleGroup: Name.optional().describe("Scale group that started it."),
    name: z.string().optional().describe("Host name or label."),
    address: z.string().optional().describe("`host:port` of the worker."),
    resources: Resources.describe("Resources it offers."),
    attributes: Attributes.describe("Attributes it advertises."),
    health: WorkerHealth.describe(
      "`healthy`, `suspect` (late heartbeat) or `dead` (silent past the grace period).",
    ),
    lastSeen: Timestamp.describe("Time of the last heartbeat."),
    idleSince: Timestamp.optional().describe(
      "Since when the worker has had nothing to run (the autoscaler stops idle workers).",
    ),
    registeredAt: Timestamp.describe("When it registered."),
    agentVersion: z.string().optional().describe("Version of the agent."),
    instanceId: z.string().optional().describe("The provider's id of the machine or process."),
  })
  .openapi("Worker")
export type Worker = z.infer<typeof Worker>

/** Counters an attempt reports of its own work (rows of a batch shard). */
export const Progress = z
  .object({
    total: z.number().int().min(0).optional().describe("Items in all, when known."),
    done: z.number().int().min(0).describe("Items done."),
    failed: z.number().int().min(0).describe("Items that failed for good."),
    retries: z.number().int().min(0).optional().describe("Requests retried so far."),
    resent: z
      .number()
      .int()
      .min(0)
      .optional()
      .describe("Items an earlier attempt had sent but not checkpointed, which this one sent again."),
  })
  .strict()
  .openapi("Progress")
export type Progress = z.infer<typeof Progress>

/** What an agent reports of one attempt it knows of. */
/** Duration buckets of the router's histograms, seconds (the last bucket counts what is above). */
export const RouterBuckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120] as const

const count = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER)
const buckets = z.array(count).length(RouterBuckets.length + 1)

/** A swarm router's counters since its process started: what the swarm's metrics are made from. */
/** Replicas a router reports counters of, at most (a swarm has at most this many routed at once). */
export const MaxReportedReplicas = 64

/** One replica's counters at the router, since the router started routing to it. */
export const ReplicaCounters = z
  .object({
    url: z.string().max(256).describe("The replica, as the router reaches it."),
    inFlight: count.describe("Requests it is answering now."),
    requests: count.describe("Requests it answered to the end."),
    failures: count.describe("Requests it did not answer."),
    answers5xx: count.optional().describe("Its 5xx answers."),
    tokens: count.describe("Completion tokens it answered."),
    busySeconds: z.number().min(0).optional().describe("Its requests in flight integrated over time, s."),
    firstByteBuckets: buckets.describe("Its requests by time to first byte, per bucket of `RouterBuckets`."),
  })
  .strict()

export const RouterCounters = z
  .object({
    startedAt: z.number().int().min(0).describe("When this router process started, epoch ms."),
    requests: count.describe("Requests answered to the end."),
    failures: count.describe("Requests no replica answered."),
    answers: z
      .record(z.string().regex(/^[1-5]xx$/), count)
      .describe("Answers by status class (`2xx`, `4xx`, `5xx`)."),
    tokens: count.describe("Completion tokens answered (usage, else counted in streamed text)."),
    inFlight: count.describe("Requests being answered now."),
    waiting: count
      .optional()
      .describe("Requests the router holds for want of a replica (a swarm scaled to zero, waking)."),
    busySeconds: z
      .number()
      .min(0)
      .optional()
      .describe(
        "Requests in flight integrated over time, s: over the time between two reports, the mean number in flight.",
      ),
    durationBuckets: buckets.describe(
      "Requests by duration, per bucket of `RouterBuckets` seconds, then above.",
    ),
    firstByteBuckets: buckets.describe("Requests by time to first byte, the same buckets."),
    queueWaitBuckets: buckets
      .optional()
      .describe(
        "Requests by the time they waited in the router before a replica took them (held while one wakes), the same buckets.",
      ),
    replicas: z
      .array(ReplicaCounters)
      .max(MaxReportedReplicas)
      .optional()
      .describe(`Per replica the router routes to (at most ${MaxReportedReplicas}), its counters.`),
  })
  .strict()

export const ObservedAttempt = z
  .object({
    attemptUid: z.string().max(128).describe("Attempt the worker runs or ran."),
    state: z
      .enum(["RUNNING", "SUCCEEDED", "FAILED", "KILLED"])
      .describe(
        "`RUNNING` (process started), `SUCCEEDED` (exit 0), `FAILED` (non-zero exit or could not start), `KILLED` (stopped when told).",
      ),
    exitCode: z.number().int().optional().describe("Exit code, once it exited."),
    message: z
      .string()
      .max(4096)
      .optional()
      .describe("Detail, e.g. why it could not start, or why a running router is not serving."),
    endpoint: z
      .string()
      .max(256)
      .optional()
      .describe("`http://host:port` where a replica or router listens."),
    ready: z.boolean().optional().describe("For replicas and routers: the health check passes."),
    progress: Progress.optional().describe(
      "Counters the work reports (the batch runner does), sent when they changed.",
    ),
    router: RouterCounters.optional().describe(
      "For routers: their counters since the router process started, sent with every heartbeat.",
    ),
    logTail: z
      .string()
      .max(32 * 1024)
      .optional()
      .describe(
        "The last lines of output (stdout and stderr), sent when they changed since the last heartbeat.",
      ),
  })
  .strict()
  .openapi("ObservedAttempt")
export type ObservedAttempt = z.infer<typeof ObservedAttempt>
export type RouterCounters = z.infer<typeof RouterCounters>
export type ReplicaCounters = z.infer<typeof ReplicaCounters>
/** A router's counters as a heartbeat brought them (`at`, epoch ms): one sample of a swarm's metrics. */
export type RouterSample = RouterCounters & { at: number }

export const HeartbeatRequest = z
  .object({
    attempts: z
      .array(ObservedAttempt)
      .max(1024)
      .default([])
      .describe("Every attempt the worker currently knows of."),
  })
  .strict()
  .openapi("HeartbeatRequest")

/** One attempt the control plane wants on a worker. The set in a heartbeat answer is complete. */
export const DesiredAttempt = z
  .object({
    attemptUid: z.string().describe("Attempt id; also `ATTEMPT_UID` in the process's environment."),
    action: z.enum(["run", "stop"]).describe("`run`: keep it running (start it if new); `stop`: kill it."),
    kind: z
      .enum(["task", "replica", "router"])
      .describe(
        "`task` runs to completion; `replica` serves on `PORT` until stopped; `router` is the agent's own proxy over `upstreams`.",
      ),
    jobId: z.string().describe("Job of the attempt (for replicas and routers: the swarm's serving job)."),
    taskIndex: z.number().int().describe("Task index (`SHARD_ID`)."),
    command: Command.optional().describe(
      "argv to run; a first element `swarmplane-agent` means the agent's own program.",
    ),
    env: Env.optional().describe(
      "Environment to run with, besides `PORT` which the agent picks for replicas.",
    ),
    healthPath: z.string().optional().describe("For replicas: path that answers 200 once ready."),
    upstreams: z.array(z.string()).optional().describe("For routers: the endpoints of the ready replicas."),
    port: z
      .number()
      .int()
      .min(1)
      .max(65535)
      .optional()
      .describe(
        "For routers: the port to listen on, the swarm's for its life (its URL); absent until the swarm's first router has listened, which picks one.",
      ),
    wakeHoldS: z
      .number()
      .int()
      .min(1)
      .max(3600)
      .optional()
      .describe(
        "For routers of swarms that scale to zero: with no replica, hold each request this long for one to wake (then 503 with `Retry-After`).",
      ),
    resources: Resources.optional().describe(
      "What the attempt was placed with. The agent holds a new attempt back while attempts it is still stopping keep those resources busy.",
    ),
  })
  .openapi("DesiredAttempt")
export type DesiredAttempt = z.infer<typeof DesiredAttempt>

export const HeartbeatResponse = z
  .object({
    desired: z.array(DesiredAttempt).describe("The complete desired set of attempts on this worker."),
    heartbeatIntervalS: z.number().int().describe("When to send the next heartbeat."),
    holdS: z
      .number()
      .optional()
      .describe(
        "The longest this control plane holds a heartbeat that asks to wait (`?waitS`); absent from one that does not hold them. An agent that waits sends its next heartbeat as soon as it has applied the answer.",
      ),
  })
  .openapi("HeartbeatResponse")

export const RegisterWorkerResponse = z
  .object({
    worker: Worker.describe("The registered worker."),
    heartbeatIntervalS: z.number().int().describe("How often to heartbeat, seconds."),
    credential: z
      .string()
      .describe(
        `The credential that alone may act as this worker: send it as \`${WorkerCredentialHeader}\` with every heartbeat and leave. Shown once; only its hash is kept.`,
      ),
  })
  .openapi("RegisterWorkerResponse")

export { WorkerCredentialHeader }
