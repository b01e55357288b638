/**
 * Swarms on Lepton: one deployment per swarm incarnation, named by spec.ts so any process finds it
 * again, placed on the backend's node group by the group's id (as jobs are). An update PATCHes only
 * the fields that changed (a new replica count is one PATCH of `resource_requirement`, never a second
 * deployment); the status is the deployment's state, its replicas' readiness and a health GET through
 * its external endpoint, mapped by states.ts.
 */
import type { Swarm } from "../../model/swarm"
import type { ServingStatus } from "../protocol"
import { LeptonApiError, type LeptonClient } from "./client"
import { deploymentBody, deploymentName, type LeptonConfig } from "./spec"
import { deploymentPhase } from "./states"
import type { LeptonDeployment } from "./types"

/** How long the health GET through the endpoint may take: a slow replica is not a ready one. */
export const HealthTimeoutMs = 5_000

export interface LeptonServingOptions {
  project: string
  config: LeptonConfig
  /**
   * The id of the backend's node group (`config.nodeGroup` may name it by name; Lepton places by id).
   * Rejects, naming the groups the workspace has, when it has no such group: then no deployment is made.
   */
  nodeGroupId: () => Promise<string>
  /** One contact with Lepton through the backend's client (recorded as the backend's health). */
  call: <T>(use: (client: LeptonClient) => Promise<T>) => Promise<T>
  /** The endpoint token's value (the backend's `endpointTokenSecret`), when endpoints need one. */
  endpointToken: () => Promise<string | undefined>
  fetch?: typeof fetch
}

/** The deployment a swarm's handle names, else the one its incarnation would have. */
export const deploymentOf = (project: string, swarm: Swarm): string => {
  const named = swarm.handle?.meta.deployment
  return typeof named === "string" ? named : deploymentName(project, swarm)
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * The JSON merge patch that makes `current` hold `wanted`: only the fields whose value differs, objects
 * compared field by field (Lepton fills in defaults swarmplane never set, which are left alone), lists
 * and plain values as a whole. `undefined` when nothing differs.
 */
export function mergePatchOf(current: unknown, wanted: unknown): unknown {
  if (isObject(wanted) && isObject(current)) {
    const patch: Record<string, unknown> = {}
    for (const [key, value] of Object.entries(wanted)) {
      const inner = mergePatchOf(current[key], value)
      if (inner !== undefined) patch[key] = inner
    }
    return Object.keys(patch).length ? patch : undefined
  }
  return JSON.stringify(current) === JSON.stringify(wanted) ? undefined : wanted
}

export function LeptonServing(o: LeptonServingOptions) {
  const doFetch = o.fetch ?? fetch

  /** Whether the swarm's health path answers 200 through the deployment's external endpoint. */
  async function healthy(endpoint: string, swarm: Swarm): Promise<boolean> {
    const token = await o.endpointToken()
    try {
      const res = await doFetch(`${endpoint.replace(/\/+$/, "")}${swarm.healthPath}`, {
        headers: token ? { authorization: `Bearer ${token}` } : {},
        signal: AbortSignal.timeout(HealthTimeoutMs),
      })
      await res.arrayBuffer()
      return res.status === 200
    } catch {
      return false
    }
  }

  return {
    /**
     * Create the deployment, or bring an existing one (this swarm's, made by an earlier generation or a
     * pass whose answer was lost) to the current spec with one PATCH of what differs.
     */
    async createOrUpdate(swarm: Swarm): Promise<NonNullable<Swarm["handle"]>> {
      // Resolved first: a group the workspace lacks leaves the swarm waiting with nothing made on Lepton.
      const nodeGroupId = await o.nodeGroupId()
      const body = deploymentBody({ project: o.project, swarm, config: o.config, nodeGroupId })
      const name = body.metadata.name
      /** Bring the deployment Lepton has to the wanted spec: one PATCH of what differs, if anything does. */
      const update = async (current: LeptonDeployment | undefined) => {
        const patch = mergePatchOf(current?.spec ?? {}, body.spec)
        if (!patch) return current
        return (await o.call((c) => c.deployments.patch(name, { spec: patch }))) ?? current
      }
      let existing = await o.call((c) => c.deployments.get(name))
      if (!existing) {
        // Another process may make it meanwhile (409): then that one is updated instead.
        const made = await o.call((c) =>
          c.deployments.create(body).then(
            (created) => ({ created }),
            (error: unknown) => {
              if (error instanceof LeptonApiError && error.status === 409) return { conflict: true as const }
              throw error
            },
          ),
        )
        existing =
          "conflict" in made ? await update(await o.call((c) => c.deployments.get(name))) : made.created
      } else existing = await update(existing)
      return {
        id: name,
        url: existing?.status?.endpoint?.external_endpoint ?? "",
        meta: { generation: swarm.generation, deployment: name },
      }
    },

    /** The deployment's phase; `seen` is this pass's listing of it, when the reconcile read one. */
    async status(swarm: Swarm, seen?: LeptonDeployment): Promise<ServingStatus | { gone: true }> {
      if (!swarm.handle) return { gone: true }
      const name = deploymentOf(o.project, swarm)
      const deployment = seen ?? (await o.call((c) => c.deployments.get(name)))
      if (!deployment) return { gone: true }
      const state = deployment.status?.state
      // Gone between the two reads (404): the next pass sees it gone; not a failed contact.
      const readiness = await o.call((c) =>
        c.deployments.readiness(name).catch((error: unknown) => {
          if (error instanceof LeptonApiError && error.status === 404) return {}
          throw error
        }),
      )
      const endpoint = deployment.status?.endpoint?.external_endpoint ?? undefined
      const ok = state === "Ready" && endpoint ? await healthy(endpoint, swarm) : false
      const view = deploymentPhase({
        state,
        readiness,
        healthy: ok,
        replicas: swarm.autoscaling
          ? (deployment.status?.autoscaler_status?.desired_replicas ?? swarm.autoscaling.minReplicas)
          : swarm.replicas,
        scaledToZero: !swarm.autoscaling && swarm.replicas === 0,
        deleteRequested: swarm.desired === "deleted" || swarm.phase === "FAILED",
      })
      const generation = swarm.handle.meta.generation
      return {
        phase: view.phase,
        ...(view.phase === "RUNNING" && endpoint ? { url: endpoint } : {}),
        ...(view.detail ? { detail: view.detail } : {}),
        replicas: view.replicas,
        ...(typeof generation === "number" ? { generation } : {}),
        ...(view.idle !== undefined ? { idle: view.idle } : {}),
      }
    },

    /** Delete the deployment; one already gone is done. */
    async delete(swarm: Swarm): Promise<void> {
      if (!swarm.handle) return
      await o.call((c) => c.deployments.delete(deploymentOf(o.project, swarm)))
    },
  }
}
