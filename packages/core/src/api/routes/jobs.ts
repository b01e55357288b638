/** `/v1/jobs`: submit, list, get with tasks and attempts, cancel, events. */
import { createRoute } from "@hono/zod-openapi"
import { jobSpecIssues, withBackend } from "../../backends/registry"
import { pageOf } from "../../model/api"
import { PageQuery } from "../../model/common"
import { Event } from "../../model/event"
import { Job, JobDetail, JobListQuery, JobRequest, specOf, Task } from "../../model/job"
import { z } from "../../model/zod"
import { countTasks, deriveJobStatus, withPendingReason } from "../../rules/job-status"
import { InlineCancelTasks } from "../../transitions/jobs"
import { NotFoundError, ValidationError, VisibleError } from "../../util/errors"
import { newId, seededId } from "../../util/ids"
import { requireRole } from "../auth"
import { type ApiDeps, enqueue } from "../context"
import {
  type App,
  errors,
  idempotencyHeader,
  idParam,
  jsonBody,
  jsonResponse,
  security,
} from "../openapi-helpers"
import { resolveBackend } from "../resolve"

const JobPage = pageOf(Job, "JobPage")
const EventPage = pageOf(Event, "EventPage")
const TaskPage = pageOf(Task, "TaskPage")
const LogTailBody = z
  .object({
    attemptUid: z.string().describe("Attempt the output belongs to."),
    lines: z.array(z.string()).describe("The last lines, oldest first."),
    truncated: z.boolean().describe("True when older output was left out."),
    updatedAt: z.string().optional().describe("When the worker last sent output."),
  })
  .openapi("LogTail")
/** Tasks in a job's detail; the rest are paged. Keeps the answer well inside Lambda's 6 MB. */
const DetailTasks = 1000

/** A job's counts and status from all of its tasks (what the next settle writes). */
function derived(job: Job, tasks: Task[]): Pick<Job, "counts" | "status"> {
  const counts = countTasks(tasks)
  return { counts, status: deriveJobStatus(job.spec, counts, job.spec.tasks, job.cancelRequested) }
}

export function jobRoutes(app: App, deps: ApiDeps): void {
  app.openapi(
    createRoute({
      method: "post",
      path: "/v1/jobs",
      tags: ["jobs"],
      summary: "Submit a job",
      description: "Answers 202 with the job (status PENDING); its tasks are scheduled by the control loop.",
      security,
      request: { headers: idempotencyHeader, body: jsonBody(JobRequest, "The job spec.") },
      responses: { 202: jsonResponse(Job, "Accepted."), ...errors(400, 401, 403, 409, 422) },
    }),
    async (c) => {
      const caller = c.get("caller")
      requireRole(caller, "write")
      const spec = specOf(c.req.valid("json"))
      let backendId = spec.backendId
      if (spec.swarm) {
        const swarm = await deps.repos.swarms.get(caller.project, spec.swarm)
        if (!swarm || swarm.desired === "deleted")
          throw new VisibleError(
            "swarm.not_found",
            `swarm: swarm "${spec.swarm}" does not exist in this project; create it first or leave swarm out`,
            400,
            [{ path: "swarm", message: `swarm "${spec.swarm}" does not exist` }],
          )
        backendId ??= swarm.backendId
      }
      const backend = await resolveBackend(deps, caller.project, backendId, "backendId", spec.backendType)
      const issues = jobSpecIssues(backend, spec)
      if (issues.length) throw new ValidationError(issues)
      const seed = c.get("idempotency")
      const id = seed ? seededId("job", seed.createdAt, seed.seed) : newId("job", deps.clock.now())
      const job = await deps.transitions.jobs.create(
        caller.project,
        id,
        { ...spec, backendId: backend.id },
        backend.id,
      )
      await enqueue(deps, [
        { kind: "job", project: caller.project, id, reason: "job.created", backendId: backend.id },
      ])
      return c.json(job, 202)
    },
  )

  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/jobs",
      tags: ["jobs"],
      summary: "List jobs, newest first",
      security,
      request: { query: PageQuery.extend(JobListQuery.shape) },
      responses: { 200: jsonResponse(JobPage, "A page of jobs."), ...errors(400, 401) },
    }),
    async (c) => {
      const query = c.req.valid("query")
      const page = await deps.repos.jobs.list(c.get("caller").project, query)
      return c.json({ items: page.items, ...(page.cursor ? { nextCursor: page.cursor } : {}) }, 200)
    },
  )

  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/jobs/{id}",
      tags: ["jobs"],
      summary: "Get a job with its tasks and their attempts",
      description: `Tasks come by index, the first ${DetailTasks}; \`tasksNextCursor\` pages the rest through GET /v1/jobs/{id}/tasks.`,
      security,
      request: { params: idParam("Job") },
      responses: { 200: jsonResponse(JobDetail, "The job."), ...errors(401, 404) },
    }),
    async (c) => {
      const project = c.get("caller").project
      const { id } = c.req.valid("param")
      const job = await deps.repos.jobs.get(project, id)
      if (!job) throw new NotFoundError("job", id)
      const tasks = await deps.repos.jobs.tasks(project, id, { limit: DetailTasks })
      // With every task in hand, the job's status is read from them, as the control loop will write it:
      // no window in which every task has ended and the job still reads RUNNING.
      const now = tasks.cursor ? {} : derived(job, tasks.items)
      return c.json(
        {
          ...job,
          ...now,
          tasks: tasks.items.map((t) => withPendingReason(job, t)),
          ...(tasks.cursor ? { tasksNextCursor: tasks.cursor } : {}),
        },
        200,
      )
    },
  )

  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/jobs/{id}/tasks",
      tags: ["jobs"],
      summary: "A page of a job's tasks with their attempts, by index",
      security,
      request: { params: idParam("Job"), query: PageQuery },
      responses: { 200: jsonResponse(TaskPage, "A page of tasks."), ...errors(400, 401, 404) },
    }),
    async (c) => {
      const project = c.get("caller").project
      const { id } = c.req.valid("param")
      const job = await deps.repos.jobs.get(project, id)
      if (!job) throw new NotFoundError("job", id)
      const page = await deps.repos.jobs.tasks(project, id, c.req.valid("query"))
      return c.json(
        {
          items: page.items.map((t) => withPendingReason(job, t)),
          ...(page.cursor ? { nextCursor: page.cursor } : {}),
        },
        200,
      )
    },
  )

  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/jobs/{id}/tasks/{index}/logs",
      tags: ["jobs"],
      summary: "The last lines of a task's output (its current attempt, or `attempt`)",
      security,
      request: {
        params: idParam("Job").extend({
          index: z.coerce
            .number()
            .int()
            .min(0)
            .describe("Task index.")
            .openapi({ param: { name: "index", in: "path" } }),
        }),
        query: z.object({
          tail: z.coerce
            .number()
            .int()
            .min(1)
            .max(10_000)
            .default(100)
            .describe("Lines from the end, at most 10000."),
          attempt: z
            .string()
            .max(128)
            .optional()
            .describe("An earlier attempt's uid; the current one when absent."),
        }),
      },
      responses: { 200: jsonResponse(LogTailBody, "The output tail."), ...errors(400, 401, 404, 501) },
    }),
    async (c) => {
      const project = c.get("caller").project
      const { id, index } = c.req.valid("param")
      const { tail, attempt } = c.req.valid("query")
      const job = await deps.repos.jobs.get(project, id)
      if (!job) throw new NotFoundError("job", id)
      const task = await deps.repos.jobs.task(project, id, index)
      if (!task) throw new NotFoundError("task", `${id}/${index}`)
      const backend = await deps.repos.backends.get(project, job.backendId)
      if (!backend) throw new NotFoundError("backend", job.backendId)
      const ref = attempt
        ? {
            job,
            task: {
              ...task,
              data: { ...task.data, attempts: task.data.attempts.filter((a) => a.attemptUid === attempt) },
            },
          }
        : { job, task }
      if (attempt && !ref.task.data.attempts.length) throw new NotFoundError("attempt", attempt)
      return c.json(await withBackend(backend, deps, (b) => b.fetchLogs(ref, tail)), 200)
    },
  )

  app.openapi(
    createRoute({
      method: "post",
      path: "/v1/jobs/{id}/cancel",
      tags: ["jobs"],
      summary: "Cancel a job",
      description: `Answers 202 with the job, \`cancelRequested: true\`, at once whatever its size. A job of at most ${InlineCancelTasks} tasks has its pending tasks killed in this request; a larger one is CANCELLED by the control loop, which kills its tasks a page at a time (its \`counts\` show how far it got); running tasks are stopped by the control loop. Follow the job until its status is CANCELLED. A finished job is left as it is.`,
      security,
      request: { params: idParam("Job"), headers: idempotencyHeader },
      responses: { 202: jsonResponse(Job, "Accepted."), ...errors(401, 403, 404, 422) },
    }),
    async (c) => {
      const caller = c.get("caller")
      requireRole(caller, "write")
      const { id } = c.req.valid("param")
      const job = await deps.transitions.jobs.cancel(caller.project, id)
      await enqueue(deps, [
        {
          kind: "job",
          project: caller.project,
          id,
          reason: "job.cancel_requested",
          backendId: job.backendId,
        },
      ])
      return c.json(job, 202)
    },
  )

  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/jobs/{id}/events",
      tags: ["jobs"],
      summary: "Events of a job and its tasks, oldest first",
      security,
      request: { params: idParam("Job"), query: PageQuery },
      responses: { 200: jsonResponse(EventPage, "A page of events."), ...errors(400, 401, 404) },
    }),
    async (c) => {
      const project = c.get("caller").project
      const { id } = c.req.valid("param")
      if (!(await deps.repos.jobs.get(project, id))) throw new NotFoundError("job", id)
      const query = c.req.valid("query")
      const page = await deps.repos.events.ofJob(project, id, query)
      return c.json({ items: page.items, ...(page.cursor ? { nextCursor: page.cursor } : {}) }, 200)
    },
  )
}
