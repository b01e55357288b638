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
import { jsonResponse } from "./openapi-helpers"
import { rateLimit } from "./rate-limit"
import { backendRoutes } from "./routes/backends"
import { jobLogsRoutes } from "./routes/job-logs"
import { jobRoutes } from "./routes/jobs"
import { projectRoutes } from "./routes/projects"
import { swarmRoutes } from "./routes/swarms"
import { workerRoutes } from "./routes/workers"

const targetPrefix: Record<string, string | undefined> = {
  json: undefined,
  query: "query",
  param: "path",
  header: "header",
}

/** Paths of every own `__proto__` key in a parsed JSON value (at most a few, and bounded depth). */
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

  projectRoutes(app, deps)
  backendRoutes(app, deps)
  swarmRoutes(app, deps)
  jobRoutes(app, deps)
  jobLogsRoutes(app, deps)
  workerRoutes(app, deps)
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
  const openApiDocument = () =>
    (document ??= app.getOpenAPI31Document(documentConfig) as unknown as Record<string, unknown>)
  app.get("/openapi.json", (c) => c.json(openApiDocument()))
  app.get("/docs", async (c) => {
    const { renderDocs } = await import("./docs-page")
    return c.html(renderDocs(openApiDocument()))
  })
  return app
}
