/**
 * The Hono app factory (DESIGN.md §4). Knows only Web Request/Response: `functions/api.ts` wraps it
 * for Lambda and `functions/local.ts` serves it on node-server. Middleware order matters:
 * body limit → JSON content type → authentication (`/v1/*`) → rate limit per key → idempotency (POST)
 * → route validation.
 */
import { createRoute, OpenAPIHono } from "@hono/zod-openapi"
import { bodyLimit } from "hono/body-limit"
import { TrieRouter } from "hono/router/trie-router"
import { Health } from "../model/api"
import { Limits } from "../model/limits"
import { iso } from "../util/clock"
import { ValidationError, VisibleError } from "../util/errors"
import { authenticate } from "./auth"
import type { ApiDeps, ApiEnv } from "./context"
import { dashboardRoutes } from "./dashboard/routes"
import { errorBody, onError } from "./errors"
import { idempotency } from "./idempotency"
import { fieldIssues } from "./issues"
import { type App, jsonResponse } from "./openapi-helpers"
import { rateLimit } from "./rate-limit"

const targetPrefix: Record<string, string | undefined> = {
  json: undefined,
  query: "query",
  param: "path",
  header: "header",
}

/**
 * The `/v1` route groups, each registered on the first request under its paths (or for the OpenAPI
 * document): a cold start pays for the schemas and handlers of the group it serves, not for all six.
 */
const routeGroups: { paths: RegExp; load: () => Promise<((app: App, deps: ApiDeps) => void)[]> }[] = [
  {
    paths: /^\/v1\/(projects|me)(\/|$)/,
    load: async () => [(await import("./routes/projects")).projectRoutes],
  },
  {
    paths: /^\/v1\/backends(\/|$)/,
    load: async () => [(await import("./routes/backends")).backendRoutes],
  },
  { paths: /^\/v1\/swarms(\/|$)/, load: async () => [(await import("./routes/swarms")).swarmRoutes] },
  {
    paths: /^\/v1\/jobs(\/|$)/,
    load: async () => {
      const [jobs, logs] = await Promise.all([import("./routes/jobs"), import("./routes/job-logs")])
      return [jobs.jobRoutes, logs.jobLogsRoutes]
    },
  },
  {
    paths: /^\/v1\/workers(\/|$)/,
    load: async () => [(await import("./routes/workers")).workerRoutes],
  },
]

/** Paths of every own `__proto__` key in a parsed JSON value (at most a few, and bounded depth). */
/** The request's execution context where the platform gives one (Hono throws on reading a missing one). */
function executionContextOf(c: { executionCtx: unknown }) {
  try {
    return c.executionCtx as Parameters<App["fetch"]>[2]
  } catch {
    return undefined
  }
}

export function protoKeys(value: unknown, path = "", depth = 0, out: string[] = []): string[] {
  if (depth > 32 || out.length >= 5 || value === null || typeof value !== "object") return out
  for (const [key, child] of Object.entries(value)) {
    // Dotted, array items too (`attempts.0.env.__proto__`), as the schemas' refusals name them.
    const at = path ? `${path}.${key}` : key
    if (key === "__proto__") out.push(at)
    else protoKeys(child, at, depth + 1, out)
  }
  return out
}

export function createApp(deps: ApiDeps): OpenAPIHono<ApiEnv> {
  const app = new OpenAPIHono<ApiEnv>({
    // Hono's default SmartRouter first tries to compile every route into one RegExpRouter, fails on
    // this route set and falls back to TrieRouter on the first request; starting with TrieRouter
    // skips that failed attempt on every cold start and routes the same.
    router: new TrieRouter(),
    defaultHook: (result) => {
      if (!result.success) throw new ValidationError(fieldIssues(result.error, targetPrefix[result.target]))
    },
  })
  app.onError(onError(deps.logger))

  // First of all: a request under a group not yet registered registers it, then goes through the
  // app again from the start (its body is unread), now matching the group's routes.
  const loading = new Map<(typeof routeGroups)[number], Promise<void>>()
  const registered = new Set<(typeof routeGroups)[number]>()
  const register = (group: (typeof routeGroups)[number]) => {
    let done = loading.get(group)
    if (!done) {
      done = group.load().then((adds) => {
        for (const add of adds) add(app, deps)
        registered.add(group)
      })
      loading.set(group, done)
      // A failed import is tried again by the next request.
      done.catch(() => loading.delete(group))
    }
    return done
  }
  const registerAll = () => Promise.all(routeGroups.map(register))
  app.use("/v1/*", async (c, next) => {
    // Routes are matched before this runs, with nothing awaited in between: a group registered by
    // then is in this request's match.
    const group = routeGroups.find((g) => g.paths.test(c.req.path))
    if (!group || registered.has(group)) return next()
    await register(group)
    return app.fetch(c.req.raw, c.env, executionContextOf(c))
  })
  app.notFound((c) =>
    c.json(errorBody("route.not_found", `no route ${c.req.method} ${c.req.path}; see /docs`), 404),
  )

  app.use(
    "/v1/*",
    bodyLimit({
      maxSize: Limits.bodyBytes,
      onError: () => {
        throw new VisibleError(
          "request.too_large",
          `the body is too large: send at most ${Limits.bodyBytes / 1024} KiB`,
          413,
        )
      },
    }),
  )
  app.use("/v1/*", async (c, next) => {
    const hasBody =
      c.req.header("Content-Length") !== undefined
        ? c.req.header("Content-Length") !== "0"
        : c.req.raw.body !== null
    const type = c.req.header("Content-Type") ?? ""
    if (
      ["POST", "PUT", "PATCH"].includes(c.req.method) &&
      hasBody &&
      !/^application\/([\w.-]+\+)?json\s*(;|$)/i.test(type)
    )
      throw new VisibleError(
        "request.unsupported_media_type",
        "send the body as JSON with Content-Type: application/json",
        415,
      )
    if (["POST", "PUT", "PATCH"].includes(c.req.method) && hasBody) {
      // A key the schemas would drop without a word (`__proto__`) is refused with where it is.
      const body: unknown = await c.req.json().catch(() => undefined)
      const found = protoKeys(body)
      if (found.length)
        throw new ValidationError(
          found.map((path) => ({
            path,
            message: `"__proto__" is reserved and cannot be a key; choose another name`,
          })),
        )
    }
    await next()
  })
  app.use("/v1/*", authenticate(deps))
  app.use("/v1/*", rateLimit(deps))
  app.use("/v1/*", idempotency(deps))

  app.openAPIRegistry.registerComponent("securitySchemes", "apiKey", {
    type: "http",
    scheme: "bearer",
    description:
      "An API key: `Authorization: Bearer sp_...`. A revoked or expired key gets 401 (`auth.key_revoked`, `auth.key_expired`). Each key may send 50 requests a second, in bursts of up to 100, counted per API instance; past that, 429 `rate_limited` with `Retry-After` (seconds), and nothing is done. A worker's heartbeats, once its credential is accepted, count against a bucket of their own, not the key's.",
  })

  app.openapi(
    createRoute({
      method: "get",
      path: "/health",
      tags: ["meta"],
      summary: "Liveness: answers without authentication",
      responses: { 200: jsonResponse(Health, "The API is up.") },
    }),
    (c) => c.json({ status: "ok" as const, version: deps.version, time: iso(deps.clock.now()) }, 200),
  )

  dashboardRoutes(app)

  const documentConfig = {
    openapi: "3.1.0",
    info: {
      title: "swarmplane",
      version: deps.version,
      description:
        "A serverless control plane for LLM serving swarms and sharded GPU batch jobs on Slurm, DGX Cloud Lepton, EKS/Kueue and swarmplane's own workers.",
    },
  }
  // Generated on the first request that needs it, then kept: the routes do not change after this
  // function returns, and a cold start that never serves the document never pays for it.
  let document: Record<string, unknown> | undefined
  const openApiDocument = async () => {
    if (document) return document
    await registerAll()
    document ??= app.getOpenAPI31Document(documentConfig) as unknown as Record<string, unknown>
    return document
  }
  app.get("/openapi.json", async (c) => c.json(await openApiDocument()))
  app.get("/docs", async (c) => {
    const { renderDocs } = await import("./docs-page")
    return c.html(renderDocs(await openApiDocument()))
  })
  return app
}
