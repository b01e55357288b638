/** `/v1/swarms`: create-or-update by name, list, get (optionally waiting for a phase), delete. */
import { createRoute } from "@hono/zod-openapi"
import { pageOf } from "../../model/api"
import { PageQuery } from "../../model/common"
import { Event } from "../../model/event"
import type { SwarmPhase } from "../../model/states"
import { Swarm, SwarmGetQuery, SwarmMetrics, SwarmRequest } from "../../model/swarm"
import { replicaFigures, series, windowFigures } from "../../rules/swarm-metrics"
import { waitState } from "../../rules/swarm-phase"
import { type Clock, iso } from "../../util/clock"
import { requireRole } from "../auth"
import { type ApiDeps, enqueue } from "../context"
import {
  type App,
  errors,
  idempotencyHeader,
  jsonBody,
  jsonResponse,
  nameParam,
  security,
} from "../openapi-helpers"
import { resolveBackend } from "../resolve"

const SwarmPage = pageOf(Swarm, "SwarmPage")
const EventPage = pageOf(Event, "SwarmEventPage")
const PollMs = 1000

/** Poll until the swarm reaches `wanted`, comes to rest elsewhere, or the deadline passes. */
async function waitFor(
  load: () => Promise<Swarm>,
  wanted: SwarmPhase,
  timeoutS: number,
  clock: Clock,
): Promise<{ swarm: Swarm; result: "reached" | "settled" | "timeout" }> {
  const deadline = clock.now() + timeoutS * 1000
  for (;;) {
    const swarm = await load()
    const state = waitState(swarm, wanted)
    if (state !== "waiting") return { swarm, result: state }
    const left = deadline - clock.now()
    if (left <= 0) return { swarm, result: "timeout" }
    await clock.sleep(Math.min(PollMs, left))
  }
}

export function swarmRoutes(app: App, deps: ApiDeps): void {
  app.openapi(
    createRoute({
      method: "post",
      path: "/v1/swarms",
      tags: ["swarms"],
      summary: "Create a swarm, or update the one with this name",
      description:
        "Answers 202: the control loop moves the swarm through PENDING → INITIALIZING → RUNNING. " +
        "`Swarmplane-Created: true|false` tells whether it was created.",
      security,
      request: { headers: idempotencyHeader, body: jsonBody(SwarmRequest, "The swarm spec.") },
      responses: { 202: jsonResponse(Swarm, "Accepted."), ...errors(400, 401, 403, 409, 422) },
    }),
    async (c) => {
      const caller = c.get("caller")
      requireRole(caller, "write")
      const spec = c.req.valid("json")
      const existing = await deps.repos.swarms.get(caller.project, spec.name)
      const backend = await resolveBackend(
        deps,
        caller.project,
        spec.backendId ?? existing?.backendId,
        "backendId",
        spec.backendType,
      )
      const { swarm, created, changed } = await deps.transitions.swarms.apply(caller.project, {
        ...spec,
        backendId: backend.id,
      })
      if (changed)
        await enqueue(deps, [
          {
            kind: "swarm",
            project: caller.project,
            id: swarm.name,
            reason: created ? "swarm.created" : "swarm.updated",
            backendId: backend.id,
          },
        ])
      c.header("Swarmplane-Created", String(created))
      return c.json(swarm, 202)
    },
  )

  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/swarms",
      tags: ["swarms"],
      summary: "List swarms",
      security,
      request: { query: PageQuery },
      responses: { 200: jsonResponse(SwarmPage, "A page of swarms, by name."), ...errors(400, 401) },
    }),
    async (c) => {
      const query = c.req.valid("query")
      const page = await deps.repos.swarms.list(c.get("caller").project, query)
      return c.json({ items: page.items, ...(page.cursor ? { nextCursor: page.cursor } : {}) }, 200)
    },
  )

  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/swarms/{name}",
      tags: ["swarms"],
      summary: "Get a swarm; with `wait`, answer once it reaches that phase",
      description:
        "With `?wait=RUNNING&timeoutS=20` the answer comes when the swarm is RUNNING on its current generation, has come to rest in FAILED or STOPPED, " +
        "or the timeout passed; header `Swarmplane-Wait` says which (`reached`, `settled`, `timeout`). Clients loop for longer waits.",
      security,
      request: { params: nameParam("Swarm"), query: SwarmGetQuery },
      responses: { 200: jsonResponse(Swarm, "The swarm."), ...errors(400, 401, 404) },
    }),
    async (c) => {
      const project = c.get("caller").project
      const { name } = c.req.valid("param")
      const query = c.req.valid("query")
      const load = () => deps.repos.swarms.mustGet(project, name)
      if (!query.wait) return c.json(await load(), 200)
      const { swarm, result } = await waitFor(load, query.wait, query.timeoutS, deps.clock)
      c.header("Swarmplane-Wait", result)
      return c.json(swarm, 200)
    },
  )

  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/swarms/{name}/events",
      tags: ["swarms"],
      summary: "Events of a swarm, oldest first",
      security,
      request: { params: nameParam("Swarm"), query: PageQuery },
      responses: { 200: jsonResponse(EventPage, "A page of events."), ...errors(400, 401, 404) },
    }),
    async (c) => {
      const project = c.get("caller").project
      const { name } = c.req.valid("param")
      await deps.repos.swarms.mustGet(project, name)
      const page = await deps.repos.events.ofSwarm(project, name, c.req.valid("query"))
      return c.json({ items: page.items, ...(page.cursor ? { nextCursor: page.cursor } : {}) }, 200)
    },
  )

  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/swarms/{name}/metrics",
      tags: ["swarms"],
      summary: "A swarm's traffic over the last 1, 5 and 15 minutes",
      description:
        "From the counters of the swarm's router (swarms on the `workers` and `slurm` backends), sampled every 10 s at most: requests per second, the share that failed (no replica answered, or 5xx), latency, time-to-first-token and router queue-wait percentiles (each the upper bound of its histogram bucket, in seconds; `null` above the top bucket of 120 s), and completion tokens per second; per replica, the same figures between the last two samples. A window is absent until two samples fall in it.",
      security,
      request: { params: nameParam("Swarm") },
      responses: { 200: jsonResponse(SwarmMetrics, "The swarm's metrics."), ...errors(401, 404) },
    }),
    async (c) => {
      const project = c.get("caller").project
      const { name } = c.req.valid("param")
      const swarm = await deps.repos.swarms.mustGet(project, name)
      const samples = (await deps.repos.swarms.metrics(project, name))?.data.samples ?? []
      const origin = (u: string) => (URL.canParse(u) ? new URL(u).origin : u)
      const slots = new Map(
        (swarm.replicaSet?.replicas ?? []).flatMap((r) => (r.url ? [[origin(r.url), r] as const] : [])),
      )
      const last = samples.at(-1)
      return c.json(
        {
          name,
          ...(last ? { sampledAt: iso(last.at), inFlight: last.inFlight } : {}),
          windows: windowFigures(samples),
          replicas: replicaFigures(samples).map((r) => {
            const slot = slots.get(origin(r.url))
            return slot ? { ...r, slot: slot.slot, generation: slot.generation } : r
          }),
          series: series(samples).map((p) => ({ ...p, at: iso(p.at) })),
        },
        200,
      )
    },
  )

  app.openapi(
    createRoute({
      method: "delete",
      path: "/v1/swarms/{name}",
      tags: ["swarms"],
      summary: "Delete a swarm",
      description:
        "Answers 202 with `desired: deleted`; the control loop tears the deployment down and the swarm ends STOPPED.",
      security,
      request: { params: nameParam("Swarm") },
      responses: { 202: jsonResponse(Swarm, "Accepted."), ...errors(401, 403, 404) },
    }),
    async (c) => {
      const caller = c.get("caller")
      requireRole(caller, "write")
      const { name } = c.req.valid("param")
      const swarm = await deps.transitions.swarms.requestDelete(caller.project, name)
      await enqueue(deps, [
        {
          kind: "swarm",
          project: caller.project,
          id: name,
          reason: "swarm.delete_requested",
          ...(swarm.backendId ? { backendId: swarm.backendId } : {}),
        },
      ])
      return c.json(swarm, 202)
    },
  )
}
