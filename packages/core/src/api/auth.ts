/**
 * Authentication and authorisation. A key arrives as `Authorization: Bearer <key>` (or `X-Api-Key`),
 * is looked up by its peppered hash, and becomes the request's `caller` (project and role). Every
 * route then acts only inside `caller.project`, so one project never sees another's objects.
 */
import type { MiddlewareHandler } from "hono"
import type { Role } from "../model/states"
import { Roles } from "../model/states"
import { ForbiddenError, UnauthorizedError } from "../util/errors"
import type { ApiDeps, ApiEnv } from "./context"

function keyFrom(authorization: string | undefined, apiKey: string | undefined): string | undefined {
  if (apiKey) return apiKey.trim()
  if (!authorization) return undefined
  const [scheme, value] = authorization.split(/\s+/, 2)
  return scheme?.toLowerCase() === "bearer" && value ? value : undefined
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
    c.set("caller", {
      project: info.project,
      role: info.role,
      keyId: info.id,
      operator: info.project === deps.operatorProject && info.role === "admin",
    })
    await next()
  }
}

/** Whether `have` includes `need` (admin ⊇ write ⊇ read). */
export function roleAllows(have: Role, need: Role): boolean {
  return Roles.indexOf(have) >= Roles.indexOf(need)
}

/** Throw 403 unless the caller's role includes `need`. */
export function requireRole(caller: { role: Role }, need: Role): void {
  if (!roleAllows(caller.role, need))
    throw new ForbiddenError(`this needs a key with role "${need}"; yours is "${caller.role}"`)
}
