/**
 * `job logs ID [--task N] [--tail N] [--follow]`: the output of a job's tasks (their current
 * attempts). `--follow` polls the tail and prints only lines it has not printed yet, until the tasks
 * end; a retry (a new attempt) is announced and its output follows.
 */
import { TerminalTaskStates } from "@swarmplane/core/contract"
import type { Command } from "commander"
import pMap from "p-map"
import type { Client, JobDetail, LogTail, Task } from "../client"
import type { Ctx } from "../context"
import { CliError, ExitCode, UsageError } from "../errors"
import { client, common, examples, integer, jsonOption, note, out, outputOption, show } from "../kit"
import { sleep } from "../progress"

const PollMs = 1000
/** Lines fetched per poll while following: enough overlap to find where the last poll ended. */
const FollowWindow = 1000
/** Tasks followed at once at most (each is one request per poll). */
const FollowTasks = 16
const Terminal = new Set<string>(TerminalTaskStates)

export function jobLogsCommand(job: Command, ctx: Ctx): void {
  examples(
    job
      .command("logs")
      .description("the output of a job's tasks (every task, or one with --task)")
      .argument("<id>", "job id")
      .option("-t, --task <index>", "only this task", integer(0))
      .option("--tail <lines>", "lines from the end of each task's output", integer(1, 10_000), 100)
      .option("--attempt <uid>", "an earlier attempt's output (with --task)")
      .option("-f, --follow", "keep printing new output until the tasks end")
      .addOption(outputOption())
      .addOption(jsonOption()),
    [
      "swarmplane job logs job-01hx... --task 1",
      "swarmplane job logs job-01hx... --tail 20",
      "swarmplane job logs job-01hx... --task 0 --follow",
    ],
  ).action(
    async (
      id: string,
      o: { task?: number; tail: number; attempt?: string; follow?: boolean },
      cmd: Command,
    ) => {
      const { format } = common(cmd)
      if (o.attempt && o.task === undefined)
        throw new UsageError("--attempt needs --task", "add --task INDEX")
      const api = await client(ctx, cmd)
      const detail = await api.getJob(id)
      const tasks = pick(detail, o.task)
      const prefix = (task: Task) => (tasks.length > 1 ? `[${task.index}] ` : "")
      if (o.follow) {
        if (tasks.length > FollowTasks)
          throw new UsageError(
            `job ${id} has ${tasks.length} tasks: follow at most ${FollowTasks}`,
            "pick one with --task INDEX",
          )
        return follow(ctx, api, id, tasks, o.tail, prefix)
      }
      const tails = await tailsOf(api, id, tasks, o.tail, o.attempt)
      if (format !== "table")
        return show(
          ctx,
          format,
          tails.map((tail, i) => ({ task: tasks[i]?.index, ...tail })),
          () => "",
        )
      tails.forEach((tail, i) => {
        const task = tasks[i] as Task
        if (!tail.attemptUid && tasks.length === 1)
          note(
            ctx,
            `task ${task.index} has not started yet (${task.state}${task.pendingReason ? `: ${task.pendingReason}` : ""})`,
          )
        for (const line of tail.lines) out(ctx, `${prefix(task)}${line}`)
      })
    },
  )
}

/** Tasks asked for in one request to the job's logs (the API's bound). */
const LogsPerRequest = 256

/**
 * The tails of these tasks: one request for many (one command on a Slurm cluster), one per task only
 * for an earlier attempt's output, which is asked for by task.
 */
async function tailsOf(
  api: Client,
  id: string,
  tasks: Task[],
  tail: number,
  attempt?: string,
): Promise<LogTail[]> {
  if (attempt || tasks.length === 1)
    return pMap(tasks, (task) => api.taskLogs(id, task.index, { tail, ...(attempt ? { attempt } : {}) }), {
      concurrency: 8,
    })
  const lines = Math.max(1, Math.min(tail, Math.floor(100_000 / Math.min(tasks.length, LogsPerRequest))))
  const chunks: Task[][] = []
  for (let i = 0; i < tasks.length; i += LogsPerRequest) chunks.push(tasks.slice(i, i + LogsPerRequest))
  const answers = await pMap(
    chunks,
    (chunk) => api.jobLogs(id, { tail: lines, tasks: chunk.map((t) => t.index) }),
    {
      concurrency: 2,
    },
  )
  return answers.flat()
}

/** The tasks to show: one by index, or all of the detail's (the first 1000). */
function pick(detail: JobDetail, index: number | undefined): Task[] {
  if (index === undefined) return detail.tasks
  const task = detail.tasks.find((t) => t.index === index)
  if (!task)
    throw new CliError(
      `job ${detail.id} has no task ${index} (it has ${detail.spec.tasks}: 0..${(detail.spec.tasks ?? 1) - 1})`,
      ExitCode.notFound,
      `see its tasks with: swarmplane job status ${detail.id}`,
    )
  return [task]
}

/**
 * The lines of `cur` after where `prev` ends, both being tails of the same output. The largest
 * overlap wins (ambiguous only for repeated lines); with no overlap at all, every line of `cur` is new.
 */
export function newLines(prev: string[], cur: string[]): string[] {
  if (!prev.length) return cur
  for (let end = cur.length; end > 0; end--) {
    const overlap = Math.min(end, prev.length)
    let same = true
    for (let i = 1; i <= overlap && same; i++) same = cur[end - i] === prev[prev.length - i]
    if (same) return cur.slice(end)
  }
  return cur
}

async function follow(
  ctx: Ctx,
  api: Client,
  id: string,
  tasks: Task[],
  tail: number,
  prefix: (task: Task) => string,
): Promise<void> {
  const seen = new Map<number, LogTail>()
  let first = true
  let active = tasks
  for (;;) {
    const states = new Map((await api.getJob(id)).tasks.map((t) => [t.index, t.state]))
    const tails = await tailsOf(api, id, active, first ? tail : FollowWindow)
    tails.forEach((cur, i) => {
      const task = active[i] as Task
      const prev = seen.get(task.index)
      if (prev && prev.attemptUid !== cur.attemptUid && cur.attemptUid)
        note(ctx, ctx.err.dim(`--- task ${task.index}: new attempt ${cur.attemptUid} ---`))
      const before = prev && prev.attemptUid === cur.attemptUid ? prev.lines : []
      for (const line of newLines(before, cur.lines)) out(ctx, `${prefix(task)}${line}`)
      seen.set(task.index, cur)
    })
    first = false
    // A task that had ended before this poll's logs were read has printed everything it will print.
    active = active.filter((task) => !Terminal.has(states.get(task.index) ?? "PENDING"))
    if (!active.length) return
    await sleep(PollMs)
  }
}
