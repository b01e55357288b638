/**
 * The fake cluster's resource types and the wire helpers every part shares: which kinds it serves
 * (group, version, plural, kind, namespaced), Kubernetes `Status` errors with the exact messages and
 * `details` of Part D, and resource quantities (`500m`, `16Gi`) as Kueue counts quota.
 */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json }
export type JsonObject = { [key: string]: Json }

export const isObject = (v: unknown): v is JsonObject =>
  typeof v === "object" && v !== null && !Array.isArray(v)

export const asObject = (v: Json | undefined): JsonObject => (isObject(v) ? v : {})
export const asArray = (v: Json | undefined): Json[] => (Array.isArray(v) ? v : [])

export function condition(
  type: string,
  status: string,
  at: string,
  reason?: string,
  message?: string,
): JsonObject {
  const c: JsonObject = { type, status, lastProbeTime: null, lastTransitionTime: at }
  if (reason) c.reason = reason
  if (message) c.message = message
  return c
}

export interface ResourceType {
  group: string
  version: string
  plural: string
  kind: string
  namespaced: boolean
}

const type = (group: string, version: string, plural: string, kind: string, namespaced = true) => ({
  group,
  version,
  plural,
  kind,
  namespaced,
})

export const Types = {
  namespaces: type("", "v1", "namespaces", "Namespace", false),
  pods: type("", "v1", "pods", "Pod"),
  services: type("", "v1", "services", "Service"),
  jobs: type("batch", "v1", "jobs", "Job"),
  deployments: type("apps", "v1", "deployments", "Deployment"),
  workloads: type("kueue.x-k8s.io", "v1beta1", "workloads", "Workload"),
  localqueues: type("kueue.x-k8s.io", "v1beta1", "localqueues", "LocalQueue"),
  clusterqueues: type("kueue.x-k8s.io", "v1beta1", "clusterqueues", "ClusterQueue", false),
  resourceflavors: type("kueue.x-k8s.io", "v1beta1", "resourceflavors", "ResourceFlavor", false),
  workloadpriorityclasses: type(
    "kueue.x-k8s.io",
    "v1beta1",
    "workloadpriorityclasses",
    "WorkloadPriorityClass",
    false,
  ),
} as const satisfies Record<string, ResourceType>

/** The type served at `/api/v1/...` (group "") or `/apis/{group}/{version}/...`, if the fake serves it. */
export function findType(group: string, version: string, plural: string): ResourceType | undefined {
  return Object.values(Types).find((t) => t.group === group && t.version === version && t.plural === plural)
}

export const apiVersion = (t: ResourceType) => (t.group ? `${t.group}/${t.version}` : t.version)
/** `jobs.batch`, `pods`, `workloads.kueue.x-k8s.io`: how Status messages name a resource. */
export const qualified = (t: ResourceType) => (t.group ? `${t.plural}.${t.group}` : t.plural)

/** A Kubernetes API error: the HTTP status and the `Status` object the apiserver answers with. */
export class KubeError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
    readonly details?: JsonObject,
    readonly headers: Record<string, string> = {},
  ) {
    super(message)
  }

  status(): JsonObject {
    const body: JsonObject = {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: this.message,
      reason: this.reason,
    }
    if (this.details) body.details = this.details
    body.code = this.code
    return body
  }
}

const details = (t: ResourceType, name: string): JsonObject => ({ name, group: t.group, kind: t.plural })

export const notFound = (t: ResourceType, name: string) =>
  new KubeError(404, "NotFound", `${qualified(t)} "${name}" not found`, details(t, name))

export const alreadyExists = (t: ResourceType, name: string) =>
  new KubeError(409, "AlreadyExists", `${qualified(t)} "${name}" already exists`, details(t, name))

export const conflict = (t: ResourceType, name: string) =>
  new KubeError(
    409,
    "Conflict",
    `Operation cannot be fulfilled on ${qualified(t)} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
    details(t, name),
  )

export const badRequest = (message: string) => new KubeError(400, "BadRequest", message)

/** 422 Invalid, with one cause, as field validation answers (`Job.batch "x" is invalid: field: message`). */
export function invalid(
  t: ResourceType,
  name: string,
  field: string,
  message: string,
  reason = "FieldValueInvalid",
) {
  const kind = t.group ? `${t.kind}.${t.group}` : t.kind
  return new KubeError(422, "Invalid", `${kind} "${name}" is invalid: ${field}: ${message}`, {
    name,
    group: t.group,
    kind: t.kind,
    causes: [{ reason, message, field }],
  })
}

export const unauthorized = () => new KubeError(401, "Unauthorized", "Unauthorized")

const binary: Record<string, number> = {
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
}
const decimal: Record<string, number> = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  "": 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
}

/** A resource quantity (`8`, `500m`, `200Gi`, `1e3`) as a number of base units; NaN if malformed. */
export function parseQuantity(q: Json | undefined): number {
  if (typeof q === "number") return q
  if (typeof q !== "string") return Number.NaN
  const m = /^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$/.exec(q.trim())
  if (!m?.[1]) return Number.NaN
  const unit = m[2] ?? ""
  const factor = binary[unit] ?? decimal[unit]
  return factor === undefined ? Number.NaN : Number(m[1]) * factor
}

/** A quantity as Kubernetes would print it: whole numbers plain, milli-units for CPU, binary suffixes for bytes. */
export function formatQuantity(n: number): string {
  if (!Number.isInteger(n)) return `${Math.round(n * 1000)}m`
  for (const [unit, factor] of Object.entries(binary).reverse())
    if (n >= factor && n % factor === 0) return `${n / factor}${unit}`
  return String(n)
}
