/**
 * Authentication and authorisation. A key arrives as `Authorization: Bearer <key>` (or `X-Api-Key`),
 * is looked up by its peppered hash on every request (so a revocation holds at once), and becomes the
 * request's `caller` (project and role). Every route then acts only inside `caller.project`, so one
 * project never sees another's objects.
 *
 * Roles: `read` ⊂ `write` ⊂ `admin`, and `worker` apart (`RoleGrants`). A `worker` key reaches only
 * the worker agent's routes and `/v1/me`; this module refuses it everything else, so no route has to
 * remember that a key may lack `read`.
 */
import type { MiddlewareHandler } from "hono"
import type { Role } from "../model/states"
import { RoleGrants } from "../model/states"
import { iso } from "../util/clock"
import { ForbiddenError, UnauthorizedError, VisibleError } from "../util/errors"
import type { ApiDeps, ApiEnv } from "./context"

function keyFrom(authorization: string | undefined, apiKey: string | undefined): string | undefined {
  if (apiKey) return apiKey.trim()
  if (!authorization) return undefined
  const [scheme, value] = authorization.split(/\s+/, 2)
  return scheme?.toLowerCase() === "bearer" && value ? value : undefined
}

const newKeyHint = (project: string) =>
  `ask an admin of project "${project}" for a new key (POST /v1/projects/${project}/keys, or \`swarmplane key create\`)`

/** The routes a `worker` key may call: what an agent needs, and who-am-I. */
const workerRoutes: [method: string, path: RegExp][] = [
  ["POST", /^\/v1\/workers\/register\/?$/],
  ["POST", /^\/v1\/workers\/[^/]+\/(heartbeat|leave)\/?$/],
  ["GET", /^\/v1\/me\/?$/],
]

/** The least role a route other than the worker agent's needs, for the message a worker key gets. */
function leastRoleFor(method: string, path: string): Role {
  if (path.startsWith("/v1/projects") || (method !== "GET" && path.startsWith("/v1/backends"))) return "admin"
  return method === "GET" ? "read" : "write"
}

export function authenticate(deps: ApiDeps): MiddlewareHandler<ApiEnv> {
  return async (c, next) => {
    const key = keyFrom(c.req.header("Authorization"), c.req.header("X-Api-Key"))
    if (!key) throw new UnauthorizedError("missing API key: send `Authorization: Bearer <key>`")
    const info = key.length <= 512 ? await deps.repos.projects.verifyKey(key) : undefined
    if (!info)
      throw new UnauthorizedError(
        "API key not recognised: check the key, or create one with POST /v1/projects/{project}/keys",
      )
    // A key that no longer works says why and since when: its holder has the secret, so this tells them
    // nothing they could not learn, and it saves them guessing at a typo.
    if (info.revokedAt)
      throw new VisibleError(
        "auth.key_revoked",
        `this API key (${info.id}) was revoked at ${info.revokedAt}; ${newKeyHint(info.project)}`,
        401,
      )
    if (info.expiresAt && Date.parse(info.expiresAt) <= deps.clock.now())
      throw new VisibleError(
        "auth.key_expired",
        `this API key (${info.id}) expired at ${info.expiresAt} (it is now ${iso(deps.clock.now())}); ${newKeyHint(info.project)}`,
        401,
      )
    if (
      !roleAllows(info.role, "read") &&
      !workerRoutes.some(([method, path]) => method === c.req.method && path.test(c.req.path))
    )
      requireRole(info, leastRoleFor(c.req.method, c.req.path))
    c.set("caller", {
      project: info.project,
      role: info.role,
      keyId: info.id,
      operator: info.project === deps.operatorProject && info.role === "admin",
    })
    await next()
  }
}

/** Whether a key with role `have` may do what needs `need` (`RoleGrants`: admin ⊇ write ⊇ read; worker apart). */
export function roleAllows(have: Role, need: Role): boolean {
  return RoleGrants[have].includes(need)
}

const roleText: Record<Role, string> = {
  read: "may only list and get",
  write: "may not manage backends or keys",
  admin: "",
  worker: "may only register worker agents and report for them",
}

/** Throw 403 unless the caller's role includes `need`. */
export function requireRole(caller: { role: Role }, need: Role): void {
  if (!roleAllows(caller.role, need))
    throw new ForbiddenError(
      `this needs a key with role "${need}"; yours is "${caller.role}", which ${roleText[caller.role]}`,
    )
}
