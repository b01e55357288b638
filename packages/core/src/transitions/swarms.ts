/**
 * Swarm transitions applied to stored items: a user's spec or delete (the API) and what the control
 * loop observed, each decided by `rules/swarm-phase.ts`, written conditionally and recorded as an event.
 */
import { isDeepStrictEqual } from "node:util"
import type { Swarm, SwarmSpec } from "../model/swarm"
import { SwarmSpecFields } from "../model/swarm-fields"
import type { RouterCounters, RouterSample } from "../model/worker"
import { withSample } from "../rules/swarm-metrics"
import { requestDelete, updateSpec } from "../rules/swarm-phase"
import type { EventLog } from "../store/events"
import { ItemExistsError, type StoredItem, VersionConflictError } from "../store/port"
import type { Swarms } from "../store/swarms"
import { type Clock, iso } from "../util/clock"
import { ConflictError, NotFoundError } from "../util/errors"

const specFields: readonly (keyof SwarmSpec)[] = SwarmSpecFields

/** The spec part of a swarm, normalised (no undefined fields), for "did anything change" comparisons. */
function specOf(swarm: Swarm | SwarmSpec): Partial<SwarmSpec> {
  return JSON.parse(JSON.stringify(Object.fromEntries(specFields.map((field) => [field, swarm[field]]))))
}

export interface SwarmTransitionDeps {
  swarms: Swarms
  events: EventLog
  clock: Clock
}

export function SwarmTransitions({ swarms, events, clock }: SwarmTransitionDeps) {
  return {
    /**
     * Create the swarm, or update its spec. `spec.backendId` must be resolved. Moving a swarm to another
     * backend is refused (delete it first). An identical spec changes nothing.
     */
    async apply(
      project: string,
      spec: SwarmSpec & { backendId: string },
    ): Promise<{ swarm: Swarm; created: boolean; changed: boolean }> {
      for (let attempt = 0; attempt < 20; attempt++) {
        const now = iso(clock.now())
        const existing = await swarms.head(project, spec.name)
        if (!existing) {
          const swarm: Swarm = {
            ...spec,
            project,
            phase: "PENDING",
            desired: "running",
            generation: 1,
            observedGeneration: 0,
            replicaStatus: { ready: 0, total: spec.replicas, items: [] },
            createdAt: now,
            updatedAt: now,
          }
          try {
            await swarms.create(swarm)
          } catch (error) {
            if (error instanceof ItemExistsError) continue
            throw error
          }
          await events.swarm(project, swarm.name, {
            to: "PENDING",
            reason: "created",
            message: `${spec.replicas} × ${spec.model} on ${spec.backendId}`,
          })
          return { swarm, created: true, changed: true }
        }
        const current = existing.data
        if (current.backendId !== spec.backendId && current.desired === "running")
          throw new ConflictError(
            "swarm.backend_change",
            `swarm "${spec.name}" runs on backend "${current.backendId}"; delete it before moving it to "${spec.backendId}"`,
          )
        if (current.desired === "running" && isDeepStrictEqual(specOf(current), specOf(spec)))
          return { swarm: current, created: false, changed: false }
        if (current.desired === "deleted" && current.phase !== "STOPPED")
          throw new ConflictError(
            "swarm.deleting",
            `swarm "${spec.name}" is being deleted; wait until it is STOPPED, then create it again`,
          )
        const next = updateSpec(current, spec, now)
        try {
          await swarms.update({ ...existing, data: next.swarm })
        } catch (error) {
          if (error instanceof VersionConflictError) continue
          throw error
        }
        await events.swarm(project, spec.name, {
          from: next.from,
          to: next.swarm.phase,
          reason: "updated",
          message: `generation ${next.swarm.generation}`,
        })
        return { swarm: next.swarm, created: false, changed: true }
      }
      throw new ConflictError("swarm.busy", `swarm "${spec.name}" is changing too often; try again`)
    },

    /** DELETE: desired becomes `deleted`; a swarm never deployed is STOPPED at once. */
    async requestDelete(project: string, name: string): Promise<Swarm> {
      for (let attempt = 0; attempt < 20; attempt++) {
        const existing = await swarms.head(project, name)
        if (!existing) throw new NotFoundError("swarm", name)
        const change = requestDelete(existing.data, iso(clock.now()))
        if (!change.changed) return existing.data
        try {
          await swarms.update({ ...existing, data: change.swarm })
        } catch (error) {
          if (error instanceof VersionConflictError) continue
          throw error
        }
        await events.swarm(project, name, {
          from: change.from,
          to: change.swarm.phase,
          reason: "delete_requested",
        })
        return change.swarm
      }
      throw new ConflictError("swarm.busy", `swarm "${name}" is changing too often; try again`)
    },

    /**
     * Save a swarm the control loop changed, if `version` still holds, with an event when its phase
     * moved from `change.from`. Returns the stored item.
     */
    async save(
      item: StoredItem<Swarm>,
      change: {
        from: string
        reason: string
        message?: string /** An event even when the phase stays. */
        always?: boolean
      },
    ): Promise<StoredItem<Swarm>> {
      const saved = await swarms.update(item)
      if (change.from !== item.data.phase || change.always)
        await events.swarm(item.data.project, item.data.name, {
          from: change.from,
          to: item.data.phase,
          reason: change.reason,
          ...(change.message !== undefined ? { message: change.message } : {}),
        })
      return saved
    },

    /**
     * Keep a sample of the swarm's router counters (`rules/swarm-metrics.ts` decides whether it is
     * time for one). Best effort: a write that loses to another's leaves theirs; metrics never fail
     * a heartbeat. Returns the samples as this call left them (undefined when its write lost), so a
     * caller that reads them next need not read them again.
     */
    async recordRouterSample(
      project: string,
      name: string,
      counters: RouterCounters,
    ): Promise<RouterSample[] | undefined> {
      try {
        const now = clock.now()
        const stored = await swarms.metrics(project, name)
        const samples = withSample(stored?.data.samples ?? [], { ...counters, at: now })
        if (samples) await swarms.putMetrics(project, name, samples, stored, now)
        return samples ?? stored?.data.samples ?? []
      } catch (error) {
        if (!(error instanceof VersionConflictError || error instanceof ItemExistsError)) throw error
        return undefined
      }
    },
  }
}
export type SwarmTransitions = ReturnType<typeof SwarmTransitions>
