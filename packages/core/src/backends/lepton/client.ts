/**
 * A typed client of the Lepton v2 workspace API (backend-contracts.md Part A.3), over `fetch`.
 *
 * Every call has its own timeout and never runs past the caller's overall deadline (a reconcile tick's):
 * a pass that must end does not wait on Lepton. Calls that cannot do harm when repeated (GET, the JSON
 * merge PATCH, DELETE) are retried with exponential backoff and jitter on 429, 5xx and network errors,
 * waiting at least what a `Retry-After` asks. A create (POST) is retried only on 429, which Lepton sends
 * before doing anything: after a 5xx or a lost answer the object may exist, and the backend finds it
 * again by its name rather than making a second one. Other 4xx are never retried.
 *
 * A replica's log is a stream that follows a running replica; `replicaLogTail` reads it within bounds
 * (bytes, time, and a pause once the backlog is through) and keeps only its newest text.
 *
 * Failures are `LeptonApiError`s, which name the method, path, status and Lepton's own message, and
 * never the token: it is only ever put in the `Authorization` header.
 */
import type { z } from "zod"
import { retryAfterMs } from "../../util/retry-after"
import { errorOf, hint, LeptonApiError } from "./api-error"
import {
  DedicatedNodeGroup,
  JobPage,
  LeptonDeployment,
  type LeptonDeploymentBody,
  LeptonJob,
  type LeptonJobBody,
  NodeGroupNode,
  Readiness,
  Replica,
  Shape,
  WorkspaceInfo,
} from "./types"

export { LeptonApiError }

export interface LeptonClientOptions {
  /** The workspace API base, e.g. `https://gateway.dgxc-lepton.nvidia.com/api/v2/workspaces/ws123`. */
  baseUrl: string
  /** The workspace token; sent as a bearer token and nowhere else. */
  token: string
  fetch?: typeof fetch
  /** Milliseconds since the epoch, on the same clock as `deadline`. */
  now?: () => number
  /** Waits between retries; injected so tests do not wait in real time. */
  sleep?: (ms: number) => Promise<void>
  /** Timeout of one request, ms. */
  timeoutMs?: number
  /**
   * No request starts, and none runs, past this time (ms since the epoch, on `now`'s clock). A function
   * is read at each request, so its caller may bring it forward (a launch, to its pass's lease).
   */
  deadline?: number | (() => number)
  /** Tries after the first one. */
  retries?: number
  /** First backoff, ms; doubled per retry up to `maxBackoffMs`. */
  backoffMs?: number
  maxBackoffMs?: number
  /** Jitter source in [0, 1). */
  random?: () => number
}

/** The SDK's page size; and a job list never reads more than this many pages (a runaway server). */
export const DefaultPageSize = 500
const MaxPages = 10_000

/** The bounds of one read of a replica's log stream. */
export interface LogTailLimits {
  /** Stop after this many bytes of the stream. */
  maxBytes: number
  /** Stop after this long in all (and never past the client's deadline). */
  maxMs: number
  /** Stop once the stream has been quiet this long after its first bytes: what was written is through. */
  idleMs: number
  /** Keep only the newest this many characters. */
  keepChars: number
}

/** What a bounded read of a log stream got: its newest text, and whether the stream ended by itself. */
export interface LogTail {
  text: string
  ended: boolean
}

type Method = "GET" | "POST" | "PATCH" | "DELETE"
type Query = Record<string, string | number | undefined>

/** What the backend asks of Lepton: one method per endpoint it uses. */
export interface LeptonClient {
  workspace(): Promise<WorkspaceInfo>
  nodeGroups: {
    /** The workspace's dedicated node groups (to resolve a name to the id placement uses). */
    list(): Promise<DedicatedNodeGroup[]>
    /** The nodes of one group, with their GPUs allocated and total. */
    nodes(id: string): Promise<NodeGroupNode[]>
  }
  shapes: {
    /** The resource shapes offered; only those of one node group when its id is given. */
    list(nodeGroupId?: string): Promise<Shape[]>
  }
  deployments: {
    create(body: LeptonDeploymentBody): Promise<LeptonDeployment | undefined>
    /** `undefined` when Lepton has no such deployment (404). */
    get(name: string): Promise<LeptonDeployment | undefined>
    list(): Promise<LeptonDeployment[]>
    /** A JSON merge patch: only the fields given change; `null` clears one. */
    patch(name: string, patch: Record<string, unknown>): Promise<LeptonDeployment | undefined>
    /** Idempotent: a deployment already gone is done. */
    delete(name: string): Promise<void>
    readiness(name: string): Promise<Readiness>
    replicas(name: string): Promise<Replica[]>
    replicaLog(name: string, replicaId: string): Promise<string>
  }
  jobs: {
    /** Creates the job; its `metadata.id` is Lepton's id, which may differ from the name asked for. */
    create(body: LeptonJobBody): Promise<LeptonJob>
    /** `undefined` when Lepton has no such job (404). */
    get(id: string, mode?: JobQueryMode): Promise<LeptonJob | undefined>
    /** Every page, from 1 to the first empty one. */
    list(options?: { mode?: JobQueryMode; pageSize?: number; q?: string }): Promise<LeptonJob[]>
    /** `PATCH {"spec":{"stopped":true}}`. Idempotent; a job already gone is done. */
    stop(id: string): Promise<void>
    /** Idempotent: a job already gone is done. */
    delete(id: string): Promise<void>
    replicas(id: string): Promise<Replica[]>
    replicaLog(id: string, replicaId: string): Promise<string>
    /**
     * The newest text of a replica's log, read within `limits` (one try, no retry: a reader of the log
     * comes back later). `undefined` when Lepton has no such job or replica (404).
     */
    replicaLogTail(id: string, replicaId: string, limits: LogTailLimits): Promise<LogTail | undefined>
  }
}

export type JobQueryMode = "alive_only" | "archive_only" | "alive_and_archive"

const seg = (part: string) => encodeURIComponent(part)

const seconds = (ms: number) => (ms < 1000 ? `${ms} ms` : `${Math.round(ms / 1000)} s`)

export function leptonClient(options: LeptonClientOptions): LeptonClient {
  const base = options.baseUrl.replace(/\/+$/, "")
  const doFetch = options.fetch ?? fetch
  const now = options.now ?? Date.now
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)))
  const timeoutMs = options.timeoutMs ?? 30_000
  const retries = options.retries ?? 3
  const backoffMs = options.backoffMs ?? 500
  const maxBackoffMs = options.maxBackoffMs ?? 10_000
  const random = options.random ?? Math.random
  const secret = options.token
  /** The deadline as it stands now (undefined: none). */
  const deadlineNow = () => (typeof options.deadline === "function" ? options.deadline() : options.deadline)

  /** Never let the token through, even if a server or a runtime echoes it back. */
  const scrub = (text: string) => (secret ? text.split(secret).join("***") : text)

  /** One request: its answer, or the failure with how long a `Retry-After` asks to wait. */
  async function once(
    method: Method,
    path: string,
    url: URL,
    init: { body?: unknown; notFound?: "undefined" | "ok" },
    timeout: number,
  ): Promise<
    | { answer: { status: number; text: string } | undefined }
    | { failure: LeptonApiError; waitAtLeast: number }
  > {
    const shown = `${method} ${path}`
    let response: Response
    let text: string
    try {
      response = await doFetch(url, {
        method,
        headers: {
          authorization: `Bearer ${secret}`,
          accept: "application/json",
          ...(init.body !== undefined ? { "content-type": "application/json" } : {}),
        },
        body: init.body !== undefined ? JSON.stringify(init.body) : undefined,
        signal: AbortSignal.timeout(timeout),
      })
      text = await response.text()
    } catch (error) {
      const timedOut =
        error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError")
      const why = timedOut
        ? `no answer within ${seconds(timeout)}`
        : error instanceof Error
          ? error.message
          : String(error)
      return {
        failure: new LeptonApiError(
          scrub(`Lepton ${shown}: ${why}`),
          true,
          method,
          path,
          undefined,
          undefined,
          {
            cause: error,
          },
        ),
        waitAtLeast: 0,
      }
    }
    if (response.ok) return { answer: { status: response.status, text } }
    if (response.status === 404 && init.notFound === "undefined") return { answer: undefined }
    if (response.status === 404 && init.notFound === "ok") return { answer: { status: 404, text: "" } }
    const status = response.status
    const body = errorOf(text)
    const said = `${body.code ? ` ${body.code}` : ""}${body.message ? `: ${body.message}` : ""}`
    return {
      failure: new LeptonApiError(
        scrub(`Lepton ${shown} answered ${status}${said}${hint[status] ?? ""}`),
        // Worth another pass: busy or broken on Lepton's side, or a refused token (fixed in the secret,
        // not in the work). A bad request will not pass. Within one call only 429 and 5xx are retried.
        status === 429 || status >= 500 || status === 401 || status === 403,
        method,
        path,
        status,
        body.code ? scrub(body.code) : undefined,
      ),
      waitAtLeast: retryAfterMs(response.headers.get("retry-after"), now()) ?? 0,
    }
  }

  /** One call, with its retries. Returns the answer's text (and status), or throws a `LeptonApiError`. */
  async function call(
    method: Method,
    path: string,
    init: { query?: Query; body?: unknown; notFound?: "undefined" | "ok" } = {},
  ): Promise<{ status: number; text: string } | undefined> {
    const url = new URL(base + path)
    for (const [key, value] of Object.entries(init.query ?? {}))
      if (value !== undefined) url.searchParams.append(key, String(value))
    const shown = `${method} ${path}`
    const repeatable = method !== "POST"
    for (let attempt = 0; ; attempt++) {
      const deadline = deadlineNow()
      const left = deadline === undefined ? timeoutMs : deadline - now()
      if (left <= 0)
        throw new LeptonApiError(
          `Lepton ${shown}: the pass's deadline passed before an answer`,
          true,
          method,
          path,
        )
      const tried = await once(method, path, url, init, Math.min(timeoutMs, left))
      if ("answer" in tried) return tried.answer
      const { failure, waitAtLeast } = tried
      // A 4xx is the request's or the token's fault: retrying cannot help. A create is tried again only
      // after a 429 (refused before anything was made): after a 5xx or a lost answer it may exist.
      const busy = failure.status === undefined || failure.status === 429 || failure.status >= 500
      if (!failure.retryable || !busy || (!repeatable && failure.status !== 429)) throw failure
      if (attempt >= retries) throw failure
      const backoff = Math.min(maxBackoffMs, backoffMs * 2 ** attempt) * (0.5 + random() / 2)
      const delay = Math.max(waitAtLeast, backoff)
      const until = deadlineNow()
      if (until !== undefined && now() + delay >= until) throw failure
      await sleep(delay)
    }
  }

  /** A bounded read of a streamed text answer (see `LogTailLimits`). */
  async function tail(path: string, limits: LogTailLimits): Promise<LogTail | undefined> {
    const shown = `GET ${path}`
    const deadline = deadlineNow()
    const left = deadline === undefined ? limits.maxMs : Math.min(limits.maxMs, deadline - now())
    if (left <= 0)
      throw new LeptonApiError(
        `Lepton ${shown}: the pass's deadline passed before an answer`,
        true,
        "GET",
        path,
      )
    const stop = new AbortController()
    const overall = setTimeout(() => stop.abort(), Math.min(left, timeoutMs))
    let idle: ReturnType<typeof setTimeout> | undefined
    let response: Response | undefined
    let text = ""
    let ended = false
    try {
      response = await doFetch(new URL(base + path), {
        method: "GET",
        headers: { authorization: `Bearer ${secret}`, accept: "text/plain" },
        signal: stop.signal,
      })
      if (response.status === 404) return undefined
      if (!response.ok) {
        const body = errorOf(await response.text())
        const said = `${body.code ? ` ${body.code}` : ""}${body.message ? `: ${body.message}` : ""}`
        const status = response.status
        throw new LeptonApiError(
          scrub(`Lepton ${shown} answered ${status}${said}${hint[status] ?? ""}`),
          status === 429 || status >= 500 || status === 401 || status === 403,
          "GET",
          path,
          status,
        )
      }
      if (!response.body) return { text: "", ended: true }
      const reader = response.body.getReader()
      const decoder = new TextDecoder()
      let bytes = 0
      for (;;) {
        const chunk = await reader.read()
        if (chunk.done) {
          ended = true
          text = (text + decoder.decode()).slice(-limits.keepChars)
          break
        }
        bytes += chunk.value.byteLength
        text = (text + decoder.decode(chunk.value, { stream: true })).slice(-limits.keepChars)
        if (bytes >= limits.maxBytes) break
        clearTimeout(idle)
        idle = setTimeout(() => stop.abort(), limits.idleMs)
      }
    } catch (error) {
      if (error instanceof LeptonApiError) throw error
      // Stopped by a bound once the stream had begun: what was read is the answer.
      if (!(stop.signal.aborted && response?.ok)) {
        const why = stop.signal.aborted
          ? `no answer within ${seconds(Math.min(left, timeoutMs))}`
          : error instanceof Error
            ? error.message
            : String(error)
        throw new LeptonApiError(scrub(`Lepton ${shown}: ${why}`), true, "GET", path, undefined, undefined, {
          cause: error,
        })
      }
    } finally {
      clearTimeout(overall)
      clearTimeout(idle)
      // Whatever is left of a stream that follows the replica is not wanted.
      stop.abort()
    }
    return { text: scrub(text), ended }
  }

  /** An answer read by its schema; one that is not what the contract says is the backend misbehaving. */
  function parse<S extends z.ZodType>(schema: S, method: Method, path: string, text: string): z.infer<S> {
    const shown = `${method} ${path}`
    let json: unknown
    try {
      json = JSON.parse(text)
    } catch {
      throw new LeptonApiError(`Lepton ${shown}: the answer is not JSON`, true, method, path)
    }
    const parsed = schema.safeParse(json)
    if (!parsed.success)
      throw new LeptonApiError(
        `Lepton ${shown}: unexpected answer (${parsed.error.issues
          .slice(0, 3)
          .map((i) => `${i.path.join(".") || "body"}: ${i.message}`)
          .join("; ")})`,
        true,
        method,
        path,
      )
    return parsed.data
  }

  async function getJson<S extends z.ZodType>(
    schema: S,
    path: string,
    query?: Query,
  ): Promise<z.infer<S> | undefined> {
    const answer = await call("GET", path, { query, notFound: "undefined" })
    return answer ? parse(schema, "GET", path, answer.text) : undefined
  }

  async function mustGet<S extends z.ZodType>(schema: S, path: string, query?: Query): Promise<z.infer<S>> {
    const answer = await call("GET", path, { query })
    return parse(schema, "GET", path, answer!.text)
  }

  /** A body the SDK ignores: parsed when it is one, else undefined. */
  function optional<S extends z.ZodType>(schema: S, text: string): z.infer<S> | undefined {
    try {
      const parsed = schema.safeParse(JSON.parse(text))
      return parsed.success ? parsed.data : undefined
    } catch {
      return undefined
    }
  }

  const dep = (name: string) => `/deployments/${seg(name)}`
  const job = (id: string) => `/jobs/${seg(id)}`

  return {
    workspace: () => mustGet(WorkspaceInfo, "/workspace"),
    nodeGroups: {
      list: () => mustGet(DedicatedNodeGroup.array(), "/dedicated-node-groups"),
      nodes: (id) => mustGet(NodeGroupNode.array(), `/dedicated-node-groups/${seg(id)}/nodes`),
    },
    shapes: {
      list: (nodeGroupId) => mustGet(Shape.array(), "/shapes", { node_groups: nodeGroupId }),
    },
    deployments: {
      async create(body) {
        const answer = await call("POST", "/deployments", { body })
        return optional(LeptonDeployment, answer!.text)
      },
      get: (name) => getJson(LeptonDeployment, dep(name)),
      list: () => mustGet(LeptonDeployment.array(), "/deployments"),
      async patch(name, patch) {
        const answer = await call("PATCH", dep(name), { body: patch })
        return optional(LeptonDeployment, answer!.text)
      },
      async delete(name) {
        await call("DELETE", dep(name), { notFound: "ok" })
      },
      readiness: (name) => mustGet(Readiness, `${dep(name)}/readiness`),
      replicas: (name) => mustGet(Replica.array(), `${dep(name)}/replicas`),
      async replicaLog(name, replicaId) {
        return scrub((await call("GET", `${dep(name)}/replicas/${seg(replicaId)}/log`))!.text)
      },
    },
    jobs: {
      async create(body) {
        const answer = await call("POST", "/jobs", { body })
        return parse(LeptonJob, "POST", "/jobs", answer!.text)
      },
      get: (id, mode = "alive_and_archive") => getJson(LeptonJob, job(id), { job_query_mode: mode }),
      async list({ mode = "alive_only", pageSize = DefaultPageSize, q } = {}) {
        const all: LeptonJob[] = []
        for (let page = 1; page <= MaxPages; page++) {
          const data = await mustGet(JobPage, "/jobs", { job_query_mode: mode, page, page_size: pageSize, q })
          const items = Array.isArray(data) ? data : (data.jobs ?? [])
          if (items.length === 0) return all
          all.push(...items)
        }
        throw new LeptonApiError(`Lepton GET /jobs: more than ${MaxPages} pages`, true, "GET", "/jobs")
      },
      async stop(id) {
        await call("PATCH", job(id), { body: { spec: { stopped: true } }, notFound: "ok" })
      },
      async delete(id) {
        await call("DELETE", job(id), { query: { job_query_mode: "alive_only" }, notFound: "ok" })
      },
      replicas: (id) =>
        mustGet(Replica.array(), `${job(id)}/replicas`, { job_query_mode: "alive_and_archive" }),
      async replicaLog(id, replicaId) {
        return scrub((await call("GET", `${job(id)}/replicas/${seg(replicaId)}/log`))!.text)
      },
      replicaLogTail: (id, replicaId, limits) => tail(`${job(id)}/replicas/${seg(replicaId)}/log`, limits),
    },
  }
}
