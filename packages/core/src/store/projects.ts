/**
 * Projects and API keys. Keys are random, shown once, stored only as an HMAC (peppered) hash. A revoked
 * key keeps its record (with `revokedAt`) so the listing says what existed and when it stopped; whether
 * a key may still be used (revoked, expired) is the API's decision, from the record.
 */
import { createHmac, timingSafeEqual } from "node:crypto"
import type { ApiKeyInfo, Project } from "../model/project"
import type { Role } from "../model/states"
import type { Clock } from "../util/clock"
import { iso } from "../util/clock"
import { ConflictError } from "../util/errors"
import { newId, randomToken } from "../util/ids"
import { Keys, ListIndex } from "./keys"
import { ItemExistsError, mutate, queryAll, type StateStore } from "./port"

/** Stored form of a key: its public info plus the hash it is found by. */
interface StoredKey extends ApiKeyInfo {
  hash: string
}

export const KeyPrefix = "sp_"

export function Projects(store: StateStore, clock: Clock, pepper: string) {
  const hash = (key: string) => createHmac("sha256", pepper).update(key).digest("hex")

  return {
    async create(name: string, displayName?: string): Promise<Project> {
      const project: Project = { name, createdAt: iso(clock.now()), ...(displayName ? { displayName } : {}) }
      try {
        await store.create({ ...Keys.project(name), type: "project", data: project })
      } catch (error) {
        if (error instanceof ItemExistsError)
          throw new ConflictError("project.exists", `project "${name}" exists already; pick another name`)
        throw error
      }
      return project
    },

    async get(name: string): Promise<Project | undefined> {
      return (await store.get<Project>(Keys.project(name)))?.data
    },

    /**
     * Create a key. `key` sets the secret (the local control plane's `SWARMPLANE_ADMIN_KEY`); otherwise
     * a random one is made. Creating a key that exists returns the existing record (same project only).
     */
    async createKey(
      project: string,
      role: Role,
      options: { name?: string; key?: string; expiresAt?: string } = {},
    ): Promise<ApiKeyInfo & { key: string }> {
      const key = options.key ?? `${KeyPrefix}${randomToken(24)}`
      const digest = hash(key)
      const info: StoredKey = {
        id: newId("key", clock.now()),
        project,
        role,
        prefix: key.slice(0, 10),
        createdAt: iso(clock.now()),
        hash: digest,
        ...(options.name ? { name: options.name } : {}),
        ...(options.expiresAt ? { expiresAt: options.expiresAt } : {}),
      }
      try {
        await store.create({
          ...Keys.apiKey(digest),
          type: "apikey",
          data: info,
          list: ListIndex.keys(project, info.id),
        })
      } catch (error) {
        if (!(error instanceof ItemExistsError)) throw error
        const existing = (await store.get<StoredKey>(Keys.apiKey(digest)))?.data
        if (!existing || existing.project !== project)
          throw new ConflictError("key.exists", "that key is already in use; choose another secret")
        const { hash: _, ...rest } = existing
        return { ...rest, key }
      }
      const { hash: _, ...rest } = info
      return { ...rest, key }
    },

    /** The key's record, when the secret matches one, revoked or expired too: whether it still works is the caller's check. */
    async verifyKey(key: string): Promise<ApiKeyInfo | undefined> {
      const digest = hash(key)
      const found = (await store.get<StoredKey>(Keys.apiKey(digest)))?.data
      if (!found || !timingSafeEqual(Buffer.from(found.hash), Buffer.from(digest))) return undefined
      const { hash: _, ...info } = found
      return info
    },

    /**
     * Mark the key revoked (at `at`); idempotent: a key revoked already keeps its first `revokedAt`.
     * Undefined when the project has no key with that id.
     */
    async revokeKey(project: string, id: string, at: number): Promise<ApiKeyInfo | undefined> {
      const { items } = await store.queryIndex<StoredKey>("list", ListIndex.keysOf(project), { skPrefix: id })
      const found = items.find((item) => item.data.id === id && item.data.project === project)
      if (!found) return undefined
      const stored = await mutate<StoredKey>(store, { pk: found.pk, sk: found.sk }, (item) =>
        item.data.revokedAt ? undefined : { ...item, data: { ...item.data, revokedAt: iso(at) } },
      )
      if (!stored) return undefined
      const { hash: _, ...info } = stored.data
      return info
    },

    async listKeys(project: string): Promise<ApiKeyInfo[]> {
      const items = await queryAll((cursor) =>
        store.queryIndex<StoredKey>("list", ListIndex.keysOf(project), { cursor }),
      )
      return items.map(({ data: { hash: _, ...info } }) => info)
    },
  }
}
export type Projects = ReturnType<typeof Projects>
