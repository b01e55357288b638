/**
 * Swarms on EKS: one Deployment and one Service per swarm incarnation (serving-objects.ts), found again
 * by name by any process. An update is one merge PATCH of the same Deployment (and of the Service when
 * it changed): a changed pod template rolls the pods, a new replica count only scales them. Delete
 * removes both (the pods go in the background).
 *
 * The status is the Deployment's ready replicas and rollout, its pods' reasons, and a GET of the health
 * path through the address the Service reports. Behind a ClusterIP Service, whose cluster DNS name the
 * control plane cannot reach, the pods' readiness probes (the same health path, checked by the kubelet
 * inside the cluster) are the health check. A swarm serves the current generation once the rollout is
 * complete; it FAILS when Kubernetes gives up on the rollout (`ProgressDeadlineExceeded`) or when its
 * Deployment or Service is deleted outside swarmplane.
 */
import type { Swarm } from "../../model/swarm"
import type { ServingStatus } from "../protocol"
import { isReason } from "./api-error"
import type { KubeClient, NamespacedResource } from "./client"
import {
  deploymentObject,
  type Endpoint,
  endpointOf,
  ServingLabel,
  serviceObject,
  servingNameOf,
  updatePatch,
  withRecord,
} from "./serving-objects"
import type { EksConfig } from "./spec"
import type { Deployment, Pod, Service } from "./types"

/** How long the health GET through the endpoint may take: a slow replica is not a ready one. */
export const HealthTimeoutMs = 5_000

/** A pod's state in a word, and why it is not Ready in words (for `replicaStatus.items`). */
export function podState(pod: Pod): { state: string; message?: string } {
  const status = pod.status ?? {}
  const cond = (type: string) => status.conditions?.find((c) => c.type === type)
  if (pod.metadata.deletionTimestamp) return { state: "Terminating" }
  if (cond("Ready")?.status === "True") return { state: "READY" }
  const scheduled = cond("PodScheduled")
  if (scheduled?.status === "False")
    return { state: scheduled.reason ?? "Unschedulable", message: scheduled.message }
  for (const c of status.containerStatuses ?? []) {
    const waiting = c.state?.waiting
    if (waiting?.reason) return { state: waiting.reason, message: waiting.message }
    const ended = c.state?.terminated
    if (ended) return { state: ended.reason ?? "Terminated", message: `exit code ${ended.exitCode}` }
  }
  return { state: status.phase ?? "Pending", message: status.message }
}

/** Reasons a pod will not start without someone acting; shown first in the swarm's detail. */
const Stuck = [
  "ErrImagePull",
  "ImagePullBackOff",
  "InvalidImageName",
  "CreateContainerConfigError",
  "CrashLoopBackOff",
  "Unschedulable",
]

export interface ServingView {
  deployment: Deployment
  pods: Pod[]
  /** Where the Service answers; absent while a load balancer has no address yet. */
  endpoint?: Endpoint
  /** The health path answered 200 through a reported address (unused for a cluster DNS name). */
  healthy: boolean
}

/** The swarm's phase from its Deployment, pods and endpoint (both objects exist). Pure. */
export function servingPhase(view: ServingView): Omit<ServingStatus, "generation"> & { current: boolean } {
  const { deployment, endpoint } = view
  const desired = deployment.spec?.replicas ?? 1
  const status = deployment.status ?? {}
  const ready = status.readyReplicas ?? 0
  const pods = [...view.pods].sort((a, b) => (a.metadata.name ?? "").localeCompare(b.metadata.name ?? ""))
  const items = pods.map((pod, index) => {
    const { state, message } = podState(pod)
    return { index, state, message: message ? `${pod.metadata.name}: ${message}` : (pod.metadata.name ?? "") }
  })
  const replicas = { ready, total: desired, items }
  // The rollout of the current template is done: every replica updated, none of the old left, all Ready.
  const current =
    (status.observedGeneration ?? 0) >= (deployment.metadata.generation ?? 1) &&
    (status.updatedReplicas ?? 0) === desired &&
    (status.replicas ?? 0) === desired &&
    ready >= desired
  const counted = `${ready}/${desired} replicas ready`
  const stuck = items.find((i) => Stuck.includes(i.state))
  // Kueue's pod integration holds a queued replica's pod behind a scheduling gate until it admits it.
  const gated = items.find((i) => i.state === "SchedulingGated")
  const why = stuck
    ? `; ${stuck.state}: ${stuck.message}`
    : gated
      ? `; waiting for Kueue to admit the replicas (${gated.message})`
      : ""
  const at = (phase: ServingStatus["phase"], detail?: string) => ({
    phase,
    ...(detail ? { detail } : {}),
    replicas,
    current,
  })

  const progressing = status.conditions?.find((c) => c.type === "Progressing")
  if (progressing?.status === "False" && progressing.reason === "ProgressDeadlineExceeded")
    return at(
      "FAILED",
      `Kubernetes gave up on the rollout: ${progressing.message ?? progressing.reason}${why}`,
    )
  if (desired === 0)
    return pods.length === 0
      ? at("STOPPED", "the swarm asks for 0 replicas")
      : at("INITIALIZING", `scaling to 0 replicas (${pods.length} still running)`)
  if (ready === 0)
    return at(
      pods.some((p) => p.status?.phase === "Running") ? "INITIALIZING" : "PENDING",
      `${counted}${why}`,
    )
  if (!endpoint) return at("INITIALIZING", `${counted}; the Service's load balancer has no address yet`)
  const healthy = endpoint.reported ? view.healthy : true
  if (!healthy)
    return at("INITIALIZING", `${counted}; ${endpoint.url} has not answered 200 on its health path yet`)
  return at(
    "RUNNING",
    current ? undefined : `rolling out: ${counted}, ${status.updatedReplicas ?? 0} updated`,
  )
}

export interface EksServingOptions {
  project: string
  backendId: string
  config: EksConfig
  /** One contact with the cluster through the backend's client (recorded as the backend's health). */
  call: <T>(use: (kube: KubeClient) => Promise<T>) => Promise<T>
  fetch?: typeof fetch
}

export function EksServing(o: EksServingOptions) {
  const doFetch = o.fetch ?? fetch
  const ns = o.config.namespace

  /** Whether the swarm's health path answers 200 at `url`. */
  async function healthy(url: string, swarm: Swarm): Promise<boolean> {
    try {
      const res = await doFetch(`${url}${swarm.healthPath}`, { signal: AbortSignal.timeout(HealthTimeoutMs) })
      await res.arrayBuffer()
      return res.status === 200
    } catch {
      return false
    }
  }

  /**
   * Create `wanted`, or bring the one of its name to it with one merge PATCH of what changed (one made
   * meanwhile by another pass, 409, is updated instead).
   */
  async function ensure<T extends Deployment | Service>(
    kind: "deployments" | "services",
    wanted: T,
  ): Promise<T> {
    const resource = (kube: KubeClient) => kube[kind] as unknown as NamespacedResource<T>
    const name = wanted.metadata.name ?? ""
    const update = async (current: T) => {
      const patch = updatePatch(current, wanted)
      return patch ? o.call((k) => resource(k).patch(ns, name, patch)) : current
    }
    const existing = await o.call((k) => resource(k).get(ns, name))
    if (existing) return update(existing)
    try {
      return await o.call((k) => resource(k).create(ns, withRecord(wanted)))
    } catch (error) {
      if (!isReason(error, "AlreadyExists")) throw error
      const made = await o.call((k) => resource(k).get(ns, name))
      if (!made) throw error
      return update(made)
    }
  }

  return {
    /** Create the swarm's Deployment and Service, or update them to the swarm's current spec. */
    async createOrUpdate(swarm: Swarm): Promise<NonNullable<Swarm["handle"]>> {
      const input = { project: o.project, backendId: o.backendId, swarm, config: o.config }
      const deployment = deploymentObject(input)
      const name = deployment.metadata.name ?? ""
      await ensure("deployments", deployment)
      const service = await ensure("services", serviceObject(input))
      const endpoint = endpointOf(service, ns)
      return {
        id: name,
        url: endpoint?.url ?? "",
        meta: { generation: swarm.generation, deployment: name, service: name, namespace: ns },
      }
    },

    /** The swarm's phase from its Deployment, pods and Service (and a health GET through its address). */
    async status(swarm: Swarm): Promise<ServingStatus | { gone: true }> {
      if (!swarm.handle) return { gone: true }
      const name = servingNameOf(o.project, swarm)
      const [deployment, service] = await Promise.all([
        o.call((k) => k.deployments.get(ns, name)),
        o.call((k) => k.services.get(ns, name)),
      ])
      if (!deployment && !service) return { gone: true }
      const empty = { ready: 0, total: swarm.replicas, items: [] }
      const deleting = swarm.desired === "deleted" || swarm.phase === "FAILED"
      if (deleting || !deployment || !service) {
        const left = [deployment && `Deployment ${name}`, service && `Service ${name}`].filter(Boolean)
        // Still there after a delete: the next pass deletes again. One gone while the swarm runs was
        // deleted outside swarmplane: the swarm fails, and its teardown removes the other.
        return deleting
          ? { phase: swarm.phase, detail: `deleting: ${left.join(" and ")} still there`, replicas: empty }
          : {
              phase: "FAILED",
              detail: `${deployment ? `Service ${name}` : `Deployment ${name}`} was deleted outside swarmplane`,
              replicas: empty,
            }
      }
      const pods = await o.call((k) => k.pods.list(ns, { labelSelector: `${ServingLabel}=${name}` }))
      const endpoint = endpointOf(service, ns)
      const ok =
        endpoint?.reported && (deployment.status?.readyReplicas ?? 0) > 0
          ? await healthy(endpoint.url, swarm)
          : false
      const { current, ...view } = servingPhase({ deployment, pods, endpoint, healthy: ok })
      const generation = swarm.handle.meta.generation
      return {
        ...view,
        ...(view.phase === "RUNNING" && endpoint ? { url: endpoint.url } : {}),
        ...(view.phase === "RUNNING" && current && typeof generation === "number" ? { generation } : {}),
      }
    },

    /** Delete the swarm's Deployment (its pods go in the background) and Service; already gone is done. */
    async delete(swarm: Swarm): Promise<void> {
      if (!swarm.handle) return
      const name = servingNameOf(o.project, swarm)
      await o.call((k) => k.deployments.delete(ns, name))
      await o.call((k) => k.services.delete(ns, name))
    },
  }
}
