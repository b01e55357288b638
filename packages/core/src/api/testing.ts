/**
 * A whole API in one process for tests: memory store and queue, a fake clock, an operator project
 * with an admin key, and a `call` helper. Writes to the store are counted so tests can assert that a
 * refused request wrote nothing.
 */
import { MemoryQueue } from "../queue/memory"
import { createRuntime } from "../runtime"
import { MemoryStore } from "../store/memory"
import type { StateStore } from "../store/port"
import { FakeClock } from "../util/clock"
import { memoryLogger } from "../util/logger"
import { createApp } from "./app"
import type { ApiDeps } from "./context"

/**
 * A store wrapper counting writes that took effect. A conditional write the store refused (a create of a
 * name that exists, a stale update) changed nothing, so it is not counted: a refused request may try one.
 */
export function countWrites(store: StateStore): StateStore & { writes: () => number } {
  let writes = 0
  const count =
    <A extends unknown[], R>(fn: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      const result = await fn(...args)
      writes++
      return result
    }
  return {
    ...store,
    get: store.get.bind(store),
    getMany: store.getMany.bind(store),
    query: store.query.bind(store),
    queryIndex: store.queryIndex.bind(store),
    create: count(store.create.bind(store)) as StateStore["create"],
    createMany: count(store.createMany.bind(store)),
    update: count(store.update.bind(store)) as StateStore["update"],
    delete: count(store.delete.bind(store)),
    writes: () => writes,
  }
}

export interface CallOptions {
  key?: string | null
  body?: unknown
  raw?: string
  headers?: Record<string, string>
}

export async function testApi(options: { store?: StateStore } = {}) {
  const clock = new FakeClock()
  const store = countWrites(options.store ?? MemoryStore())
  const queue = MemoryQueue({ clock })
  const logger = memoryLogger()
  const pepper = "test-pepper"
  const deps: ApiDeps = createRuntime({
    store,
    queue,
    clock,
    logger,
    pepper,
    version: "test",
    secrets: { get: async () => "" },
  })
  const repos = deps.repos
  await repos.projects.create("default")
  const { key: adminKey } = await repos.projects.createKey("default", "admin")
  const app = createApp(deps)

  async function call(method: string, path: string, opts: CallOptions = {}) {
    const headers: Record<string, string> = { ...opts.headers }
    const key = opts.key === undefined ? adminKey : opts.key
    if (key) headers.Authorization = `Bearer ${key}`
    let body: string | undefined
    if (opts.raw !== undefined) body = opts.raw
    else if (opts.body !== undefined) {
      body = JSON.stringify(opts.body)
      headers["Content-Type"] ??= "application/json"
    }
    const res = await app.request(path, { method, headers, body })
    const text = await res.text()
    let json: unknown
    try {
      json = text ? JSON.parse(text) : undefined
    } catch {
      json = undefined
    }
    // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary response shapes
    return { status: res.status, headers: res.headers, text, json: json as any }
  }

  return { app, deps, store, queue, clock, logger, adminKey, call }
}
