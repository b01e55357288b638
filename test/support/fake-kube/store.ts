/**
 * The fake cluster's object store, standing in for etcd behind the apiserver: objects by type,
 * namespace and name; one resourceVersion counter that every write bumps (so a list's RV is the
 * collection's); `uid`, `creationTimestamp` and `generation` filled on create and `generation` bumped
 * when the spec changes; lists filtered by selectors and paged with `limit`/`continue` (a token from
 * before `compact()` answers 410 Expired). Every write wakes the controllers through `onChange`.
 */
import { randomBytes, randomUUID } from "node:crypto"
import {
  alreadyExists,
  apiVersion,
  asObject,
  badRequest,
  type Json,
  type JsonObject,
  KubeError,
  notFound,
  type ResourceType,
} from "./resources"
import { parseFieldSelector, parseLabelSelector } from "./selector"

export interface ListOptions {
  labelSelector?: string
  fieldSelector?: string
  limit?: number
  continue?: string
}

export interface ListPage {
  items: JsonObject[]
  resourceVersion: string
  continue?: string
  remainingItemCount?: number
}

export const labelsOf = (o: JsonObject): Record<string, string> =>
  asObject(asObject(o.metadata).labels) as Record<string, string>
export const meta = (o: JsonObject): JsonObject => {
  if (!o.metadata || typeof o.metadata !== "object") o.metadata = {}
  return o.metadata as JsonObject
}
export const nameOf = (o: JsonObject) => String(meta(o).name ?? "")
export const namespaceOf = (o: JsonObject) => String(meta(o).namespace ?? "")

/** A short random lowercase suffix, as `generateName` and ReplicaSets append. */
export const randomSuffix = (chars = 5) => {
  const alphabet = "bcdfghjklmnpqrstvwxz2456789"
  return [...randomBytes(chars)].map((b) => alphabet[b % alphabet.length]).join("")
}

export class Store {
  private rv = 1000
  private compactedRv = 0
  /** Objects by type (`plural.group`), then by `namespace|name`. */
  private readonly objects = new Map<string, Map<string, JsonObject>>()
  /** Each type's objects in key order, rebuilt after a create or remove (lists and controllers read often). */
  private readonly sorted = new Map<string, JsonObject[]>()
  private readonly listeners: (() => void)[] = []

  constructor(
    private readonly now: () => number,
    /** Defaults that need the new object's uid (a Job's selector), applied before it is stored. */
    private readonly onCreate: (t: ResourceType, o: JsonObject) => void = () => {},
  ) {}

  onChange(listener: () => void): void {
    this.listeners.push(listener)
  }

  /** The current collection resourceVersion. */
  resourceVersion(): string {
    return String(this.rv)
  }

  /** Forget history: every continue token handed out so far answers 410 Expired. */
  compact(): void {
    this.compactedRv = Number(this.bump())
  }

  create(t: ResourceType, namespace: string, body: JsonObject): JsonObject {
    const o = structuredClone(body)
    const m = meta(o)
    if (typeof m.name !== "string" || m.name === "") {
      if (typeof m.generateName === "string" && m.generateName !== "")
        m.name = m.generateName + randomSuffix()
      else
        throw new KubeError(
          422,
          "Invalid",
          `${t.kind} "" is invalid: metadata.name: Required value: name or generateName is required`,
          {
            name: "",
            group: t.group,
            kind: t.kind,
            causes: [
              {
                reason: "FieldValueRequired",
                message: "Required value: name or generateName is required",
                field: "metadata.name",
              },
            ],
          },
        )
    }
    const name = String(m.name)
    if (t.namespaced) m.namespace = namespace
    else delete m.namespace
    if (this.bucket(t).has(this.key(t, namespace, name))) throw alreadyExists(t, name)
    o.apiVersion = apiVersion(t)
    o.kind = t.kind
    m.uid = randomUUID()
    m.creationTimestamp = this.timestamp()
    m.generation = 1
    this.onCreate(t, o)
    m.resourceVersion = this.bump()
    this.bucket(t).set(this.key(t, namespace, name), o)
    this.sorted.delete(typeKey(t))
    this.changed()
    return o
  }

  find(t: ResourceType, namespace: string, name: string): JsonObject | undefined {
    return this.bucket(t).get(this.key(t, namespace, name))
  }

  get(t: ResourceType, namespace: string, name: string): JsonObject {
    const o = this.find(t, namespace, name)
    if (!o) throw notFound(t, name)
    return o
  }

  /** Every object of a type (in one namespace, or all with `undefined`), in key order. */
  all(t: ResourceType, namespace?: string): JsonObject[] {
    let sorted = this.sorted.get(typeKey(t))
    if (!sorted) {
      sorted = [...this.bucket(t).entries()]
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([, o]) => o)
      this.sorted.set(typeKey(t), sorted)
    }
    return t.namespaced && namespace !== undefined
      ? sorted.filter((o) => namespaceOf(o) === namespace)
      : [...sorted]
  }

  list(t: ResourceType, namespace: string | undefined, options: ListOptions): ListPage {
    const labels = parseLabelSelector(options.labelSelector)
    const fields = parseFieldSelector(options.fieldSelector)
    let after = ""
    let listRv = this.resourceVersion()
    if (options.continue) {
      const token = decodeContinue(options.continue)
      if (token.rv < this.compactedRv)
        throw new KubeError(
          410,
          "Expired",
          "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
        )
      after = token.start
      listRv = String(token.rv)
    }
    const matching = this.all(t, namespace).filter(
      (o) => labels(labelsOf(o)) && fields(o) && this.sortKey(o) > after,
    )
    const limit = options.limit && options.limit > 0 ? options.limit : matching.length
    const items = matching.slice(0, limit)
    const page: ListPage = { items, resourceVersion: listRv }
    const last = items.at(-1)
    if (matching.length > items.length && last) {
      page.continue = encodeContinue({ rv: Number(listRv), start: this.sortKey(last) })
      page.remainingItemCount = matching.length - items.length
    }
    return page
  }

  /**
   * Record a write to a stored object (already mutated in place): a new resourceVersion, and a new
   * generation when its spec differs from `previousSpec`.
   */
  touch(o: JsonObject, previousSpec?: Json): void {
    const m = meta(o)
    if (previousSpec !== undefined && JSON.stringify(previousSpec) !== JSON.stringify(o.spec ?? null))
      m.generation = Number(m.generation ?? 1) + 1
    m.resourceVersion = this.bump()
    this.changed()
  }

  /** Replace a stored object (PUT): its identity fields are kept, a stale resourceVersion is a 409. */
  replace(t: ResourceType, current: JsonObject, next: JsonObject, onConflict: () => KubeError): JsonObject {
    const m = meta(current)
    const incoming = meta(next)
    if (incoming.resourceVersion !== undefined && incoming.resourceVersion !== m.resourceVersion)
      throw onConflict()
    if (incoming.name !== undefined && incoming.name !== m.name)
      throw badRequest("the name of the object does not match the name on the URL")
    const previousSpec = structuredClone(current.spec ?? null)
    for (const k of Object.keys(current)) delete current[k]
    Object.assign(current, structuredClone(next), { apiVersion: apiVersion(t), kind: t.kind })
    const nm = meta(current)
    for (const k of ["name", "namespace", "uid", "creationTimestamp", "generation", "deletionTimestamp"])
      if (m[k] !== undefined) nm[k] = m[k] as Json
      else delete nm[k]
    this.touch(current, previousSpec)
    return current
  }

  remove(t: ResourceType, namespace: string, name: string): JsonObject | undefined {
    const key = this.key(t, namespace, name)
    const o = this.bucket(t).get(key)
    if (!o) return undefined
    this.bucket(t).delete(key)
    this.sorted.delete(typeKey(t))
    meta(o).resourceVersion = this.bump()
    this.changed()
    return o
  }

  timestamp(): string {
    return new Date(this.now()).toISOString().replace(/\.\d{3}Z$/, "Z")
  }

  private bump(): string {
    this.rv += 1
    return String(this.rv)
  }

  private changed(): void {
    for (const l of this.listeners) l()
  }

  private bucket(t: ResourceType): Map<string, JsonObject> {
    let b = this.objects.get(typeKey(t))
    if (!b) {
      b = new Map()
      this.objects.set(typeKey(t), b)
    }
    return b
  }

  /** `namespace|name` (an empty namespace for cluster-scoped types): sorts as lists are ordered. */
  private key(t: ResourceType, namespace: string, name: string): string {
    return `${t.namespaced ? namespace : ""}|${name}`
  }

  private sortKey(o: JsonObject): string {
    return `${namespaceOf(o)}|${nameOf(o)}`
  }
}

const typeKey = (t: ResourceType) => `${t.plural}.${t.group}`

function encodeContinue(token: { rv: number; start: string }): string {
  return Buffer.from(JSON.stringify({ v: "meta.k8s.io/v1", rv: token.rv, start: token.start })).toString(
    "base64",
  )
}

function decodeContinue(raw: string): { rv: number; start: string } {
  try {
    const t = JSON.parse(Buffer.from(raw, "base64").toString("utf8")) as { rv?: unknown; start?: unknown }
    if (typeof t.rv === "number" && typeof t.start === "string") return { rv: t.rv, start: t.start }
  } catch {
    // fall through to the apiserver's answer
  }
  throw badRequest(`invalid continue token`)
}
