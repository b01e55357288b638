/**
 * The fake cluster's Kubernetes API (Part D), served over TLS by `index.ts`: bearer-token auth as EKS
 * checks it (401 Status), per-resource 403s a test sets, injected 429/5xx faults, then the REST
 * semantics of the served types: create (201; 409 AlreadyExists), get (404 NotFound), list with
 * label/field selectors and `limit`/`continue`, PUT with resourceVersion conflicts, merge/strategic/
 * JSON PATCH, delete with `propagationPolicy`, and pod logs. What happens after a write (Kueue
 * admission, pods, processes) is the controllers' business (`kueue.ts`, `jobs.ts`, `kubelet.ts`, ...),
 * which `index.ts` runs after every write.
 */
import { Hono } from "hono"
import { groupList, resourceList } from "./discovery"
import { type Fault, takeFault } from "./faults"
import { jsonPatch, mergePatch, strategicMergePatch } from "./patch"
import {
  apiVersion,
  asObject,
  badRequest,
  conflict,
  findType,
  isObject,
  type Json,
  type JsonObject,
  KubeError,
  notFound,
  qualified,
  type ResourceType,
  Types,
  unauthorized,
} from "./resources"
import { meta, type Store } from "./store"
import { table, wantsTable } from "./table"
import { checkToken, type FakeIamUser } from "./token"

/** A rule that makes the caller's identity forbidden (403) for a resource, as missing RBAC would. */
export interface ForbiddenRule {
  /** The plural resource, e.g. `jobs`, `pods`, `pods/log`, `workloads`. */
  resource: string
  /** `get`, `list`, `create`, `update`, `patch`, `delete`; all when unset. */
  verb?: string
  namespace?: string
}

export interface ApiState {
  clusterName: string
  users: FakeIamUser[]
  now: () => number
  store: Store
  faults: Fault[]
  forbidden: ForbiddenRule[]
  /** Requests the API received, in order (faults and refusals included). */
  requests: { method: string; path: string; query: string }[]
  /** Defaults and mutating webhooks, applied to a new object before it is stored. */
  admit(t: ResourceType, o: JsonObject): void
  /** Validation on create and update; throws a 422. */
  validate(t: ResourceType, o: JsonObject): void
  /** A pod's log, as `GET .../pods/{name}/log` answers it (throws a Status error when it cannot). */
  podLog(namespace: string, name: string, container: string | undefined, previous: boolean): string
}

type Route = { t: ResourceType; namespace: string | undefined; name?: string; sub?: string }

export function fakeKubeApp(s: ApiState): Hono {
  const app = new Hono()
  app.onError((error) => {
    const e =
      error instanceof KubeError ? error : new KubeError(500, "InternalError", "Internal error occurred")
    return Response.json(e.status(), { status: e.code, headers: e.headers })
  })

  app.use("*", async (c, next) => {
    const url = new URL(c.req.url)
    s.requests.push({ method: c.req.method, path: url.pathname, query: url.search })
    const fault = takeFault(s.faults, c.req.method, url.pathname)
    if (fault) {
      if (fault.status === 429) {
        const seconds = fault.retryAfterSeconds ?? 1
        throw new KubeError(
          429,
          "TooManyRequests",
          "the server has received too many requests and has asked us to try again later",
          { retryAfterSeconds: seconds },
          { "Retry-After": String(seconds) },
        )
      }
      if (fault.status === 503)
        throw new KubeError(503, "ServiceUnavailable", "the server is currently unable to handle the request")
      throw new KubeError(500, "InternalError", "Internal error occurred: injected fault")
    }
    const check = await checkToken(c.req.header("authorization"), s.clusterName, s.users, s.now())
    if (!check.ok) throw unauthorized()
    c.set("user" as never, check.user as never)
    return next()
  })

  app.get("/version", (c) =>
    c.json({ major: "1", minor: "31", gitVersion: "v1.31.0-eks-fake", platform: "linux/amd64" }),
  )
  app.get("/api", (c) => c.json({ kind: "APIVersions", versions: ["v1"], serverAddressByClientCIDRs: [] }))
  app.get("/apis", (c) => c.json(groupList()))
  app.get("/api/v1", (c) => c.json(resourceList("", "v1")))
  app.get("/apis/:group/:version", (c) => c.json(resourceList(c.req.param("group"), c.req.param("version"))))

  app.all("*", async (c) => {
    const route = parseRoute(new URL(c.req.url).pathname)
    const verb = verbOf(c.req.method, route)
    const user = String(c.get("user" as never))
    forbid(s, user, verb, route)
    const q = (k: string) => c.req.query(k)
    const { t, namespace, name, sub } = route
    if (
      t.namespaced &&
      namespace !== undefined &&
      verb !== "list" &&
      verb !== "get" &&
      !nsExists(s, namespace)
    )
      throw notFound(Types.namespaces, namespace)

    if (sub === "log") {
      if (t !== Types.pods || namespace === undefined || name === undefined) throw notFound(t, name ?? "")
      s.store.get(t, namespace, name)
      let text = s.podLog(namespace, name, q("container"), q("previous") === "true")
      const tail = q("tailLines")
      if (tail !== undefined) {
        const lines = text.endsWith("\n") ? text.slice(0, -1).split("\n") : text.split("\n")
        const n = Number(tail)
        text = n <= 0 ? "" : `${lines.slice(-n).join("\n")}${text.length > 0 ? "\n" : ""}`
      }
      const limitBytes = Number(q("limitBytes") ?? 0)
      if (limitBytes > 0) text = text.slice(0, limitBytes)
      return c.text(text)
    }
    if (sub !== undefined && sub !== "status") throw notFound(t, name ?? "")

    switch (verb) {
      case "list": {
        const limit = q("limit") === undefined ? undefined : Number(q("limit"))
        if (limit !== undefined && (!Number.isInteger(limit) || limit < 0))
          throw badRequest("limit must be a non-negative integer")
        const page = s.store.list(t, namespace, {
          labelSelector: q("labelSelector"),
          fieldSelector: q("fieldSelector"),
          limit,
          continue: q("continue"),
        })
        const metadata: JsonObject = { resourceVersion: page.resourceVersion }
        if (page.continue) metadata.continue = page.continue
        if (page.remainingItemCount !== undefined) metadata.remainingItemCount = page.remainingItemCount
        if (wantsTable(c.req.header("accept"))) return c.json(table(t, page.items, metadata, s.now()))
        return c.json({ kind: `${t.kind}List`, apiVersion: apiVersion(t), metadata, items: page.items })
      }
      case "get": {
        const o = s.store.get(t, namespace ?? "", name ?? "")
        if (wantsTable(c.req.header("accept")))
          return c.json(table(t, [o], { resourceVersion: String(meta(o).resourceVersion) }, s.now()))
        return c.json(o)
      }
      case "create": {
        const body = await jsonBody(c.req.raw)
        checkIdentity(t, body, namespace)
        s.admit(t, body)
        s.validate(t, body)
        return c.json(s.store.create(t, namespace ?? "", body), 201)
      }
      case "update": {
        const body = await jsonBody(c.req.raw)
        checkIdentity(t, body, namespace)
        const current = s.store.get(t, namespace ?? "", name ?? "")
        const next = sub === "status" ? { ...structuredClone(current), status: body.status ?? null } : body
        s.validate(t, next)
        return c.json(s.store.replace(t, current, next, () => conflict(t, name ?? "")))
      }
      case "patch": {
        const current = s.store.get(t, namespace ?? "", name ?? "")
        const type = (c.req.header("content-type") ?? "").split(";")[0]?.trim()
        const patch = await anyBody(c.req.raw)
        let next: Json
        if (type === "application/merge-patch+json") next = mergePatch(current, patch)
        else if (type === "application/strategic-merge-patch+json") {
          if (t.group === "kueue.x-k8s.io")
            throw new KubeError(
              415,
              "UnsupportedMediaType",
              `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml`,
            )
          next = strategicMergePatch(current, patch)
        } else if (type === "application/json-patch+json") next = jsonPatch(current, patch)
        else
          throw new KubeError(
            415,
            "UnsupportedMediaType",
            `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json`,
          )
        if (!isObject(next)) throw badRequest("the patch does not give an object")
        if (sub === "status") next = { ...structuredClone(current), status: next.status ?? null }
        s.validate(t, next)
        const m = meta(next)
        m.resourceVersion ??= meta(current).resourceVersion ?? null
        return c.json(s.store.replace(t, current, next, () => conflict(t, name ?? "")))
      }
      case "delete": {
        const current = s.store.get(t, namespace ?? "", name ?? "")
        const options = c.req.header("content-length") === "0" ? {} : asObject(await anyBody(c.req.raw, {}))
        const policy =
          q("propagationPolicy") ??
          (typeof options.propagationPolicy === "string" ? options.propagationPolicy : undefined)
        return remove(s, t, current, policy)
      }
    }
    throw new KubeError(
      405,
      "MethodNotAllowed",
      `the server does not allow this method on the requested resource`,
    )
  })
  return app
}

/** `/api/v1/namespaces/{ns}/{plural}[/{name}[/{sub}]]`, `/apis/{g}/{v}/...`, or cluster-scoped and all-namespace forms. */
function parseRoute(path: string): Route {
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent)
  let group = ""
  let version = ""
  let rest: string[]
  if (parts[0] === "api") {
    version = parts[1] ?? ""
    rest = parts.slice(2)
  } else if (parts[0] === "apis") {
    group = parts[1] ?? ""
    version = parts[2] ?? ""
    rest = parts.slice(3)
  } else throw new KubeError(404, "NotFound", "the server could not find the requested resource")
  let namespace: string | undefined
  if (rest[0] === "namespaces" && rest.length >= 3) {
    namespace = rest[1]
    rest = rest.slice(2)
  }
  const t = findType(group, version, rest[0] ?? "")
  if (!t || (namespace !== undefined && !t.namespaced))
    throw new KubeError(404, "NotFound", "the server could not find the requested resource")
  if (t.namespaced && namespace === undefined && rest.length > 1)
    throw new KubeError(404, "NotFound", "the server could not find the requested resource")
  return { t, namespace, name: rest[1], sub: rest[2] }
}

function verbOf(method: string, route: Route): string {
  const named = route.name !== undefined
  switch (method) {
    case "GET":
      return named ? "get" : "list"
    case "POST":
      return named ? "unsupported" : "create"
    case "PUT":
      return named ? "update" : "unsupported"
    case "PATCH":
      return named ? "patch" : "unsupported"
    case "DELETE":
      return named ? "delete" : "deletecollection"
    default:
      return "unsupported"
  }
}

function forbid(s: ApiState, user: string, verb: string, route: Route): void {
  const resource = route.sub === "log" ? `${route.t.plural}/log` : route.t.plural
  const hit = s.forbidden.some(
    (r) =>
      r.resource === resource &&
      (r.verb === undefined || r.verb === verb) &&
      (r.namespace === undefined || r.namespace === route.namespace),
  )
  if (!hit) return
  const t = route.t
  const what = route.name === undefined ? qualified(t) : `${qualified(t)} "${route.name}"`
  const scope =
    route.namespace === undefined ? "at the cluster scope" : `in the namespace "${route.namespace}"`
  const details: JsonObject = { group: t.group, kind: t.plural }
  if (route.name !== undefined) details.name = route.name
  throw new KubeError(
    403,
    "Forbidden",
    `${what} is forbidden: User "${user}" cannot ${verb} resource "${resource}" in API group "${t.group}" ${scope}`,
    details,
  )
}

function nsExists(s: ApiState, namespace: string): boolean {
  return s.store.find(Types.namespaces, "", namespace) !== undefined
}

function checkIdentity(t: ResourceType, body: JsonObject, namespace: string | undefined): void {
  if (body.kind !== undefined && body.kind !== t.kind)
    throw badRequest(
      `the API version in the data (${String(body.apiVersion)}) does not match the expected API version (${apiVersion(t)})`,
    )
  const ns = meta(body).namespace
  if (t.namespaced && ns !== undefined && ns !== namespace)
    throw badRequest("the namespace of the provided object does not match the namespace sent on the request")
}

/** Delete as Part D says: finalizers hold the object (200 with deletionTimestamp); Orphan strips owner references. */
function remove(s: ApiState, t: ResourceType, current: JsonObject, policy: string | undefined): Response {
  const m = meta(current)
  const name = String(m.name)
  const namespace = String(m.namespace ?? "")
  const headers: Record<string, string> = {}
  let effective = policy
  if (t === Types.jobs && policy === undefined) {
    effective = "Orphan"
    headers.Warning =
      '299 - "child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning"'
  }
  if (effective !== undefined && !["Background", "Foreground", "Orphan"].includes(effective))
    throw badRequest(`propagationPolicy: Unsupported value: "${effective}"`)
  if (effective === "Orphan")
    // Pods only: Kueue removes a deleted Job's Workload whatever the policy.
    for (const dt of [Types.pods])
      for (const o of s.store.all(dt, namespace)) {
        const refs = meta(o).ownerReferences
        if (Array.isArray(refs) && refs.some((r) => isObject(r) && r.uid === m.uid)) {
          meta(o).ownerReferences = refs.filter((r) => !(isObject(r) && r.uid === m.uid))
          s.store.touch(o)
        }
      }
  const finalizers = Array.isArray(m.finalizers) ? m.finalizers : []
  if (finalizers.length > 0) {
    m.deletionTimestamp ??= s.store.timestamp()
    s.store.touch(current)
    return Response.json(current, { status: 200, headers })
  }
  s.store.remove(t, namespace, name)
  if (t === Types.pods) return Response.json(current, { status: 200, headers })
  return Response.json(
    {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Success",
      details: { name, group: t.group, kind: t.plural, uid: m.uid ?? null },
    },
    { status: 200, headers },
  )
}

async function anyBody(request: Request, fallback?: Json): Promise<Json> {
  const text = await request.text()
  if (text.trim() === "" && fallback !== undefined) return fallback
  try {
    return JSON.parse(text) as Json
  } catch {
    throw badRequest("the body of the request could not be decoded as JSON")
  }
}

async function jsonBody(request: Request): Promise<JsonObject> {
  const body = await anyBody(request)
  if (!isObject(body)) throw badRequest("the body of the request must be a JSON object")
  return body
}
