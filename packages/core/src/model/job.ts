/**
 * Jobs, tasks and attempts. A job is N tasks (shards); each task is tried by attempts, each named by
 * an `attemptUid` minted and persisted before anything is submitted. Job status is derived from the
 * tasks (rules/job-status.ts).
 */

import {
  bytesAtMost,
  Command,
  Constraint,
  Env,
  Image,
  Labels,
  Name,
  Preference,
  Resources,
  Timestamp,
} from "./common"
import { Limits } from "./limits"
import { programText, SlurmGrammarText } from "./slurm-grammar"
import { AttemptState, BackendType, JobStatus, Priority, TaskState } from "./states"
import { z } from "./zod"

/** A word of the batch runner's command line: text a program can receive as it is. */
const RunnerArg = (min: number, max: number) =>
  z.string().min(min).max(max).refine(programText, { message: SlurmGrammarText.programText })

/** A batch inference job: rows of a dataset sent to the swarm's endpoint, sharded over the tasks. */
export const BatchSpec = z
  .object({
    input: RunnerArg(1, 2048).describe(
      "Rows to process: a JSONL, CSV or Parquet file, as a path on the machines that run the tasks or an `s3://bucket/key` URL.",
    ),
    output: RunnerArg(1, 2048).describe(
      "Folder for the results, or an `s3://bucket/prefix` (same layout): `shard-<n>.jsonl` per shard, and checkpoint parts that a retried shard resumes from.",
    ),
    format: z
      .enum(["jsonl", "csv", "parquet"])
      .optional()
      .describe(
        "Format of `input`; from its extension (`.jsonl`/`.ndjson`, `.csv`, `.parquet`) when absent.",
      ),
    idColumn: RunnerArg(1, 128).default("id").describe("Column with each row's unique id."),
    promptColumn: RunnerArg(1, 128)
      .default("prompt")
      .describe("Column with the prompt (a `messages` column is used as is for chat)."),
    api: z
      .enum(["chat", "completions"])
      .default("chat")
      .describe("`chat` calls `/v1/chat/completions`, `completions` calls `/v1/completions`."),
    model: RunnerArg(0, 256)
      .optional()
      .describe("Model name to send; the endpoint's first model when absent."),
    maxTokens: z.number().int().min(1).max(1_000_000).optional().describe("`max_tokens` of each request."),
    concurrency: z.number().int().min(1).max(1024).default(8).describe("Requests in flight per shard."),
    checkpointEvery: z
      .number()
      .int()
      .min(1)
      .max(1_000_000)
      .default(100)
      .describe("Rows per checkpoint part."),
    shardBy: z
      .enum(["hash", "range"])
      .default("hash")
      .describe("`hash` of the id (stable whatever the order) or contiguous `range`s."),
    maxRetries: z
      .number()
      .int()
      .min(0)
      .max(100)
      .default(8)
      .describe("Retries of a request on 429, 5xx and timeouts, with exponential backoff."),
    overwrite: z
      .boolean()
      .optional()
      .describe(
        "Start each shard over when `output` holds results of another input or request (its fingerprint differs); without it such a job refuses. The same input and request always resume.",
      ),
  })
  .strict()
  .openapi("BatchSpec")
export type BatchSpec = z.infer<typeof BatchSpec>

/** The command a batch job's tasks run: the agent's batch runner with the spec as flags. */
export function batchCommand(b: BatchSpec): string[] {
  return [
    "swarmplane-agent",
    "run-batch",
    "--input",
    b.input,
    "--output",
    b.output,
    "--id-column",
    b.idColumn,
    "--prompt-column",
    b.promptColumn,
    "--api",
    b.api,
    "--concurrency",
    String(b.concurrency),
    "--checkpoint-every",
    String(b.checkpointEvery),
    "--shard-by",
    b.shardBy,
    "--max-retries",
    String(b.maxRetries),
    ...(b.format ? ["--format", b.format] : []),
    ...(b.model ? ["--model", b.model] : []),
    ...(b.maxTokens ? ["--max-tokens", String(b.maxTokens)] : []),
    ...(b.overwrite ? ["--overwrite"] : []),
  ]
}

const JobFields = z.object({
  name: Name.default("job").describe("Job name (not unique; the id is). A DNS label."),
  swarm: Name.optional().describe(
    "Swarm whose endpoint the tasks call; it reaches them as `SWARM_ENDPOINT`.",
  ),
  backendId: Name.optional().describe(
    "Backend to run on; the swarm's, or the project's only backend (of `backendType`, when given), when absent.",
  ),
  backendType: BackendType.optional().describe(
    "Type of backend the job must run on (`slurm`, `lepton`, `eks`, `workers`): never another type. With no `backendId`, the project's only backend of this type.",
  ),
  image: Image.optional().describe("Container image; the backend's default runtime when absent."),
  command: Command.describe(
    'Command as an argv array, e.g. `["python", "infer.py"]`; no shell unless you write `["sh", "-c", "..."]`.',
  ),
  env: Env.default({}).describe(
    "Environment of every task, besides `SHARD_ID`, `NSHARDS`, `SWARM_ENDPOINT`, `ATTEMPT_UID`.",
  ),
  resources: Resources.default({ cpu: 1, memoryMiB: 1024, gpu: 0 }).describe("Resources of each task."),
  constraints: z
    .array(Constraint)
    .max(Limits.constraints)
    .default([])
    .describe("Attribute selectors every placement must match."),
  preferences: z
    .array(Preference)
    .max(Limits.constraints)
    .default([])
    .describe("Soft preferences that rank placements."),
  tasks: z
    .number()
    .int()
    .min(1)
    .max(Limits.tasksPerJob)
    .default(1)
    .describe(`Number of tasks (shards), 1..${Limits.tasksPerJob}.`),
  coscheduling: z
    .object({
      groupBy: z
        .string()
        .max(Limits.attributeKeyLength)
        .optional()
        .describe("Attribute all tasks must share (e.g. `rack`); any placement when absent."),
    })
    .strict()
    .optional()
    .describe("Gang scheduling: all tasks are placed together or none is."),
  priority: Priority.default("batch").describe("Priority band: `production` > `interactive` > `batch`."),
  maxRetriesFailure: z
    .number()
    .int()
    .min(0)
    .max(100)
    .default(0)
    .describe("Retries of a task after it fails."),
  maxRetriesPreemption: z
    .number()
    .int()
    .min(0)
    .max(1000)
    .default(100)
    .describe("Retries of a task after preemption or worker loss."),
  maxTaskFailures: z
    .number()
    .int()
    .min(0)
    .max(Limits.tasksPerJob)
    .default(0)
    .describe("Failed tasks the job tolerates before it fails."),
  schedulingTimeoutS: z
    .number()
    .int()
    .min(1)
    .max(30 * 86_400)
    .optional()
    .describe("A task not placed within this time becomes UNSCHEDULABLE."),
  timeLimitS: z
    .number()
    .int()
    .min(1)
    .max(30 * 86_400)
    .optional()
    .describe("Wall-clock limit of each attempt."),
  labels: Labels.default({}).describe("Free-form labels."),
  batch: BatchSpec.optional().describe(
    "Batch inference: the tasks run the batch runner over `input` against the swarm; `command` is built from it.",
  ),
})

/** Retries of a batch job's shards when the request gives none: a lost shard resumes from its checkpoint. */
export const BatchRetriesDefault = 3

/** The checks of a whole job that no one field can make: its size, and a failure budget within its tasks. */
function checkWhole(spec: { tasks: number; maxTaskFailures: number }, ctx: z.RefinementCtx): void {
  bytesAtMost(Limits.specBytes)(spec, ctx)
  if (spec.maxTaskFailures > spec.tasks)
    ctx.addIssue({
      code: "custom",
      path: ["maxTaskFailures"],
      message: `must not exceed tasks (${spec.tasks})`,
    })
}

export const JobSpec = JobFields.strict().superRefine(checkWhole).openapi("JobSpec")
export type JobSpec = z.infer<typeof JobSpec>

/**
 * What `POST /v1/jobs` takes: a job spec whose `command` may be left out when `batch` builds it.
 * A batch job needs a swarm (its endpoint is where the rows go).
 */
export const JobRequest = JobFields.extend({
  command: Command.optional().describe(
    "Command as an argv array; built from `batch` when that is given, required otherwise.",
  ),
  maxRetriesFailure: z
    .number()
    .int()
    .min(0)
    .max(100)
    .optional()
    .describe(
      `Retries of a task after it fails: ${BatchRetriesDefault} for a batch job (its shards resume from their checkpoints, so a retry is cheap), else 0.`,
    ),
})
  .strict()
  .superRefine((spec, ctx) => {
    checkWhole(spec, ctx)
    if (!spec.command && !spec.batch)
      ctx.addIssue({
        code: "custom",
        path: ["command"],
        message: 'is required: send a command such as ["python", "infer.py"], or a `batch` block',
      })
    if (spec.command && spec.batch)
      ctx.addIssue({
        code: "custom",
        path: ["command"],
        message:
          "is built from `batch` for a batch job: leave it out, or drop `batch` to run your own command",
      })
    if (spec.batch && !spec.swarm)
      ctx.addIssue({
        code: "custom",
        path: ["swarm"],
        message: "is required for a batch job: name the swarm whose endpoint serves the rows",
      })
  })
  .openapi("JobRequest")
export type JobRequest = z.infer<typeof JobRequest>

/** The stored spec of a request: a batch job's command is its runner's, and its shards retry by default. */
export function specOf(request: JobRequest): JobSpec {
  return {
    ...request,
    command: request.command ?? batchCommand(request.batch!),
    maxRetriesFailure: request.maxRetriesFailure ?? (request.batch ? BatchRetriesDefault : 0),
  }
}

export const Attempt = z
  .object({
    attemptUid: z.string().describe("Unique id of this try; every substrate object is named from it."),
    state: AttemptState.describe("State of this try."),
    exitCode: z.number().int().optional().describe("Exit code, once finished."),
    reason: z
      .string()
      .optional()
      .describe("Why it ended, e.g. `exit_code`, `timeout`, `preempted`, `worker_lost`, `cancelled`."),
    message: z
      .string()
      .optional()
      .describe(
        "What happened, in words, e.g. `sbatch: error: invalid partition specified: gpu2` or `cancelled by uid 0 on the cluster, not through swarmplane`.",
      ),
    target: z
      .string()
      .optional()
      .describe("Where it runs: a worker id, a Slurm job id, a pod or Lepton job name."),
    workerId: z.string().optional().describe("Worker that runs it (`workers` backends)."),
    submission: z
      .string()
      .optional()
      .describe(
        "Delegated backends: the submission it goes out in (`<name>#<array index>`), persisted before it is sent.",
      ),
    submitFailures: z
      .number()
      .int()
      .optional()
      .describe(
        "Delegated backends: tries to submit it that did not reach the cluster (unreachable, refused login); retried with backoff.",
      ),
    retryAt: Timestamp.optional().describe("Delegated backends: when the next try to submit it is due."),
    endpoint: z.string().optional().describe("Where a replica or router listens, once it does."),
    ready: z.boolean().optional().describe("For replicas and routers: the health check passes."),
    progress: z
      .object({
        total: z.number().int().optional().describe("Items in all, when known."),
        done: z.number().int().describe("Items done."),
        failed: z.number().int().describe("Items that failed for good."),
        retries: z.number().int().optional().describe("Requests retried so far."),
        resent: z
          .number()
          .int()
          .optional()
          .describe("Items an earlier attempt had sent but not checkpointed, which this one sent again."),
      })
      .optional()
      .describe("What the attempt reported of its work (rows of a batch shard)."),
    createdAt: Timestamp.describe("When the attempt was minted."),
    startedAt: Timestamp.optional().describe("When it started running."),
    finishedAt: Timestamp.optional().describe("When it ended."),
  })
  .openapi("Attempt")
export type Attempt = z.infer<typeof Attempt>

export const Task = z
  .object({
    index: z.number().int().describe("Task index, 0..tasks-1; the task's `SHARD_ID`."),
    state: TaskState.describe("Task state."),
    pendingReason: z
      .string()
      .optional()
      .describe(
        "Why a PENDING task is not placed yet, e.g. `needs 8 gpu, largest free is 4`, or why an ASSIGNED one waits in its cluster's queue, e.g. `Slurm: waiting for resources`.",
      ),
    attempts: z
      .array(Attempt)
      .describe("Tries of this task, oldest first (the last is current); the newest 50 are kept."),
    retryAt: Timestamp.optional().describe(
      "When a task sent back to PENDING after a failure may be placed again: failing attempts back off (2 s doubling, at most 5 min).",
    ),
    stopping: z
      .object({
        attemptUid: z.string().describe("The attempt being stopped (the task's last)."),
        since: Timestamp.describe("When the control plane ended it."),
      })
      .optional()
      .describe(
        "An attempt the control plane ended (a cancel, a gang retry, a preemption) that may still run on its substrate. Until the substrate confirms it stopped (its worker no longer runs it, Slurm no longer lists it) the task is not placed again, and the stop is sent again on every pass.",
      ),
    failureCount: z.number().int().describe("Failures so far (against `maxRetriesFailure`)."),
    preemptionCount: z
      .number()
      .int()
      .describe("Preemptions and worker losses so far (against `maxRetriesPreemption`)."),
    updatedAt: Timestamp.describe("When the task last changed."),
  })
  .openapi("Task")
export type Task = z.infer<typeof Task>

export const TaskCounts = z.partialRecord(TaskState, z.number().int()).openapi("TaskCounts")
export type TaskCounts = z.infer<typeof TaskCounts>

export const Job = z
  .object({
    id: z.string().describe("Job id."),
    project: Name.describe("Project the job belongs to."),
    spec: JobSpec.describe("What was submitted (with defaults filled in)."),
    backendId: Name.describe("Backend the job runs on."),
    status: JobStatus.describe("PENDING, RUNNING, SUCCEEDED, FAILED or CANCELLED, derived from the tasks."),
    counts: TaskCounts.describe("Tasks per state."),
    cancelRequested: z.boolean().describe("True once cancel was asked for."),
    serving: z
      .object({
        swarm: Name.describe("The swarm this job serves."),
        generation: z.number().int().describe("The swarm generation it serves."),
        replicas: z
          .number()
          .int()
          .describe(
            "Tasks 0..replicas-1 are replicas; task `replicas` is the router (a swarm's router job has 0 replicas and 1 task).",
          ),
        slot: z.number().int().optional().describe("For a replica job: the swarm's replica number it runs."),
        healthPath: z.string().describe("Path of the replicas' health check."),
        routerUrl: z
          .string()
          .optional()
          .describe(
            "The swarm's URL when the job was made: its router listens there again (the port; the host when it can).",
          ),
      })
      .optional()
      .describe(
        "Set on the internal jobs that serve a swarm on a `workers` backend: its router (one task) and each of its replicas (one task each).",
      ),
    message: z.string().optional().describe("Latest detail, e.g. why the job failed."),
    pendingReason: z
      .string()
      .optional()
      .describe("Why the job's pending tasks are not placed yet, e.g. `needs 8 gpu, largest free is 4`."),
    createdAt: Timestamp.describe("When the job was submitted."),
    updatedAt: Timestamp.describe("When it last changed."),
    finishedAt: Timestamp.optional().describe("When it reached a final status."),
  })
  .openapi("Job")
export type Job = z.infer<typeof Job>

export const JobDetail = Job.extend({
  tasks: z
    .array(Task)
    .describe("The job's tasks with their attempts, by index; the first 1000 (see `tasksNextCursor`)."),
  tasksNextCursor: z
    .string()
    .optional()
    .describe(
      "Present when the job has more tasks: pass as `cursor` to `GET /v1/jobs/{id}/tasks` for the rest.",
    ),
}).openapi("JobDetail")

export const JobListQuery = z.object({
  status: JobStatus.optional().describe("Only jobs with this status."),
  swarm: Name.optional().describe("Only jobs against this swarm."),
})
