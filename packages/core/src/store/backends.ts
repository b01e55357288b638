/** Registered backends. All backends of all projects share one partition, so ticks can list them in one query. */
import { isDeepStrictEqual } from "node:util"
import type { Backend, BackendConfig } from "../model/backend"
import { kindOfType } from "../model/backend-kinds"
import type { Clock } from "../util/clock"
import { iso } from "../util/clock"
import { ConflictError } from "../util/errors"
import type { EventLog } from "./events"
import { ActiveIndex, Keys } from "./keys"
import { ItemExistsError, mutate, queryAll, type StateStore } from "./port"

export function Backends(store: StateStore, clock: Clock, events: EventLog) {
  const eventsPk = Keys.backendEvents
  const hasActiveWork = async (project: string, id: string) => {
    for (const pk of ActiveIndex.partitions(project, id))
      if ((await store.queryIndex("active", pk, { limit: 1 })).items.length) return true
    return false
  }

  return {
    /** Register or replace a backend's config. `created` tells which; an identical config changes nothing. */
    async put(
      project: string,
      id: string,
      config: BackendConfig,
    ): Promise<{ backend: Backend; created: boolean }> {
      const now = iso(clock.now())
      const backend: Backend = {
        id,
        project,
        kind: kindOfType[config.type],
        config,
        status: {},
        createdAt: now,
        updatedAt: now,
      }
      try {
        await store.create({ ...Keys.backend(project, id), type: "backend", data: backend })
        await events.record(project, eventsPk(project, id), {
          entity: { kind: "backend", id },
          to: "registered",
          reason: "created",
          message: `type ${config.type}`,
        })
        return { backend, created: true }
      } catch (error) {
        if (!(error instanceof ItemExistsError)) throw error
      }
      let changed = false
      const updated = await mutate<Backend>(store, Keys.backend(project, id), async (item) => {
        if (isDeepStrictEqual(item.data.config, config)) return undefined
        // Work in flight was submitted to one kind of substrate; another would not find it.
        if (item.data.config.type !== config.type && (await hasActiveWork(project, id)))
          throw new ConflictError(
            "backend.in_use",
            `backend "${id}" is a ${item.data.config.type} backend with jobs or swarms in flight; it cannot become ${config.type}. Register a new backend id instead`,
          )
        changed = true
        return { ...item, data: { ...item.data, kind: kindOfType[config.type], config, updatedAt: now } }
      })
      if (!updated) return this.put(project, id, config)
      if (changed)
        await events.record(project, eventsPk(project, id), {
          entity: { kind: "backend", id },
          to: "registered",
          reason: "config_changed",
          message: `type ${config.type}`,
        })
      return { backend: updated.data, created: false }
    },

    async get(project: string, id: string): Promise<Backend | undefined> {
      return (await store.get<Backend>(Keys.backend(project, id)))?.data
    },

    async list(project: string): Promise<Backend[]> {
      const items = await queryAll((cursor) =>
        store.query<Backend>(Keys.backends(), { skPrefix: `${project}#`, cursor }),
      )
      return items.map((i) => i.data)
    },

    /** Every backend of every project (for the ticks). */
    async listAll(): Promise<Backend[]> {
      const items = await queryAll((cursor) => store.query<Backend>(Keys.backends(), { cursor }))
      return items.map((i) => i.data)
    },

    /** Record what the control loop last saw of a backend. */
    async setStatus(project: string, id: string, status: Backend["status"]): Promise<void> {
      await mutate<Backend>(store, Keys.backend(project, id), (item) =>
        isDeepStrictEqual(item.data.status, status) ? undefined : { ...item, data: { ...item.data, status } },
      )
    },
  }
}
export type Backends = ReturnType<typeof Backends>
