/**
 * `job status ID [--watch]`: the job with a progress bar and its per-task table, and, when its tasks
 * report progress (batch shards), the rows of each shard and in all; with `--watch`, a live progress
 * line (stderr) until the job ends, then the final status. Exit 0 when it SUCCEEDED, 8 when it ended
 * FAILED or CANCELLED, 7 when `--timeout` passed first.
 */
import type { Command } from "commander"
import type { Client, JobDetail, Task } from "../client"
import type { Ctx } from "../context"
import { CliError, ExitCode } from "../errors"
import { client, common, examples, integer, jsonOption, outputOption, show } from "../kit"
import { type Format, type Paint, state, table } from "../output"
import { progress, sleep } from "../progress"
import { jobLine, jobStatus } from "../views"

const Ended = new Set(["SUCCEEDED", "FAILED", "CANCELLED"])
const PollMs = 1000

export function jobStatusCommand(job: Command, ctx: Ctx): void {
  examples(
    job
      .command("status")
      .description(
        "a job's progress and tasks: index, state, attempts, exit code, pending reason; rows done per shard of a batch job",
      )
      .argument("<id>", "job id")
      .option("-w, --watch", "follow until the job ends (exit 0 when SUCCEEDED, 8 when FAILED/CANCELLED)")
      .option("--timeout <seconds>", "with --watch: give up after this long (exit 7)", integer(1))
      .addOption(outputOption())
      .addOption(jsonOption()),
    [
      "swarmplane job status job-01hx...",
      "swarmplane job status job-01hx... --watch",
      "swarmplane job status job-01hx... -o json",
    ],
  ).action(async (id: string, o: { watch?: boolean; timeout?: number }, cmd: Command) => {
    const { format } = common(cmd)
    const api = await client(ctx, cmd)
    if (o.watch) return watchJob(ctx, api, id, { format, ...(o.timeout ? { timeoutS: o.timeout } : {}) })
    const detail = await api.getJob(id)
    show(ctx, format, detail, () => statusView(ctx.out, detail, ctx.io.stdout.isTTY))
  })
}

/** Follow a job until it ends; print its final status; set the exit code from how it ended. */
export async function watchJob(
  ctx: Ctx,
  api: Client,
  id: string,
  options: { format: Format; timeoutS?: number },
): Promise<void> {
  const deadline = options.timeoutS ? Date.now() + options.timeoutS * 1000 : Number.POSITIVE_INFINITY
  const live = progress(ctx.io.stderr, ctx.err)
  let detail: JobDetail
  try {
    for (;;) {
      detail = await api.getJob(id)
      const rows = rowTotals(detail)
      live.update(`${jobLine(ctx.err, detail, ctx.io.stderr.isTTY)}${rows ? `, rows ${rowsText(rows)}` : ""}`)
      if (Ended.has(detail.status)) break
      if (Date.now() >= deadline)
        throw new CliError(
          `timed out after ${options.timeoutS} s waiting for job ${id} to end (it is ${detail.status})`,
          ExitCode.timeout,
          `keep following it with: swarmplane job status ${id} --watch`,
        )
      await sleep(Math.min(PollMs, Math.max(0, deadline - Date.now())))
    }
  } finally {
    live.done()
  }
  show(ctx, options.format, detail, () => statusView(ctx.out, detail, ctx.io.stdout.isTTY))
  if (detail.status === "SUCCEEDED") return
  const failed = detail.tasks.find((t) => t.state !== "SUCCEEDED" && t.state !== "KILLED") ?? detail.tasks[0]
  throw new CliError(
    `job ${id} ended ${detail.status}${detail.message ? `: ${detail.message}` : ""}`,
    ExitCode.ended,
    failed
      ? `see the output of task ${failed.index} with: swarmplane job logs ${id} --task ${failed.index}`
      : undefined,
  )
}

/** Most shards shown in the rows table, as in the task table; the rest are in the total. */
const ShardRows = 50

/** The job's status; with each shard's rows and their total when its tasks report progress. */
export function statusView(p: Paint, job: JobDetail, terminal: boolean): string {
  const view = jobStatus(p, job, terminal)
  const totals = rowTotals(job)
  if (!totals) return view
  const interesting =
    job.tasks.length > ShardRows ? job.tasks.filter((task) => task.state !== "SUCCEEDED") : job.tasks
  const shown = interesting.slice(0, ShardRows)
  const rows = table(
    p,
    ["shard", "state", "attempts", "done", "failed", "total", "re-sent", "retries"],
    shown.map((task) => {
      const now = progressOf(task)
      return [
        task.index,
        state(p, task.state),
        task.attempts.length,
        now?.done,
        now?.failed,
        now?.total,
        resentOf(task) || undefined,
        now?.retries,
      ]
    }),
  )
  const hidden = job.tasks.length - shown.length
  const more = hidden > 0 ? p.dim(`... ${hidden} more shards not shown (in the total)\n`) : ""
  const partial = job.tasksNextCursor ? ` (first ${job.tasks.length} shards)` : ""
  return `${view}\n${rows}${more}${p.bold("Rows:")} ${rowsText(totals)}${partial}\n`
}

/** Rows a task's attempts sent again because an earlier attempt had not checkpointed them. */
export function resentOf(task: Task): number {
  return task.attempts.reduce((n, a) => n + (a.progress?.resent ?? 0), 0)
}

/** What the latest attempt of a task reported of its work, if anything. */
export function progressOf(task: Task): NonNullable<Task["attempts"][number]["progress"]> | undefined {
  return task.attempts.at(-1)?.progress
}

export interface RowTotals {
  done: number
  failed: number
  /** Unknown while any shard has not reported its total. */
  total?: number
  retries?: number
  /** Rows sent again by retried attempts (sent, not checkpointed, by the attempt before). */
  resent?: number
}

/** The rows of all shards, from their latest attempts; undefined when no attempt reports progress. */
export function rowTotals(job: JobDetail): RowTotals | undefined {
  if (!job.tasks.some((task) => task.attempts.some((a) => a.progress))) return undefined
  const sum: RowTotals = { done: 0, failed: 0, total: 0 }
  for (const task of job.tasks) {
    const now = progressOf(task)
    sum.done += now?.done ?? 0
    sum.failed += now?.failed ?? 0
    sum.total = now?.total === undefined || sum.total === undefined ? undefined : sum.total + now.total
    if (now?.retries !== undefined) sum.retries = (sum.retries ?? 0) + now.retries
    const resent = resentOf(task)
    if (resent) sum.resent = (sum.resent ?? 0) + resent
  }
  return sum
}

/** `1200/5000 done (24%), 3 failed, 40 re-sent on retry, 17 retries`: without the total while it is unknown. */
export function rowsText(t: RowTotals): string {
  const done =
    t.total === undefined
      ? `${t.done} done`
      : `${t.done}/${t.total} done${t.total ? ` (${Math.floor((t.done / t.total) * 100)}%)` : ""}`
  const retries = t.retries === undefined ? "" : `, ${t.retries} ${t.retries === 1 ? "retry" : "retries"}`
  const resent = t.resent ? `, ${t.resent} re-sent on retry` : ""
  return `${done}, ${t.failed} failed${resent}${retries}`
}
