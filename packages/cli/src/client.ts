/**
 * The typed client of swarmplane's HTTPS API: one function per endpoint, typed with the wire contract.
 * The CLI talks to the control plane only through this. Failures are `ApiError`s
 * (`{ status, code, message, details }` from the API's `{ error }` body; status 0 for network errors).
 */
import type { z } from "@hono/zod-openapi"
import type {
  ApiKeyInfo,
  Backend,
  BackendDescriptor,
  Caller,
  CreateBackendRequest,
  CreatedKey as CreatedKeySchema,
  CreateKeyRequest,
  CreateProjectRequest,
  CreateProjectResponse,
  Event,
  Health as HealthSchema,
  Job,
  JobDetail as JobDetailSchema,
  JobSpec,
  JobStatus,
  LogTail,
  ResourceCapacity,
  Role,
  ScaleGroupStatus,
  Swarm,
  SwarmMetrics,
  SwarmPhase,
  SwarmRequest,
  Task,
  Worker,
} from "@swarmplane/core/contract"
import { type HttpOptions, type Transport, transport } from "./http"

export { ApiError, isRecord } from "./http"
export type {
  Backend,
  Caller,
  Event,
  Job,
  JobStatus,
  LogTail,
  Role,
  Swarm,
  SwarmMetrics,
  SwarmPhase,
  Task,
  Worker,
}

export type JobDetail = z.infer<typeof JobDetailSchema>
export type CreatedKey = z.infer<typeof CreatedKeySchema>
export type ApiKey = z.infer<typeof ApiKeyInfo>
export type Health = z.infer<typeof HealthSchema>
export type CreatedProject = z.infer<typeof CreateProjectResponse>
/** Request bodies: what the user may send (defaults not yet applied). */
export type SwarmBody = z.input<typeof SwarmRequest>
export type JobBody = z.input<typeof JobSpec>
export type BackendBody = z.input<typeof CreateBackendRequest>
export type KeyBody = z.input<typeof CreateKeyRequest>
export type ProjectBody = z.input<typeof CreateProjectRequest>

/** What `GET /v1/backends/{id}/status` answers; each live part may be `{ error }` instead. */
export interface BackendStatus {
  id: string
  descriptor: BackendDescriptor
  lastTick: Backend["status"]
  status: { healthy: boolean; message?: string; detail: Record<string, unknown> } | Failed
  capacity: ResourceCapacity | Failed
  autoscaler: { groups: ScaleGroupStatus[] } | Failed
}
export type Failed = { error: string }

export interface Page<T> {
  items: T[]
  nextCursor?: string
}

export interface PageQuery {
  limit?: number
  cursor?: string
}

/** How a `?wait` answer ended (header `Swarmplane-Wait`). */
export type WaitResult = "reached" | "settled" | "timeout"

export type Client = ReturnType<typeof createClient>

export function createClient(options: HttpOptions) {
  const call: Transport = transport(options)
  const get = async <T>(path: string, query?: Record<string, string | number | undefined>) =>
    (await call<T>({ method: "GET", path, query })).body
  const at = (...parts: (string | number)[]) => parts.map((p) => encodeURIComponent(String(p))).join("/")

  return {
    /** `GET /health`: liveness, no key needed. */
    health: () => get<Health>("/health"),

    /** `GET /v1/me`: the project and role of the key. */
    me: () => get<Caller>("/v1/me"),

    /** `POST /v1/projects`: a project and its first admin key (shown once). Operator admins only. */
    createProject: async (body: ProjectBody, idempotencyKey?: string) =>
      (await call<CreatedProject>({ method: "POST", path: "/v1/projects", body, idempotencyKey })).body,

    /** `POST /v1/projects/{project}/keys`: a key, shown once. */
    createKey: async (project: string, body: KeyBody, idempotencyKey?: string) =>
      (
        await call<CreatedKey>({
          method: "POST",
          path: `/v1/projects/${at(project)}/keys`,
          body,
          idempotencyKey,
        })
      ).body,

    /** `GET /v1/projects/{project}/keys`: the keys, never their secrets. */
    listKeys: async (project: string) =>
      (await get<{ items: ApiKey[] }>(`/v1/projects/${at(project)}/keys`)).items,

    /** `DELETE /v1/projects/{project}/keys/{id}`: the key stops working at once; `self` to revoke the calling key. */
    revokeKey: async (project: string, id: string, options: { self?: boolean } = {}) =>
      (
        await call<ApiKey>({
          method: "DELETE",
          path: `/v1/projects/${at(project, "keys", id)}`,
          ...(options.self ? { query: { self: "true" } } : {}),
        })
      ).body,

    /** `POST /v1/backends`: register a backend or replace its config. */
    putBackend: async (body: BackendBody, idempotencyKey?: string) => {
      const res = await call<Backend>({ method: "POST", path: "/v1/backends", body, idempotencyKey })
      return { backend: res.body, created: res.status === 201 }
    },

    /** `GET /v1/backends`. */
    listBackends: async () => (await get<{ items: Backend[] }>("/v1/backends")).items,

    /** `GET /v1/backends/{id}`. */
    getBackend: (id: string) => get<Backend>(`/v1/backends/${at(id)}`),

    /** `GET /v1/backends/{id}/status`: descriptor, capacity, health, the autoscaler's decisions. */
    backendStatus: (id: string) => get<BackendStatus>(`/v1/backends/${at(id)}/status`),

    /** `POST /v1/swarms`: create the swarm, or update the one with this name. */
    applySwarm: async (body: SwarmBody, idempotencyKey?: string) => {
      const res = await call<Swarm>({ method: "POST", path: "/v1/swarms", body, idempotencyKey })
      return { swarm: res.body, created: res.headers.get("swarmplane-created") === "true" }
    },

    /** `GET /v1/swarms`: a page of swarms, by name. */
    listSwarms: (page: PageQuery = {}) => get<Page<Swarm>>("/v1/swarms", { ...page }),

    /**
     * `GET /v1/swarms/{name}`; with `wait`, the answer comes once the swarm reaches that phase, comes
     * to rest elsewhere, or `timeoutS` (at most 25) passes. `result` says which.
     */
    getSwarm: async (name: string, wait?: { phase: SwarmPhase; timeoutS: number }) => {
      const res = await call<Swarm>({
        method: "GET",
        path: `/v1/swarms/${at(name)}`,
        query: wait ? { wait: wait.phase, timeoutS: wait.timeoutS } : {},
        extraTimeoutMs: wait ? wait.timeoutS * 1000 : 0,
      })
      const header = res.headers.get("swarmplane-wait")
      const result = header === "reached" || header === "settled" || header === "timeout" ? header : undefined
      return { swarm: res.body, result }
    },

    /** `DELETE /v1/swarms/{name}`: desired becomes `deleted`; the swarm ends STOPPED. */
    deleteSwarm: async (name: string) =>
      (await call<Swarm>({ method: "DELETE", path: `/v1/swarms/${at(name)}` })).body,

    /** `POST /v1/jobs`: submit; answers with the job (PENDING). */
    submitJob: async (body: JobBody, idempotencyKey?: string) =>
      (await call<Job>({ method: "POST", path: "/v1/jobs", body, idempotencyKey })).body,

    /** `GET /v1/jobs`: a page of jobs, newest first. */
    listJobs: (query: PageQuery & { status?: JobStatus; swarm?: string } = {}) =>
      get<Page<Job>>("/v1/jobs", { ...query }),

    /** `GET /v1/jobs/{id}`: the job with its first 1000 tasks and their attempts. */
    getJob: (id: string) => get<JobDetail>(`/v1/jobs/${at(id)}`),

    /** `GET /v1/jobs/{id}/tasks`: a page of tasks, by index. */
    listTasks: (id: string, page: PageQuery = {}) => get<Page<Task>>(`/v1/jobs/${at(id)}/tasks`, { ...page }),

    /** `GET /v1/jobs/{id}/tasks/{index}/logs`: the last `tail` lines of a task's current (or given) attempt. */
    taskLogs: (id: string, index: number, query: { tail?: number; attempt?: string } = {}) =>
      get<LogTail>(`/v1/jobs/${at(id, "tasks", index, "logs")}`, { ...query }),

    /** `GET /v1/jobs/{id}/logs`: many tasks' tails in one request (one command on a Slurm cluster). */
    jobLogs: async (id: string, query: { tail?: number; tasks?: number[] } = {}) =>
      (
        await get<{ items: (LogTail & { task: number })[] }>(`/v1/jobs/${at(id, "logs")}`, {
          ...(query.tail !== undefined ? { tail: query.tail } : {}),
          ...(query.tasks ? { tasks: query.tasks.join(",") } : {}),
        })
      ).items,

    /** `POST /v1/jobs/{id}/cancel`. */
    cancelJob: async (id: string, idempotencyKey?: string) =>
      (await call<Job>({ method: "POST", path: `/v1/jobs/${at(id)}/cancel`, idempotencyKey })).body,

    /** `GET /v1/jobs/{id}/events`: a page of events of the job and its tasks, oldest first. */
    jobEvents: (id: string, page: PageQuery = {}) =>
      get<Page<Event>>(`/v1/jobs/${at(id)}/events`, { ...page }),

    /** `GET /v1/swarms/{name}/events`: a page of the swarm's events, oldest first. */
    swarmEvents: (name: string, page: PageQuery = {}) =>
      get<Page<Event>>(`/v1/swarms/${at(name)}/events`, { ...page }),

    /** `GET /v1/swarms/{name}/metrics`: traffic over the last 1, 5 and 15 minutes. */
    swarmMetrics: (name: string) => get<SwarmMetrics>(`/v1/swarms/${at(name)}/metrics`),

    /** `GET /v1/workers`: the workers, optionally of one backend. */
    listWorkers: async (backendId?: string) =>
      (await get<{ items: Worker[] }>("/v1/workers", { backendId })).items,
  }
}

/** Every item of a paged listing, following `nextCursor` (at most `max` items). */
export async function allPages<T>(
  page: (query: PageQuery) => Promise<Page<T>>,
  max = Number.POSITIVE_INFINITY,
  pageSize = 500,
): Promise<{ items: T[]; more: boolean }> {
  const items: T[] = []
  let cursor: string | undefined
  do {
    const res = await page({ limit: Math.min(pageSize, Math.max(1, max - items.length)), cursor })
    items.push(...res.items)
    cursor = res.nextCursor
  } while (cursor && items.length < max)
  return { items: items.slice(0, max), more: cursor !== undefined }
}
