/** `/v1/workers`: registration and heartbeats of worker agents, and the worker listing. */
import { createRoute } from "@hono/zod-openapi"
import { heartbeat } from "../../backends/workers/heartbeat"
import { holdMs, holdUntilChanged, inStep, MaxHoldS } from "../../backends/workers/held-heartbeat"
import type { Role } from "../../model/states"
import {
  HeartbeatRequest,
  HeartbeatResponse,
  type ObservedAttempt,
  RegisterWorkerRequest,
  RegisterWorkerResponse,
  Worker,
  WorkerCredentialHeader,
} from "../../model/worker"
import { z } from "../../model/zod"
import { NotFoundError, VisibleError } from "../../util/errors"
import { roleAllows } from "../auth"
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

/** The heartbeat interval and grace of a worker's backend (its config's). */
async function timingOf(
  deps: ApiDeps,
  project: string,
  backendId: string,
): Promise<{ intervalS: number; graceS: number }> {
  const backend = await deps.repos.backends.get(project, backendId)
  return backend?.config.type === "workers"
    ? { intervalS: backend.config.heartbeatIntervalS ?? 5, graceS: backend.config.heartbeatGraceS ?? 50 }
    : { intervalS: 5, graceS: 50 }
}

/**
 * One heartbeat, held open when the worker asks to wait and runs exactly what it should: answered when
 * its desired set changes (a placement, a cancel) or after the hold (`held-heartbeat.ts`). A worker
 * whose attempt ended asks for a pass now, so what waits for its resources is placed at once.
 */
async function heartbeatMaybeHeld(
  deps: ApiDeps,
  project: string,
  id: string,
  observed: ObservedAttempt[],
  waitS: number,
  abort: AbortSignal,
) {
  const since = deps.assignments?.mark() ?? 0
  let { worker, desired, freed } = await heartbeat(deps, project, id, observed)
  const { intervalS, graceS } = await timingOf(deps, project, worker.backendId)
  if (freed)
    await enqueue(deps, [
      { kind: "backend", project, id: worker.backendId, reason: "worker.freed", backendId: worker.backendId },
    ])
  const hold = deps.heartbeatHold ? holdMs(waitS, graceS) : 0
  if (hold > 0 && inStep(desired, observed)) {
    const known = new Set(desired.map((d) => d.attemptUid))
    const end = await holdUntilChanged(deps, project, id, known, { holdMs: hold, since, abort })
    // The same observations again (their notes and tails are stored): the new set, and a worker
    // declared dead meanwhile is refused as any heartbeat would be.
    if (end === "changed")
      ({ worker, desired } = await heartbeat(
        deps,
        project,
        id,
        observed.map(({ attemptUid, state, exitCode, message }) => ({
          attemptUid,
          state,
          exitCode,
          message,
        })),
      ))
  }
  return {
    desired,
    heartbeatIntervalS: intervalS,
    ...(deps.heartbeatHold ? { holdS: Math.min(MaxHoldS, graceS / 3) } : {}),
  }
}

/**
 * Only the worker itself may heartbeat or leave: the request carries the credential its registration
 * returned. Another key holder (of this project or any) cannot act as it; a worker registered before
 * credentials existed is told to register again.
 */
async function actAs(
  deps: ApiDeps,
  project: string,
  id: string,
  credential: string | undefined,
): Promise<void> {
  switch (await deps.repos.workers.checkCredential(project, id, credential)) {
    case "ok":
      return
    case "unknown":
      if (!(await deps.repos.workers.get(project, id))) throw new NotFoundError("worker", id)
      throw new VisibleError("worker.dead", `worker "${id}" has no credential; register again`, 410, {
        workerId: id,
      })
    case "wrong":
      throw new VisibleError(
        "worker.credential_invalid",
        `only worker "${id}" may do this: send the credential its registration returned as ${WorkerCredentialHeader}`,
        403,
      )
  }
}

/**
 * Only a `worker` key (or an admin key of the project, for an operator by hand) may act as a worker
 * agent: a user's `write` key that could register would receive other users' task environments.
 */
function requireWorkerRole(caller: { role: Role; project: string }): void {
  if (!roleAllows(caller.role, "worker"))
    throw new VisibleError(
      "worker.role_required",
      `only a key with role "worker" (or "admin") may act as a worker agent; yours is "${caller.role}": create a key with role "worker" via POST /v1/projects/${caller.project}/keys (swarmplane key create --role worker) and give it to the agent`,
      403,
    )
}

export function workerRoutes(app: App, deps: ApiDeps): void {
  app.openapi(
    createRoute({
      method: "post",
      path: "/v1/workers/register",
      tags: ["workers"],
      summary: "Register a worker agent with a `workers` backend",
      description:
        "Needs a key with role `worker` (or `admin`); any other key gets 403 `worker.role_required`. Answers with the worker's `credential`, shown once.",
      security,
      request: {
        headers: idempotencyHeader,
        body: jsonBody(RegisterWorkerRequest, "The worker and what it offers."),
      },
      responses: { 201: jsonResponse(RegisterWorkerResponse, "Registered."), ...errors(400, 401, 403, 422) },
    }),
    async (c) => {
      const caller = c.get("caller")
      requireWorkerRole(caller)
      const body = c.req.valid("json")
      const backend = await deps.repos.backends.get(caller.project, body.backendId)
      if (backend?.config.type !== "workers")
        throw new VisibleError(
          "worker.backend_invalid",
          `backendId: "${body.backendId}" is not a registered backend of type "workers" in this project`,
          400,
          [{ path: "backendId", message: "must name a backend of type workers" }],
        )
      const groups = backend.config.scaleGroups.map((g) => g.name)
      if (body.scaleGroup && !groups.includes(body.scaleGroup))
        throw new VisibleError(
          "worker.scale_group_invalid",
          `scaleGroup: backend "${backend.id}" has no scale group "${body.scaleGroup}"${groups.length ? `; it has ${groups.join(", ")}` : ""}`,
          400,
          [{ path: "scaleGroup", message: `one of ${groups.map((g) => `"${g}"`).join(", ") || "(none)"}` }],
        )
      const { worker, credential } = await deps.repos.workers.register(caller.project, body)
      return c.json({ worker, heartbeatIntervalS: backend.config.heartbeatIntervalS, credential }, 201)
    },
  )

  app.openapi(
    createRoute({
      method: "post",
      path: "/v1/workers/{id}/heartbeat",
      tags: ["workers"],
      summary: "Heartbeat: report observed attempts, receive the complete desired set",
      description: `Only the worker itself: send the credential its registration returned as \`${WorkerCredentialHeader}\` (403 otherwise).`,
      security,
      request: {
        params: idParam("Worker"),
        headers: idempotencyHeader,
        query: z.object({
          waitS: z.coerce
            .number()
            .int()
            .min(0)
            .max(300)
            .optional()
            .describe(
              `Long-poll, where this control plane holds heartbeats (its answers carry \`holdS\`; the local plane does, a deployed one does not): when the worker already runs exactly its desired set, hold the answer until that set changes (new work placed on it, an attempt to stop) or for this many seconds, at most ${MaxHoldS} and a third of the backend's \`heartbeatGraceS\`. Absent or 0, or a plane that does not hold: answer at once.`,
            ),
        }),
        body: jsonBody(HeartbeatRequest, "What the worker observes."),
      },
      responses: {
        200: jsonResponse(HeartbeatResponse, "The desired attempts."),
        ...errors(400, 401, 403, 404, 410),
      },
    }),
    async (c) => {
      const caller = c.get("caller")
      requireWorkerRole(caller)
      const { id } = c.req.valid("param")
      await actAs(deps, caller.project, id, c.req.header(WorkerCredentialHeader))
      const answer = await heartbeatMaybeHeld(
        deps,
        caller.project,
        id,
        c.req.valid("json").attempts,
        c.req.valid("query").waitS ?? 0,
        c.req.raw.signal,
      )
      return c.json(answer, 200)
    },
  )

  app.openapi(
    createRoute({
      method: "post",
      path: "/v1/workers/{id}/leave",
      tags: ["workers"],
      summary: "Leave: a worker shutting down on purpose is dead at once; what it held is requeued",
      description: `Only the worker itself: send the credential its registration returned as \`${WorkerCredentialHeader}\` (403 otherwise).`,
      security,
      request: { params: idParam("Worker") },
      responses: {
        200: jsonResponse(Worker, "The worker, now dead."),
        ...errors(401, 403, 404, 410),
      },
    }),
    async (c) => {
      const caller = c.get("caller")
      requireWorkerRole(caller)
      const { id } = c.req.valid("param")
      await actAs(deps, caller.project, id, c.req.header(WorkerCredentialHeader))
      const worker = await deps.repos.workers.leave(caller.project, id)
      if (!worker) throw new NotFoundError("worker", id)
      return c.json(worker, 200)
    },
  )

  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/workers",
      tags: ["workers"],
      summary: "List workers",
      security,
      request: {
        query: z.object({
          backendId: z.string().max(63).optional().describe("Only workers of this backend."),
        }),
      },
      responses: {
        200: jsonResponse(z.object({ items: z.array(Worker).describe("The workers.") }), "Workers."),
        ...errors(400, 401),
      },
    }),
    async (c) => {
      const { backendId } = c.req.valid("query")
      return c.json({ items: await deps.repos.workers.list(c.get("caller").project, backendId) }, 200)
    },
  )
}
