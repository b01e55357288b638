/** Swarms: create-or-update by name, delete as desired state, listing, and saves from the reconciler. */
import { isDeepStrictEqual } from "node:util"
import { isSwarmActive, type PhaseChange, requestDelete, updateSpec } from "../control/swarm-phase"
import { type Swarm, SwarmSpec } from "../model/swarm"
import type { Clock } from "../util/clock"
import { iso } from "../util/clock"
import { ConflictError, NotFoundError } from "../util/errors"
import type { EventLog } from "./events"
import { ActiveIndex, Keys, ListIndex } from "./keys"
import { ItemExistsError, type NewItem, type StateStore, type StoredItem, VersionConflictError } from "./port"

const specFields = Object.keys(SwarmSpec.shape) as (keyof SwarmSpec)[]

/** The spec part of a swarm, normalised (no undefined fields), for "did anything change" comparisons. */
function specOf(swarm: Swarm | SwarmSpec): Partial<SwarmSpec> {
  return JSON.parse(JSON.stringify(Object.fromEntries(specFields.map((field) => [field, swarm[field]]))))
}

function toItem(swarm: Swarm): NewItem<Swarm> {
  return {
    ...Keys.swarm(swarm.project, swarm.name),
    type: "swarm",
    data: swarm,
    list: ListIndex.swarm(swarm.project, swarm.name),
    ...(isSwarmActive(swarm)
      ? { active: ActiveIndex.swarm(swarm.project, swarm.backendId!, swarm.name) }
      : {}),
  }
}

export function Swarms(store: StateStore, clock: Clock, events: EventLog) {
  const record = (swarm: Swarm, change: { from?: string; to: string; reason: string; message?: string }) =>
    events.record(swarm.project, Keys.swarm(swarm.project, swarm.name).pk, {
      entity: { kind: "swarm", id: swarm.name },
      ...change,
    })

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
        const existing = await store.get<Swarm>(Keys.swarm(project, spec.name), { consistent: true })
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
            await store.create(toItem(swarm))
          } catch (error) {
            if (error instanceof ItemExistsError) continue
            throw error
          }
          await record(swarm, {
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
        const next: PhaseChange = updateSpec(current, spec, now)
        try {
          await store.update({
            ...toItem(next.swarm),
            version: existing.version,
            ...(existing.fence !== undefined ? { fence: existing.fence } : {}),
          })
        } catch (error) {
          if (error instanceof VersionConflictError) continue
          throw error
        }
        await record(next.swarm, {
          from: next.from,
          to: next.swarm.phase,
          reason: "updated",
          message: `generation ${next.swarm.generation}`,
        })
        return { swarm: next.swarm, created: false, changed: true }
      }
      throw new ConflictError("swarm.busy", `swarm "${spec.name}" is changing too often; try again`)
    },

    async get(project: string, name: string): Promise<Swarm | undefined> {
      return (await store.get<Swarm>(Keys.swarm(project, name)))?.data
    },

    async mustGet(project: string, name: string): Promise<Swarm> {
      const swarm = await this.get(project, name)
      if (!swarm) throw new NotFoundError("swarm", name)
      return swarm
    },

    async list(
      project: string,
      options: { limit: number; cursor?: string },
    ): Promise<{ items: Swarm[]; cursor?: string }> {
      const page = await store.queryIndex<Swarm>("list", ListIndex.swarmsOf(project), options)
      return { items: page.items.map((i) => i.data), cursor: page.cursor }
    },

    /** DELETE: desired becomes `deleted`; a swarm never deployed is STOPPED at once. */
    async requestDelete(project: string, name: string): Promise<Swarm> {
      for (let attempt = 0; attempt < 20; attempt++) {
        const existing = await store.get<Swarm>(Keys.swarm(project, name), { consistent: true })
        if (!existing) throw new NotFoundError("swarm", name)
        const change = requestDelete(existing.data, iso(clock.now()))
        if (!change.changed) return existing.data
        try {
          await store.update({
            ...toItem(change.swarm),
            version: existing.version,
            ...(existing.fence !== undefined ? { fence: existing.fence } : {}),
          })
        } catch (error) {
          if (error instanceof VersionConflictError) continue
          throw error
        }
        await record(change.swarm, { from: change.from, to: change.swarm.phase, reason: "delete_requested" })
        return change.swarm
      }
      throw new ConflictError("swarm.busy", `swarm "${name}" is changing too often; try again`)
    },

    /** Save a swarm changed by the control loop, if `version` still holds; returns the stored item. */
    async save(
      item: StoredItem<Swarm>,
      change: { from: string; reason: string; message?: string },
    ): Promise<StoredItem<Swarm>> {
      const saved = await store.update({
        ...toItem(item.data),
        version: item.version,
        ...(item.fence !== undefined ? { fence: item.fence } : {}),
      })
      if (change.from !== item.data.phase)
        await record(item.data, {
          from: change.from,
          to: item.data.phase,
          reason: change.reason,
          message: change.message,
        })
      return saved
    },
  }
}
export type Swarms = ReturnType<typeof Swarms>
