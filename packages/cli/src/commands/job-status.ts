/**
 * `job status ID [--watch]`: the job with a progress bar and its per-task table; with `--watch`, a live
 * progress line (stderr) until the job ends, then the final status. Exit 0 when it SUCCEEDED, 8 when
 * it ended FAILED or CANCELLED, 7 when `--timeout` passed first.
 */
import type { Command } from "commander"
import type { Client, JobDetail } from "../client"
import type { Ctx } from "../context"
import { CliError, ExitCode } from "../errors"
import { client, common, examples, integer, outputOption, show } from "../kit"
import type { Format } from "../output"
import { progress, sleep } from "../progress"
import { jobLine, jobStatus } from "../views"

const Ended = new Set(["SUCCEEDED", "FAILED", "CANCELLED"])
const PollMs = 1000

export function jobStatusCommand(job: Command, ctx: Ctx): void {
  examples(
    job
      .command("status")
      .description("a job's progress and tasks: index, state, attempts, exit code, pending reason")
      .argument("<id>", "job id")
      .option("-w, --watch", "follow until the job ends (exit 0 when SUCCEEDED, 8 when FAILED/CANCELLED)")
      .option("--timeout <seconds>", "with --watch: give up after this long (exit 7)", integer(1))
      .addOption(outputOption()),
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
    show(ctx, format, detail, () => jobStatus(ctx.out, detail, ctx.io.stdout.isTTY))
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
      live.update(jobLine(ctx.err, detail, ctx.io.stderr.isTTY))
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
  show(ctx, options.format, detail, () => jobStatus(ctx.out, detail, ctx.io.stdout.isTTY))
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
