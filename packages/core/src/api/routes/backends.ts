/** `/v1/backends`: register (create or replace) and read backends. */
import { createRoute, z } from "@hono/zod-openapi"
import { Backend, CreateBackendRequest } from "../../model/backend"
import { NotFoundError } from "../../util/errors"
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

export function backendRoutes(app: App, deps: ApiDeps): void {
  app.openapi(
    createRoute({
      method: "post",
      path: "/v1/backends",
      tags: ["backends"],
      summary: "Register a backend, or replace its config",
      description:
        "201 when created, 200 when an existing backend's config was replaced (or was already the same).",
      security,
      request: { headers: idempotencyHeader, body: jsonBody(CreateBackendRequest, "Backend id and config.") },
      responses: {
        201: jsonResponse(Backend, "Registered."),
        200: jsonResponse(Backend, "Config replaced or unchanged."),
        ...errors(400, 401, 403, 422),
      },
    }),
    async (c) => {
      const caller = c.get("caller")
      requireRole(caller, "admin")
      const body = c.req.valid("json")
      const { backend, created } = await deps.repos.backends.put(caller.project, body.id, body.config)
      await enqueue(deps, [
        {
          kind: "backend",
          project: caller.project,
          id: body.id,
          reason: created ? "backend.created" : "backend.updated",
        },
      ])
      return created ? c.json(backend, 201) : c.json(backend, 200)
    },
  )

  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/backends",
      tags: ["backends"],
      summary: "List backends",
      security,
      responses: {
        200: jsonResponse(z.object({ items: z.array(Backend).describe("The backends.") }), "Backends."),
        ...errors(401),
      },
    }),
    async (c) => c.json({ items: await deps.repos.backends.list(c.get("caller").project) }, 200),
  )

  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/backends/{id}",
      tags: ["backends"],
      summary: "Get a backend",
      security,
      request: { params: idParam("Backend") },
      responses: { 200: jsonResponse(Backend, "The backend."), ...errors(401, 404) },
    }),
    async (c) => {
      const { id } = c.req.valid("param")
      const backend = await deps.repos.backends.get(c.get("caller").project, id)
      if (!backend) throw new NotFoundError("backend", id)
      return c.json(backend, 200)
    },
  )
}
