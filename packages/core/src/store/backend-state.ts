/** A backend's own small document (the workers autoscaler's rate-limit windows and last decision). */
import { Keys } from "./keys"
import { mutate, type StateStore } from "./port"

export function BackendState(store: StateStore) {
  return {
    async get<T>(
      project: string,
      backendId: string,
      options: { consistent?: boolean } = {},
    ): Promise<T | undefined> {
      return (await store.get<T>(Keys.autoscaler(project, backendId), options))?.data
    },

    /** Replace the document (created when absent); a concurrent first write keeps the other one. */
    async put<T>(project: string, backendId: string, data: T): Promise<void> {
      const key = Keys.autoscaler(project, backendId)
      const written = await mutate<T>(store, key, (item) => ({ ...item, data }))
      if (!written) await store.create({ ...key, type: "autoscaler", data }).catch(() => undefined)
    },
  }
}
export type BackendState = ReturnType<typeof BackendState>
