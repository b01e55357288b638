/**
 * `/v1/me`, `/v1/projects` and `/v1/projects/{project}/keys`: creating (with an optional expiry),
 * listing and revoking keys. A revoked key stays listed with `revokedAt`, so an admin can see which keys
 * existed and when each stopped; the secret's hash stays with it, so a revoked key is refused by name
 * (401 `auth.key_revoked`) rather than as an unknown one.
 */
import { createRoute } from "@hono/zod-openapi"
import {
  ApiKeyInfo,
  Caller,
  CreatedKey,
  CreateKeyRequest,
  CreateProjectRequest,
  CreateProjectResponse,
  MaxKeyDays,
} from "../../model/project"
import { z } from "../../model/zod"
import { iso } from "../../util/clock"
import { ForbiddenError, NotFoundError, ValidationError, VisibleError } from "../../util/errors"
import { requireRole } from "../auth"
import type { ApiDeps } from "../context"
import { type App, errors, idempotencyHeader, jsonBody, jsonResponse, security } from "../openapi-helpers"

const projectParam = z.object({
  project: z
    .string()
    .max(63)
    .describe("Project name.")
    .openapi({ param: { name: "project", in: "path" } }),
})

const keyParams = projectParam.extend({
  id: z
    .string()
    .max(128)
    .describe("Key id (as listed; not the secret).")
    .openapi({ param: { name: "id", in: "path" } }),
})

const dayMs = 86_400_000

/** When a new key expires, from `expiresInDays` or `expiresAt` (checked against the clock); none when neither. */
function expiryOf(body: { expiresInDays?: number | undefined; expiresAt?: string | undefined }, now: number) {
  if (body.expiresInDays !== undefined) return iso(now + body.expiresInDays * dayMs)
  if (body.expiresAt === undefined) return undefined
  const at = Date.parse(body.expiresAt)
  if (at <= now)
    throw new ValidationError([
      { path: "expiresAt", message: `must be in the future (it is now ${iso(now)}); or use expiresInDays` },
    ])
  if (at > now + MaxKeyDays * dayMs)
    throw new ValidationError([{ path: "expiresAt", message: `must be at most ${MaxKeyDays} days from now` }])
  return iso(at)
}

export function projectRoutes(app: App, deps: ApiDeps): void {
  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/me",
      tags: ["projects"],
      summary: "Who am I: the project and role of the key used",
      security,
      responses: { 200: jsonResponse(Caller, "The caller."), ...errors(401) },
    }),
    (c) => c.json(c.get("caller"), 200),
  )

  app.openapi(
    createRoute({
      method: "post",
      path: "/v1/projects",
      tags: ["projects"],
      summary: "Create a project and its first admin key (operator admins only)",
      security,
      request: { headers: idempotencyHeader, body: jsonBody(CreateProjectRequest, "The project.") },
      responses: {
        201: jsonResponse(CreateProjectResponse, "The project and an admin key, shown once."),
        ...errors(400, 401, 403, 409, 422),
      },
    }),
    async (c) => {
      const caller = c.get("caller")
      if (!caller.operator)
        throw new ForbiddenError(
          `only admin keys of the operator project "${deps.operatorProject}" may create projects`,
        )
      const body = c.req.valid("json")
      const project = await deps.repos.projects.create(body.name, body.displayName)
      const adminKey = await deps.repos.projects.createKey(project.name, "admin", {
        name: "initial admin key",
      })
      return c.json({ project, adminKey }, 201)
    },
  )

  const ownProject = async (caller: { project: string; operator: boolean }, project: string) => {
    if (caller.project !== project && !caller.operator) throw new NotFoundError("project", project)
    if (!(await deps.repos.projects.get(project))) throw new NotFoundError("project", project)
  }

  app.openapi(
    createRoute({
      method: "post",
      path: "/v1/projects/{project}/keys",
      tags: ["projects"],
      summary: "Create an API key (shown once)",
      security,
      request: {
        params: projectParam,
        headers: idempotencyHeader,
        body: jsonBody(CreateKeyRequest, "The key's role and name."),
      },
      responses: {
        201: jsonResponse(CreatedKey, "The key; store it now."),
        ...errors(400, 401, 403, 404, 422),
      },
    }),
    async (c) => {
      const caller = c.get("caller")
      requireRole(caller, "admin")
      const { project } = c.req.valid("param")
      await ownProject(caller, project)
      const body = c.req.valid("json")
      const expiresAt = expiryOf(body, deps.clock.now())
      return c.json(
        await deps.repos.projects.createKey(project, body.role, {
          ...(body.name ? { name: body.name } : {}),
          ...(expiresAt ? { expiresAt } : {}),
        }),
        201,
      )
    },
  )

  app.openapi(
    createRoute({
      method: "delete",
      path: "/v1/projects/{project}/keys/{id}",
      tags: ["projects"],
      summary: "Revoke an API key: it stops working at once (401) and stays listed with `revokedAt`",
      description:
        "Admin keys of the project, or the operator's. Revoking a key revoked already answers the same. The key you are calling with is revoked only with `?self=true` (otherwise 400 `key.self_revoke`), so a script cannot lock itself out by mistake.",
      security,
      request: {
        params: keyParams,
        query: z.object({
          self: z
            .enum(["true", "false"])
            .optional()
            .describe("`true` to revoke the key this request is made with."),
        }),
      },
      responses: {
        200: jsonResponse(ApiKeyInfo, "The key, revoked."),
        ...errors(400, 401, 403, 404),
      },
    }),
    async (c) => {
      const caller = c.get("caller")
      requireRole(caller, "admin")
      const { project, id } = c.req.valid("param")
      await ownProject(caller, project)
      if (id === caller.keyId && c.req.valid("query").self !== "true")
        throw new VisibleError(
          "key.self_revoke",
          `key "${id}" is the key you are calling with: add ?self=true to revoke it anyway (this request is its last), or call with another admin key`,
          400,
          [{ path: "query.self", message: "must be true to revoke the calling key" }],
        )
      const revoked = await deps.repos.projects.revokeKey(project, id, deps.clock.now())
      if (!revoked) throw new NotFoundError("key", id)
      return c.json(revoked, 200)
    },
  )

  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/projects/{project}/keys",
      tags: ["projects"],
      summary: "List API keys (never their secrets), revoked ones with `revokedAt`",
      security,
      request: { params: projectParam },
      responses: {
        200: jsonResponse(
          z.object({ items: z.array(ApiKeyInfo).describe("The keys.") }),
          "The project's keys.",
        ),
        ...errors(401, 403, 404),
      },
    }),
    async (c) => {
      const caller = c.get("caller")
      requireRole(caller, "admin")
      const { project } = c.req.valid("param")
      await ownProject(caller, project)
      return c.json({ items: await deps.repos.projects.listKeys(project) }, 200)
    },
  )
}
