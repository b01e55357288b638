/**
 * Job commands: `job submit` (a command, or the batch form: the batch runner over `--input`), `job
 * list`, `job cancel`, `job events` (status and logs have their own modules).
 */
import type { Command } from "commander"
import { Option } from "commander"
import { allPages, type Client, type Job, type JobBody, type JobStatus } from "../client"
import type { Ctx } from "../context"
import { CliError, ExitCode, UsageError } from "../errors"
import { formatIssue, validateBody } from "../files"
import {
  client,
  collect,
  common,
  examples,
  integer,
  jsonOption,
  note,
  out,
  outputOption,
  pairs,
  positive,
  readSpec,
  show,
} from "../kit"
import { Origins } from "../normalize"
import { progress, sleep } from "../progress"
import { eventTable, jobTable } from "../views"
import { applyBatch, type BatchFlags, batchOptions, splitOutput, submitOutputOption } from "./job-batch"
import { jobLogsCommand } from "./job-logs"
import { jobStatusCommand, watchJob } from "./job-status"

const Statuses: JobStatus[] = ["PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"]
const Ended = new Set<string>(["SUCCEEDED", "FAILED", "CANCELLED"])
const CancelPollMs = 1000

/** `9996 of 10000 tasks ended (9996 killed)`: how far a cancel got, from the job's counts. */
function stoppedText(job: Job): string {
  const ended = Object.entries(job.counts)
    .filter(([state]) => !["PENDING", "ASSIGNED", "BUILDING", "RUNNING"].includes(state))
    .reduce((n, [, count]) => n + (count ?? 0), 0)
  return `${ended} of ${job.spec.tasks} tasks ended (${job.counts.KILLED ?? 0} killed)`
}

/**
 * Follow a cancelled job until it has come to rest (the control loop kills a large job's tasks a page
 * at a time), with a progress line on stderr. Past `timeoutS`, exit 7: the cancel goes on without us.
 */
async function waitCancelled(ctx: Ctx, api: Client, id: string, timeoutS?: number): Promise<Job> {
  const deadline = timeoutS ? Date.now() + timeoutS * 1000 : Number.POSITIVE_INFINITY
  const live = progress(ctx.io.stderr, ctx.err)
  try {
    for (;;) {
      const job = await api.getJob(id)
      live.update(`cancelling job ${id}: ${stoppedText(job)}`)
      if (Ended.has(job.status)) return job
      if (Date.now() >= deadline)
        throw new CliError(
          `timed out after ${timeoutS} s waiting for job ${id} to be cancelled (${stoppedText(job)})`,
          ExitCode.timeout,
          `the cancel goes on; follow it with: swarmplane job status ${id} --watch`,
        )
      await sleep(Math.min(CancelPollMs, Math.max(0, deadline - Date.now())))
    }
  } finally {
    live.done()
  }
}

interface SubmitFlags extends BatchFlags {
  file?: string
  swarm?: string
  tasks?: number
  shards?: number
  gpus?: number
  gpuType?: string
  cpus?: number
  memoryMib?: number
  image?: string
  env?: string[]
  label?: string[]
  backend?: string
  name?: string
  priority?: string
  maxRetries?: number
  timeLimit?: number
  idempotencyKey?: string
  watch?: boolean
  timeout?: number
}

export function jobCommands(program: Command, ctx: Ctx): void {
  const job = program.command("job").description("submit, follow and cancel batch jobs")

  const submit = job
    .command("submit")
    .description(
      "submit a job of N tasks (shards) running a command, or the batch runner over a dataset (--input); prints its id",
    )
    .argument("[command...]", "the command of every task, after -- (argv, no shell unless you write sh -c)")
    .option("-f, --file <file>", "job file, YAML or JSON (- reads stdin); flags override its fields")
    .option("--swarm <name>", "swarm whose endpoint the tasks call (SWARM_ENDPOINT)")
    .option("--tasks <n>", "number of tasks; each gets SHARD_ID and NSHARDS", integer(1))
    .option(
      "--shards <n>",
      "the same as --tasks (for batch jobs: each task runs one shard of the rows)",
      integer(1),
    )
    .option("--gpus <n>", "GPUs per task", integer(0))
    .option("--gpu-type <type>", "GPU model per task, e.g. h100")
    .option("--cpus <n>", "CPU cores per task (fractions allowed)", positive)
    .option("--memory-mib <mib>", "memory per task, MiB", integer(1))
    .option("--image <image>", "container image")
    .option(
      "-e, --env <KEY=VALUE>",
      "environment variable (repeatable; KEY alone copies it from here)",
      collect,
    )
    .option("--label <KEY=VALUE>", "label (repeatable)", collect)
    .option("--backend <id>", "backend to run on")
    .option("--name <name>", "job name (not unique; the id is)")
    .addOption(
      new Option("--priority <band>", "priority band").choices(["production", "interactive", "batch"]),
    )
    .option("--max-retries <n>", "retries of a task after it fails", integer(0))
    .option("--time-limit <seconds>", "wall-clock limit of each attempt", integer(1))
    .option("--idempotency-key <key>", "makes the submit safe to repeat: the same key returns the same job")
    .option("--watch", "follow the job until it ends (exit 0 when SUCCEEDED, 8 when FAILED/CANCELLED)")
    .option("--timeout <seconds>", "with --watch: give up after this long (exit 7)", integer(1))
    .addOption(submitOutputOption())
  examples(batchOptions(submit), [
    "swarmplane job submit --swarm demo --tasks 4 -- sh -c 'echo shard $SHARD_ID of $NSHARDS'",
    "swarmplane job submit --tasks 8 --gpus 1 -e HF_TOKEN --image vllm/vllm-openai -- python infer.py",
    "swarmplane job submit --swarm demo --input prompts.jsonl --output results --shards 8 --concurrency 16",
    "swarmplane job submit -f job.yaml --watch",
    "JOB=$(swarmplane job submit --idempotency-key nightly-2024-06-01 -f job.yaml)",
  ]).action(async (command: string[], o: SubmitFlags, cmd: Command) => {
    splitOutput(cmd, o)
    const { format } = common(cmd)
    const base = o.file ? await readSpec(ctx, o.file, "job", "swarmplane job submit") : undefined
    const origins = base?.origins ?? new Origins()
    const body: Record<string, unknown> = { ...base?.body }
    const resources: Record<string, unknown> = { ...(body.resources as Record<string, unknown> | undefined) }
    const flag = (field: string, value: unknown, name: string, into = body, path = [field]) => {
      if (value === undefined) return
      into[field] = value
      origins.set(path, [`--${name}`])
    }
    if (o.tasks !== undefined && o.shards !== undefined)
      throw new UsageError("--shards and --tasks are the same: give one", `e.g. --shards ${o.shards}`)
    flag("swarm", o.swarm, "swarm")
    flag("tasks", o.tasks, "tasks")
    flag("tasks", o.shards, "shards")
    flag("image", o.image, "image")
    flag("backendId", o.backend, "backend")
    flag("name", o.name, "name")
    flag("priority", o.priority, "priority")
    flag("maxRetriesFailure", o.maxRetries, "max-retries")
    flag("timeLimitS", o.timeLimit, "time-limit")
    flag("gpu", o.gpus, "gpus", resources, ["resources", "gpu"])
    flag("gpuType", o.gpuType, "gpu-type", resources, ["resources", "gpuType"])
    flag("cpu", o.cpus, "cpus", resources, ["resources", "cpu"])
    flag("memoryMiB", o.memoryMib, "memory-mib", resources, ["resources", "memoryMiB"])
    if (Object.keys(resources).length) body.resources = resources
    if (o.env) body.env = { ...(body.env as object | undefined), ...pairs(o.env, "--env", ctx.env) }
    if (o.label) body.labels = { ...(body.labels as object | undefined), ...pairs(o.label, "--label", {}) }
    if (command.length) flag("command", command, "command")
    applyBatch(body, origins, o, process.cwd())
    if (!body.command && !body.batch)
      throw new UsageError(
        "no command to run",
        "put it after --, e.g. swarmplane job submit --tasks 4 -- python infer.py, give command in a job file (-f), or run the batch runner with --input FILE --output DIR",
      )
    const issues = validateBody("job", body, origins)
    if (issues.length) {
      for (const issue of issues) note(ctx, formatIssue("swarmplane job submit", issue))
      throw new CliError(
        `the job is not valid: ${issues.length} error${issues.length > 1 ? "s" : ""} (above)`,
        ExitCode.invalid,
      )
    }
    const api = await client(ctx, cmd)
    const submitted = await api.submitJob(body as JobBody, o.idempotencyKey)
    if (o.watch)
      return watchJob(ctx, api, submitted.id, { format, ...(o.timeout ? { timeoutS: o.timeout } : {}) })
    if (format !== "table") return show(ctx, format, submitted, () => "")
    out(ctx, submitted.id)
    if (ctx.io.stdout.isTTY)
      note(ctx, ctx.err.dim(`follow it with: swarmplane job status ${submitted.id} --watch`))
  })

  examples(
    job
      .command("list")
      .alias("ls")
      .description("list jobs, newest first")
      .addOption(new Option("--status <status>", "only jobs with this status").choices(Statuses))
      .option("--swarm <name>", "only jobs against this swarm")
      .option("--limit <n>", "at most this many jobs", integer(1), 50)
      .option("--all", "every job (follows all pages)")
      .addOption(outputOption())
      .addOption(jsonOption()),
    [
      "swarmplane job list",
      "swarmplane job list --status FAILED --swarm demo",
      "swarmplane job list --all -o json",
    ],
  ).action(async (o: { status?: JobStatus; swarm?: string; limit: number; all?: boolean }, cmd: Command) => {
    const { format } = common(cmd)
    const api = await client(ctx, cmd)
    const filter = { ...(o.status ? { status: o.status } : {}), ...(o.swarm ? { swarm: o.swarm } : {}) }
    const { items, more } = await allPages(
      (page) => api.listJobs({ ...filter, ...page }),
      o.all ? undefined : o.limit,
    )
    show(ctx, format, items, () => (items.length ? jobTable(ctx.out, items) : "no jobs"))
    if (more && format === "table" && ctx.io.stderr.isTTY)
      note(ctx, ctx.err.dim(`more jobs: --all lists them all, or --limit N`))
  })

  jobStatusCommand(job, ctx)
  jobLogsCommand(job, ctx)

  examples(
    job
      .command("cancel")
      .description(
        "cancel a job and wait until it has come to rest: pending tasks killed, running ones stopped (a large job's tasks a page at a time)",
      )
      .argument("<id>", "job id")
      .option("--no-wait", "return once the cancel is recorded; the control loop carries it out")
      .option("--timeout <seconds>", "stop waiting after this long (exit 7); the cancel goes on", integer(1))
      .addOption(outputOption())
      .addOption(jsonOption()),
    ["swarmplane job cancel job-01hx...", "swarmplane job cancel job-01hx... --no-wait"],
  ).action(async (id: string, o: { wait: boolean; timeout?: number }, cmd: Command) => {
    const { format } = common(cmd)
    const api = await client(ctx, cmd)
    const requested = await api.cancelJob(id)
    const alreadyEnded = Ended.has(requested.status) && !requested.cancelRequested
    const job =
      o.wait && !Ended.has(requested.status) ? await waitCancelled(ctx, api, id, o.timeout) : requested
    if (format !== "table") return show(ctx, format, job, () => "")
    if (!ctx.io.stdout.isTTY) return out(ctx, job.id)
    if (alreadyEnded) return out(ctx, `job ${id} already ended ${job.status}: nothing to cancel`)
    if (!Ended.has(job.status))
      return out(
        ctx,
        `cancel requested for job ${id} (${job.status}, ${stoppedText(job)}); follow it with: swarmplane job status ${id} --watch`,
      )
    out(ctx, `job ${id} ${job.status}: ${stoppedText(job)}`)
  })

  examples(
    job
      .command("events")
      .description("what happened to a job and its tasks, oldest first")
      .argument("<id>", "job id")
      .option("--limit <n>", "only the last N events", integer(1))
      .addOption(outputOption())
      .addOption(jsonOption()),
    ["swarmplane job events job-01hx...", "swarmplane job events job-01hx... --limit 20"],
  ).action(async (id: string, o: { limit?: number }, cmd: Command) => {
    const { format } = common(cmd)
    const api = await client(ctx, cmd)
    const { items } = await allPages((page) => api.jobEvents(id, page))
    const shown = o.limit ? items.slice(-o.limit) : items
    show(ctx, format, shown, () => (shown.length ? eventTable(ctx.out, shown) : "no events"))
  })
}
