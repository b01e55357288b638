/** Picking the backend a swarm or job runs on, with errors that say how to fix the request. */
import type { Backend } from "../model/backend"
import { VisibleError } from "../util/errors"
import type { ApiDeps } from "./context"

export async function resolveBackend(
  deps: ApiDeps,
  project: string,
  requested: string | undefined,
  field = "backendId",
): Promise<Backend> {
  if (requested) {
    const backend = await deps.repos.backends.get(project, requested)
    if (!backend)
      throw new VisibleError(
        "backend.not_found",
        `${field}: backend "${requested}" is not registered in this project; see GET /v1/backends`,
        400,
        [{ path: field, message: `backend "${requested}" is not registered in this project` }],
      )
    return backend
  }
  const all = await deps.repos.backends.list(project)
  if (all.length === 1) return all[0]!
  if (all.length === 0)
    throw new VisibleError(
      "backend.none",
      "no backend is registered in this project: register one with POST /v1/backends",
      400,
      [{ path: field, message: "no backend registered" }],
    )
  throw new VisibleError(
    "backend.ambiguous",
    `${field}: this project has ${all.length} backends (${all.map((b) => b.id).join(", ")}); name one`,
    400,
    [{ path: field, message: `one of ${all.map((b) => `"${b.id}"`).join(", ")}` }],
  )
}
