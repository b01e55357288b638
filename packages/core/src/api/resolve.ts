/**
 * Picking the backend a swarm or job runs on, with errors that say how to fix the request. A request
 * that names a backend type (a domyn-swarm file's `backend.type`) only ever goes to a backend of that
 * type: it is never placed on another kind of cluster where it could not fit or run.
 */
import type { Backend } from "../model/backend"
import type { BackendType } from "../model/states"
import { VisibleError } from "../util/errors"
import type { ApiDeps } from "./context"

/** How a user names a backend: the API field, and the CLI flag that sets it. */
const howToName = (field: string) => `name one with ${field} (CLI: --backend ID)`

export async function resolveBackend(
  deps: ApiDeps,
  project: string,
  requested: string | undefined,
  field = "backendId",
  type?: BackendType,
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
    if (type && backend.config.type !== type)
      throw new VisibleError(
        "backend.wrong_type",
        `${field}: backend "${requested}" is a ${backend.config.type} backend, but this asks for ${type}; name a ${type} backend or drop backendType`,
        400,
        [{ path: field, message: `a ${type} backend, not "${requested}" (${backend.config.type})` }],
      )
    return backend
  }
  const all = await deps.repos.backends.list(project)
  const fitting = type ? all.filter((b) => b.config.type === type) : all
  if (fitting.length === 1) return fitting[0]!
  const path = type ? "backendType" : field
  const others = all.length ? ` (it has ${all.map((b) => `${b.id}: ${b.config.type}`).join(", ")})` : ""
  if (fitting.length === 0)
    throw new VisibleError(
      "backend.none",
      type
        ? `no ${type} backend is registered in this project${others}: register one with POST /v1/backends (CLI: swarmplane backend add -f ${type}.yaml); this never runs on another type`
        : "no backend is registered in this project: register one with POST /v1/backends (CLI: swarmplane backend add -f FILE)",
      400,
      [{ path, message: type ? `no ${type} backend registered` : "no backend registered" }],
    )
  throw new VisibleError(
    "backend.ambiguous",
    `${field}: this project has ${fitting.length} ${type ? `${type} ` : ""}backends (${fitting.map((b) => b.id).join(", ")}); ${howToName(field)}`,
    400,
    [{ path: field, message: `one of ${fitting.map((b) => `"${b.id}"`).join(", ")}` }],
  )
}
