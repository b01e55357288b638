/**
 * A lean typed client of the Kubernetes API for the eks backend (backend-contracts.md Parts C, D), over
 * `node:https`: create, get, list (by label selector, paged with `limit`/`continue` to the end), JSON
 * merge patch and delete (`propagationPolicy=Background`) of batch/v1 Jobs, v1 Pods (and their logs),
 * apps/v1 Deployments, v1 Services and Kueue's v1beta1 Workloads, LocalQueues and ClusterQueues.
 *
 * TLS is verified against the cluster's own CA (from `DescribeCluster`), and nothing else: the system
 * roots do not apply, and verification is never turned off. The bearer token is only ever put in the
 * `Authorization` header; a 401 gets one fresh token and one more try.
 *
 * As the Lepton client: each call has its own timeout and never runs past the caller's deadline; 429,
 * 5xx and network failures are retried with exponential backoff and jitter, waiting at least what a
 * `Retry-After` asks; other 4xx are not. A create is retried too, because it names its object: a create
 * that did land answers the retry with 409 AlreadyExists, which the backend reads as "adopt it".
 * Failures are `KubeApiError`s carrying the `Status` reason.
 *
 * Why this and not `@kubernetes/client-node`: measured with esbuild 0.28 (`--bundle --minify
 * --platform=node --format=esm`) on a script that lists Jobs, and the import time of that bundle in
 * 10 fresh `node` 20 processes (min / median; a loaded 2-core machine, so the order counts more than
 * the figures; two runs where two figures are given; an empty module took 6-7 / 12-14 ms):
 *
 * | bundle (lists Jobs)                        | size     | gzip    | import min / median |
 * |--------------------------------------------|----------|---------|---------------------|
 * | client-node 1.4.0                          | 1,024 KB | 208 KB  | 174-240 / 208-337 ms |
 * | client-node 1.4.0 + auth.ts (EKS token)    | 1,551 KB | 364 KB  | 276 / 396 ms        |
 * | client-node 2.0.1 (+ auth.ts)              | 1,483 KB (2,013 KB) | 370 KB (527 KB) | does not load on Node 20 (needs 22.19) |
 * | this client alone                          | 6.5 KB   | 3 KB    | 17-54 / 27-85 ms    |
 * | this client + auth.ts (AWS SDK inlined)    | 528 KB   | 158 KB  | 108 / 166 ms        |
 * | the same, `--splitting` (SDK loaded lazily)| 10.5 KB entry | 5 KB | 24-28 / 48-74 ms |
 *
 * (client-node 1.4.0 from node_modules, unbundled: 1,367 / 1,589 ms.) Both need auth.ts, since
 * client-node has no in-process EKS token; beyond that it adds about 1 MB and a few hundred ms to
 * every cold start for every API group, kubeconfig and exec-plugin machinery the backend never uses,
 * and its current major needs Node 22.19. The backend needs seven resources and five verbs.
 */
import { KubeApiError, statusOf } from "./api-error"
import { type Answer, type KubeAccess, kubeTransport, type Method, type TransportOptions } from "./transport"
import type {
  ClusterQueue,
  Deployment,
  Job,
  KubeList,
  KubeObject,
  LocalQueue,
  Pod,
  Service,
  Workload,
} from "./types"

export type { KubeAccess, Method }
export { KubeApiError }

export interface KubeClientOptions extends TransportOptions {
  /** `limit` of one list page. */
  pageSize?: number
}

export interface ListOptions {
  /** e.g. `swarmplane.dev/backend=gpu,app in (a,b)`. */
  labelSelector?: string
  fieldSelector?: string
}

/** One kind of namespaced object. */
export interface NamespacedResource<T extends KubeObject> {
  /** Created (201) as given; a `KubeApiError` with reason `AlreadyExists` when the name is taken. */
  create(namespace: string, object: T): Promise<T>
  /** `undefined` when there is no such object (404). */
  get(namespace: string, name: string): Promise<T | undefined>
  /** Every page, from the first to the one without a `continue` token. */
  list(namespace: string, options?: ListOptions): Promise<T[]>
  /** A JSON merge patch (`application/merge-patch+json`): only the fields given change; `null` clears one. */
  patch(namespace: string, name: string, patch: Record<string, unknown>): Promise<T>
  /** Deletes with `propagationPolicy=Background`. Idempotent: false when it was already gone. */
  delete(namespace: string, name: string): Promise<boolean>
}

/** One kind of cluster-scoped object (read only: the backend does not manage ClusterQueues). */
export interface ClusterResource<T extends KubeObject> {
  get(name: string): Promise<T | undefined>
  list(options?: ListOptions): Promise<T[]>
}

export interface KubeClient {
  jobs: NamespacedResource<Job>
  pods: NamespacedResource<Pod> & {
    /** The log of a pod's container (the first when not named); the last `tailLines` lines when given. */
    log(
      namespace: string,
      name: string,
      options?: { container?: string; tailLines?: number },
    ): Promise<string>
  }
  deployments: NamespacedResource<Deployment>
  services: NamespacedResource<Service>
  workloads: NamespacedResource<Workload>
  localQueues: NamespacedResource<LocalQueue>
  clusterQueues: ClusterResource<ClusterQueue>
}

export const DefaultPageSize = 500
/** A list never reads more pages than this (a server that never ends its `continue` chain). */
const MaxPages = 10_000

const seg = (part: string) => encodeURIComponent(part)

export function kubeClient(options: KubeClientOptions): KubeClient {
  const pageSize = options.pageSize ?? DefaultPageSize
  const { call, scrub } = kubeTransport(options)

  function json<T>(method: Method, path: string, answer: Answer): T {
    try {
      return JSON.parse(answer.text) as T
    } catch {
      throw new KubeApiError(
        `Kubernetes ${method} ${path}: the answer is not JSON`,
        true,
        method,
        path,
        answer.status,
      )
    }
  }

  /** A 404 where the object must exist (a patch, a create's namespace) is an error, not "absent". */
  function mustExist(method: Method, path: string, answer: Answer): Answer {
    if (answer.status !== 404) return answer
    const status = statusOf(404, answer.text)
    throw new KubeApiError(
      scrub(
        `Kubernetes ${method} ${path} answered 404 NotFound${status.message ? `: ${status.message}` : ""}`,
      ),
      false,
      method,
      path,
      404,
      status.reason ?? "NotFound",
      status.details,
    )
  }

  async function listAll<T>(path: string, options: ListOptions = {}): Promise<T[]> {
    // An expired `continue` token (410) starts the list over once, as client-go's pager does.
    for (let fresh = 0; fresh < 2; fresh++) {
      const items: T[] = []
      let next: string | undefined
      let expired = false
      for (let page = 0; page < MaxPages; page++) {
        let answer: Answer
        try {
          answer = mustExist(
            "GET",
            path,
            await call("GET", path, {
              query: {
                labelSelector: options.labelSelector,
                fieldSelector: options.fieldSelector,
                limit: pageSize,
                continue: next,
              },
            }),
          )
        } catch (error) {
          if (next !== undefined && error instanceof KubeApiError && error.status === 410 && fresh === 0) {
            expired = true
            break
          }
          throw error
        }
        const list = json<KubeList<T>>("GET", path, answer)
        if (!Array.isArray(list.items))
          throw new KubeApiError(
            `Kubernetes GET ${path}: the answer is not a list`,
            true,
            "GET",
            path,
            answer.status,
          )
        items.push(...list.items)
        next = list.metadata?.continue || undefined
        if (!next) return items
      }
      if (!expired)
        throw new KubeApiError(`Kubernetes GET ${path}: more than ${MaxPages} pages`, true, "GET", path)
    }
    throw new KubeApiError(
      `Kubernetes GET ${path}: the list expired twice`,
      true,
      "GET",
      path,
      410,
      "Expired",
    )
  }

  function namespaced<T extends KubeObject>(base: string, plural: string): NamespacedResource<T> {
    const collection = (ns: string) => `${base}/namespaces/${seg(ns)}/${plural}`
    const item = (ns: string, name: string) => `${collection(ns)}/${seg(name)}`
    return {
      async create(ns, object) {
        const path = collection(ns)
        const named = Boolean(object.metadata?.name)
        return json<T>(
          "POST",
          path,
          mustExist("POST", path, await call("POST", path, { body: object, namedCreate: named })),
        )
      },
      async get(ns, name) {
        const path = item(ns, name)
        const answer = await call("GET", path)
        return answer.status === 404 ? undefined : json<T>("GET", path, answer)
      },
      list: (ns, options) => listAll<T>(collection(ns), options),
      async patch(ns, name, patch) {
        const path = item(ns, name)
        const answer = await call("PATCH", path, { body: patch, contentType: "application/merge-patch+json" })
        return json<T>("PATCH", path, mustExist("PATCH", path, answer))
      },
      async delete(ns, name) {
        const answer = await call("DELETE", item(ns, name), { query: { propagationPolicy: "Background" } })
        return answer.status !== 404
      },
    }
  }

  function clusterScoped<T extends KubeObject>(base: string, plural: string): ClusterResource<T> {
    return {
      async get(name) {
        const path = `${base}/${plural}/${seg(name)}`
        const answer = await call("GET", path)
        return answer.status === 404 ? undefined : json<T>("GET", path, answer)
      },
      list: (options) => listAll<T>(`${base}/${plural}`, options),
    }
  }

  const kueue = "/apis/kueue.x-k8s.io/v1beta1"
  const pods = namespaced<Pod>("/api/v1", "pods")
  return {
    jobs: namespaced<Job>("/apis/batch/v1", "jobs"),
    pods: {
      ...pods,
      async log(ns, name, { container, tailLines } = {}) {
        const path = `/api/v1/namespaces/${seg(ns)}/pods/${seg(name)}/log`
        const answer = mustExist("GET", path, await call("GET", path, { query: { container, tailLines } }))
        return scrub(answer.text)
      },
    },
    deployments: namespaced<Deployment>("/apis/apps/v1", "deployments"),
    services: namespaced<Service>("/api/v1", "services"),
    workloads: namespaced<Workload>(kueue, "workloads"),
    localQueues: namespaced<LocalQueue>(kueue, "localqueues"),
    clusterQueues: clusterScoped<ClusterQueue>(kueue, "clusterqueues"),
  }
}
