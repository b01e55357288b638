/**
 * Swarms, stored: conditional create and update by version (and fencing token), reads and listing.
 * What a write should contain is decided in `rules/swarm-phase.ts` and applied by `transitions/`.
 */
import type { Swarm } from "../model/swarm"
import { isSwarmActive } from "../model/swarm-fields"
import type { RouterSample } from "../model/worker"
import { NotFoundError } from "../util/errors"
import { ActiveIndex, Keys, ListIndex } from "./keys"
import type { NewItem, StateStore, StoredItem } from "./port"

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

export function Swarms(store: StateStore) {
  return {
    /** Store a new swarm; throws `ItemExistsError` when one of that name exists. */
    async create(swarm: Swarm): Promise<StoredItem<Swarm>> {
      return store.create(toItem(swarm))
    },

    async get(project: string, name: string): Promise<Swarm | undefined> {
      return (await store.get<Swarm>(Keys.swarm(project, name)))?.data
    },

    /** The swarm item with its version, read consistently (for a conditional write after). */
    async head(project: string, name: string): Promise<StoredItem<Swarm> | undefined> {
      return store.get<Swarm>(Keys.swarm(project, name), { consistent: true })
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

    /** The swarm's router samples (`rules/swarm-metrics.ts`), oldest first; none before any. */
    async metrics(
      project: string,
      name: string,
    ): Promise<StoredItem<{ samples: RouterSample[] }> | undefined> {
      return store.get<{ samples: RouterSample[] }>(Keys.swarmMetrics(project, name))
    },

    /**
     * Store the swarm's router samples: over `previous` if it still holds (else `VersionConflictError`),
     * or new (else `ItemExistsError`). Kept a day past the last write.
     */
    async putMetrics(
      project: string,
      name: string,
      samples: RouterSample[],
      previous: StoredItem<{ samples: RouterSample[] }> | undefined,
      nowMs: number,
    ): Promise<void> {
      const item = {
        ...Keys.swarmMetrics(project, name),
        type: "swarm-metrics",
        data: { samples },
        ttl: Math.floor(nowMs / 1000) + 86_400,
      }
      if (previous) await store.update({ ...item, version: previous.version })
      else await store.create(item)
    },

    /**
     * Write `item.data` if `item.version` still holds (`VersionConflictError` otherwise), with
     * `item.fence` when set (`FencedError` when a newer lease wrote it). Returns the stored item.
     */
    async update(item: StoredItem<Swarm>): Promise<StoredItem<Swarm>> {
      return store.update({
        ...toItem(item.data),
        version: item.version,
        ...(item.fence !== undefined ? { fence: item.fence } : {}),
      })
    },
  }
}
export type Swarms = ReturnType<typeof Swarms>
