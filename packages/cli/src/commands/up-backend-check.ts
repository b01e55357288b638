/**
 * Before `up` sends a domyn-swarm file that names fields of the registered Lepton backend
 * (`workspace_id`, `endpoint.allowed_dedicated_node_groups`, ...): find the backend the API will place
 * the swarm on, the same way it does, and refuse the file, with each field's line and where it belongs,
 * when that backend does not have what the file asks for. Nothing is created then.
 */
import { checkBackendFields, type LiveNodeGroup } from "../backend-fields"
import type { Backend, Client } from "../client"
import type { Ctx } from "../context"
import { CliError, ExitCode } from "../errors"
import { formatIssue, type SpecFile } from "../files"
import { isRecord } from "../http"
import { note } from "../kit"

export async function checkUpBackend(ctx: Ctx, api: Client, spec: SpecFile, body: Record<string, unknown>) {
  if (!spec.backendChecks.length) return
  const backend = await placedOn(api, body)
  // No single backend of that type, or one of another type: the API refuses the swarm and says why.
  const config = backend?.config
  if (!backend || config?.type !== "lepton") return
  const needsLive = spec.backendChecks.some(
    (c) => c.field === "nodeGroup" && !(c.value as string[]).includes(config.nodeGroup),
  )
  const live = needsLive ? await liveNodeGroup(api, backend.id) : undefined
  // One check at a time, so that each issue keeps the line and column of the field it is about.
  const issues = spec.backendChecks.flatMap(({ line, col, ...check }) =>
    checkBackendFields([check], backend, live).map((issue) => ({ ...issue, line, col })),
  )
  if (!issues.length) return
  const shown = spec.file
  for (const issue of issues) note(ctx, formatIssue(shown, issue))
  throw new CliError(
    `${shown} asks for what backend "${backend.id}" does not have: ${issues.length} error${issues.length > 1 ? "s" : ""} (above); nothing was created`,
    ExitCode.invalid,
  )
}

/** The backend the API resolves: the one named, else the project's only one of the file's type. */
async function placedOn(api: Client, body: Record<string, unknown>): Promise<Backend | undefined> {
  if (typeof body.backendId === "string") return api.getBackend(body.backendId).catch(() => undefined)
  const fitting = (await api.listBackends()).filter((b) => b.config.type === (body.backendType ?? "lepton"))
  return fitting.length === 1 ? fitting[0] : undefined
}

/** The node group the backend resolved (`backend status`), for a file that names it by its other name. */
async function liveNodeGroup(api: Client, id: string): Promise<LiveNodeGroup | undefined> {
  const status = await api.backendStatus(id).catch(() => undefined)
  const group = status && "detail" in status.status ? status.status.detail.nodeGroup : undefined
  if (!isRecord(group)) return undefined
  return {
    ...(typeof group.id === "string" ? { id: group.id } : {}),
    ...(typeof group.name === "string" ? { name: group.name } : {}),
  }
}
