/**
 * domyn-swarm Lepton fields that swarmplane keeps on the registered backend, not on a swarm
 * (`workspace_id`, `endpoint.allowed_dedicated_node_groups`, `endpoint.mounts`,
 * `endpoint.api_token_secret_name`, `endpoint.image_pull_secrets`). A domyn file names them on every
 * swarm; swarmplane accepts the file when the backend it runs on already has what they ask for, and
 * refuses it, before anything is created, naming the field and the backend field it belongs in, when not.
 */
import type { Backend } from "./client"
import { isRecord } from "./http"
import type { Issue, Path } from "./normalize"
import type { BackendField } from "./swarm-rules"

/** A value the file gives for a backend field, where the file gives it. */
export interface BackendCheck {
  path: Path
  field: BackendField
  value: unknown
}

/** The node group the backend resolved its `nodeGroup` to, as `backend status` shows it. */
export interface LiveNodeGroup {
  id?: string
  name?: string
}

const strings = (value: unknown): value is string[] =>
  Array.isArray(value) && value.every((v) => typeof v === "string")

/** domyn's mount: `{ path, from, mount_path, mount_options: { read_only } }` (camelCase also read). */
interface DomynMount {
  path?: unknown
  from?: unknown
  mount_path?: unknown
  mountPath?: unknown
  mount_options?: { read_only?: unknown } | null
}

/** Why a value is not of the field's shape, or undefined: checked offline, before `up` reads the backend. */
export function shapeProblem(field: BackendField, value: unknown): string | undefined {
  switch (field) {
    case "workspaceId":
    case "endpointTokenSecret":
      return typeof value === "string" ? undefined : "must be a string"
    case "nodeGroup":
    case "imagePullSecrets":
      return strings(value) ? undefined : "must be a list of names"
    case "mounts":
      return Array.isArray(value) &&
        value.every((m) => isRecord(m) && typeof m.path === "string" && typeof m.from === "string")
        ? undefined
        : "must be a list of mounts such as { path: /, from: node-nfs:shared, mount_path: /mnt/shared }"
  }
}

/** Whether the file asks for nothing (domyn's `null` and empty lists are its defaults of "none"). */
export const asksNothing = (value: unknown) => value === null || (Array.isArray(value) && value.length === 0)

const quoted = (values: readonly unknown[]) => values.map((v) => JSON.stringify(v)).join(", ")

/** Issues for the checks `backend` does not satisfy; `live` is its resolved node group, when known. */
export function checkBackendFields(checks: BackendCheck[], backend: Backend, live?: LiveNodeGroup): Issue[] {
  const config = backend.config as Record<string, unknown>
  const issues: Issue[] = []
  const refuse = (check: BackendCheck, has: string, wants: string) =>
    issues.push({
      path: check.path,
      message: `backend "${backend.id}" has ${has}, but this asks for ${wants}: swarmplane keeps \`${check.field}\` on the registered backend, not on the swarm; run on a lepton backend with that \`${check.field}\` (up --backend ID, or register one with swarmplane backend add -f backend.yaml), or remove it here`,
    })
  for (const check of checks) {
    const has = config[check.field]
    switch (check.field) {
      case "workspaceId":
      case "endpointTokenSecret":
        if (has !== check.value)
          refuse(
            check,
            has === undefined ? `no ${check.field}` : `${check.field} ${JSON.stringify(has)}`,
            JSON.stringify(check.value),
          )
        break
      case "nodeGroup": {
        const wanted = check.value as string[]
        const names = [has, live?.id, live?.name].filter((v) => typeof v === "string")
        if (!names.some((n) => wanted.includes(n)))
          refuse(check, `nodeGroup ${quoted(names)}`, `one of ${quoted(wanted)}`)
        break
      }
      case "imagePullSecrets": {
        const own = strings(has) ? has : []
        const missing = (check.value as string[]).filter((s) => !own.includes(s))
        if (missing.length) refuse(check, `imagePullSecrets [${quoted(own)}]`, quoted(missing))
        break
      }
      case "mounts": {
        const own = Array.isArray(has) ? (has as Record<string, unknown>[]) : []
        const missing = (check.value as DomynMount[]).filter((m) => !own.some((o) => sameMount(m, o)))
        if (missing.length)
          refuse(
            check,
            `${own.length} mount${own.length === 1 ? "" : "s"} (${own.map(mountText).join("; ") || "none"})`,
            missing.map((m) => mountText(camelMount(m))).join("; "),
          )
        break
      }
    }
  }
  return issues
}

function camelMount(m: DomynMount): Record<string, unknown> {
  const readOnly = m.mount_options?.read_only
  return {
    path: m.path,
    from: m.from,
    mountPath: m.mount_path ?? m.mountPath ?? m.path,
    ...(typeof readOnly === "boolean" ? { readOnly } : {}),
  }
}

/** The same storage at the same place; read-only only compared when the file says. */
function sameMount(m: DomynMount, own: Record<string, unknown>): boolean {
  const want = camelMount(m)
  return (
    own.path === want.path &&
    own.from === want.from &&
    own.mountPath === want.mountPath &&
    (want.readOnly === undefined || Boolean(own.readOnly) === want.readOnly)
  )
}

const mountText = (m: Record<string, unknown>) =>
  `{ path: ${String(m.path)}, from: ${String(m.from)}, mountPath: ${String(m.mountPath)}${m.readOnly === undefined ? "" : `, readOnly: ${String(m.readOnly)}`} }`
