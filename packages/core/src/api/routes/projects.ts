/** `/v1/me`, `/v1/projects` and `/v1/projects/{project}/keys`. */
import { createRoute, z } from "@hono/zod-openapi"
import {
  ApiKeyInfo,
  Caller,
  CreatedKey,
  CreateKeyRequest,
  CreateProjectRequest,
  CreateProjectResponse,
} from "../../model/project"
import { ForbiddenError, NotFoundError } from "../../util/errors"
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
      return c.json(await deps.repos.projects.createKey(project, body.role, { name: body.name }), 201)
    },
  )

  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/projects/{project}/keys",
      tags: ["projects"],
      summary: "List API keys (never their secrets)",
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
