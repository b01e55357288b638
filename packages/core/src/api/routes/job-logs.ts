/**
 * `GET /v1/jobs/{id}/logs`: the output tails of many tasks of a job in one request, which a backend
 * that can answers in one round trip (one SSH command for a Slurm job's tasks), so `job logs` of a
 * whole job costs one command, not one per task.
 */
import { createRoute } from "@hono/zod-openapi"
import { fetchesManyLogs, type TaskRef } from "../../backends/protocol"
import { withBackend } from "../../backends/registry"
import { z } from "../../model/zod"
import { mapLimit } from "../../util/concurrency"
import { NotFoundError, ValidationError } from "../../util/errors"
import type { ApiDeps } from "../context"
import { type App, errors, idParam, jsonResponse, security } from "../openapi-helpers"

/** Tasks in one answer, and lines in all: bounds the answer well inside Lambda's 6 MB. */
export const MaxLogTasks = 256
export const MaxLogLines = 100_000

const TaskLogs = z
  .object({
    items: z
      .array(
        z.object({
          task: z.number().int().describe("Task index."),
          attemptUid: z.string().describe("Attempt the output belongs to; empty before the first."),
          lines: z.array(z.string()).describe("The last lines, oldest first."),
          truncated: z.boolean().describe("True when older output was left out."),
          updatedAt: z.string().optional().describe("When the output was read."),
        }),
      )
      .describe("One entry per task asked for, in task order."),
  })
  .openapi("TaskLogs")

export function jobLogsRoutes(app: App, deps: ApiDeps): void {
  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/jobs/{id}/logs",
      tags: ["jobs"],
      summary: "The last lines of many tasks' output (their current attempts) in one request",
      security,
      request: {
        params: idParam("Job"),
        query: z.object({
          tail: z.coerce
            .number()
            .int()
            .min(1)
            .max(10_000)
            .default(100)
            .describe("Lines from the end of each task's output."),
          tasks: z
            .string()
            .regex(/^\d+(,\d+)*$/, { message: "task indexes separated by commas, e.g. 0,1,5" })
            .optional()
            .describe(`Task indexes, e.g. \`0,1,5\`; the first ${MaxLogTasks} tasks when absent.`),
        }),
      },
      responses: { 200: jsonResponse(TaskLogs, "The output tails."), ...errors(400, 401, 404) },
    }),
    async (c) => {
      const project = c.get("caller").project
      const { id } = c.req.valid("param")
      const { tail, tasks: wanted } = c.req.valid("query")
      const loaded = await deps.repos.jobs.load(project, id)
      if (!loaded) throw new NotFoundError("job", id)
      const indexes = wanted ? [...new Set(wanted.split(",").map(Number))] : undefined
      if (indexes && indexes.length > MaxLogTasks)
        throw new ValidationError([
          { path: "query.tasks", message: `at most ${MaxLogTasks} tasks at a time` },
        ])
      const byIndex = new Map(loaded.tasks.map((t) => [t.data.index, t]))
      const missing = (indexes ?? []).filter((i) => !byIndex.has(i))
      if (missing.length)
        throw new ValidationError([
          {
            path: "query.tasks",
            message: `job ${id} has no task ${missing.join(", ")} (it has 0..${loaded.tasks.length - 1})`,
          },
        ])
      const chosen = indexes ? indexes.map((i) => byIndex.get(i)!) : loaded.tasks.slice(0, MaxLogTasks)
      if (chosen.length * tail > MaxLogLines)
        throw new ValidationError([
          {
            path: "query.tail",
            message: `${chosen.length} tasks × ${tail} lines is over ${MaxLogLines}: ask for fewer tasks or a shorter tail`,
          },
        ])
      const backend = await deps.repos.backends.get(project, loaded.job.data.backendId)
      if (!backend) throw new NotFoundError("backend", loaded.job.data.backendId)
      const refs: TaskRef[] = chosen.map((task) => ({ job: loaded.job.data, task }))
      const tails = await withBackend(backend, deps, (b) =>
        fetchesManyLogs(b) ? b.fetchLogsMany(refs, tail) : mapLimit(refs, 8, (ref) => b.fetchLogs(ref, tail)),
      )
      return c.json({ items: tails.map((t, i) => ({ task: chosen[i]!.data.index, ...t })) }, 200)
    },
  )
}
