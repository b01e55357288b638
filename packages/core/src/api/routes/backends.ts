/** `/v1/backends`: register (create or replace) and read backends. */
import { createRoute } from "@hono/zod-openapi"
import { autoscales, reportsCapacity, reportsHealth } from "../../backends/protocol"
import { assertAvailable, withBackend } from "../../backends/registry"
import { Backend, CreateBackendRequest } from "../../model/backend"
import { z } from "../../model/zod"
import { NotFoundError, NotSupportedError, VisibleError } from "../../util/errors"
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

const BackendStatusBody = z
  .object({
    id: z.string().describe("Backend id."),
    descriptor: z
      .record(z.string(), z.unknown())
      .describe("Kind, advertised attributes, scale groups, display name."),
    lastTick: z
      .record(z.string(), z.unknown())
      .describe("What the last control-loop pass saw (health, error)."),
    status: z.record(z.string(), z.unknown()).describe("Live status from the backend, or `{ error }`."),
    capacity: z.record(z.string(), z.unknown()).describe("Total and free resources, or `{ error }`."),
    autoscaler: z
      .record(z.string(), z.unknown())
      .describe("Each scale group's last decision and why, or `{ error }`."),
  })
  .openapi("BackendStatus")

export function backendRoutes(app: App, deps: ApiDeps): void {
  app.openapi(
    createRoute({
      method: "post",
      path: "/v1/backends",
      tags: ["backends"],
      summary: "Register a backend, or replace its config",
      description:
        "201 when created, 200 when an existing backend's config was replaced (or was already the same). A type this release has no implementation of is refused with 422 `backend.not_available`, and nothing is written.",
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
      assertAvailable(body.config.type)
      // A `local` scale group starts processes on the control plane's own host: the operator's call.
      const local =
        body.config.type === "workers"
          ? body.config.scaleGroups.findIndex((g) => g.provider.type === "local")
          : -1
      if (local >= 0 && !caller.operator)
        throw new VisibleError(
          "backend.local_provider_operator_only",
          `config.scaleGroups[${local}].provider: "local" starts workers on the control plane's own host, so only an operator key (an admin key of the operator project) may register it; use another provider, or ask the operator`,
          403,
          [
            {
              path: `config.scaleGroups.${local}.provider.type`,
              message: "only the operator may use the local provider",
            },
          ],
        )
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

  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/backends/{id}/status",
      tags: ["backends"],
      summary: "What the backend is now: descriptor, health, capacity and the autoscaler's decisions",
      security,
      request: { params: idParam("Backend") },
      responses: { 200: jsonResponse(BackendStatusBody, "The backend's status."), ...errors(401, 404) },
    }),
    async (c) => {
      const { id } = c.req.valid("param")
      const record = await deps.repos.backends.get(c.get("caller").project, id)
      if (!record) throw new NotFoundError("backend", id)
      const settle = async <T>(run: () => Promise<T>): Promise<T | { error: string }> =>
        run().catch((error: unknown) => ({ error: error instanceof Error ? error.message : String(error) }))
      const body = await withBackend(record, deps, async (backend) => {
        const live = {
          status: await settle(() => backend.status()),
          capacity: await settle(async () => {
            if (!reportsCapacity(backend))
              throw new NotSupportedError(record.config.type, "resource capacity")
            return backend.resourceCapacity()
          }),
          // A backend that does not autoscale has no scale group decisions to show.
          autoscaler: autoscales(backend) ? await settle(() => backend.autoscalerStatus()) : { groups: [] },
        }
        // This was a contact: its result is the backend's health from now on, as a pass's would be.
        const health = reportsHealth(backend) ? backend.health() : undefined
        let lastTick = record.status
        if (
          health &&
          (health.healthy !== record.status.healthy || health.message !== record.status.message)
        ) {
          lastTick = { ...health, checkedAt: new Date(deps.clock.now()).toISOString() }
          await deps.repos.backends.setStatus(record.project, record.id, lastTick)
        }
        return { id: record.id, descriptor: backend.descriptor, lastTick, ...live }
      })
      return c.json(body, 200)
    },
  )
}
