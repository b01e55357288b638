/**
 * Test support shared by the randomized fault runs against a real substrate (slurm-chaos.ts on the dev
 * Slurm cluster, lepton-chaos.ts on the fake Lepton): the control plane in this process over the
 * memory store (recorded under the faults, for the event check) with one backend `chaos`, its API
 * called as a user retries, a pass as a ticker runs it (the backend's seam under the faults), and the
 * store unfaulted for the checks.
 */
import { setTimeout as sleep } from "node:timers/promises"
import { createApp } from "@swarmplane/core/api/app"
import type { TaskBackend } from "@swarmplane/core/backends/protocol"
import { createBackend } from "@swarmplane/core/backends/registry"
import { type PassReport, reconcilePass } from "@swarmplane/core/control/reconcile"
import type { BackendConfig } from "@swarmplane/core/model/backend"
import { MemoryQueue } from "@swarmplane/core/queue/memory"
import { createRuntime } from "@swarmplane/core/runtime"
import { Repos } from "@swarmplane/core/store/index"
import { MemoryStore } from "@swarmplane/core/store/memory"
import { systemClock } from "@swarmplane/core/util/clock"
import { silentLogger } from "@swarmplane/core/util/logger"
import { History, recordingStore } from "./fault-checks"
import { type Faults, faultyBackend, faultyQueue, faultyStore } from "./faults"

export const project = "default"
export const backendId = "chaos"

export interface ChaosPlaneOptions {
  /** The backend `chaos` (already parsed). */
  config: BackendConfig
  /** What every secret the backend reads resolves to (its key or token). */
  secret: () => Promise<string> | string
  /** The passes' lease; production's when absent. */
  leaseTtlMs?: number
  /** The longest wait between a user's retries of a request the API answered 409, 429 or 5xx. */
  maxRetryWaitMs?: number
}

export async function chaosPlane(faults: Faults, options: ChaosPlaneOptions) {
  const history = new History()
  const base = MemoryStore()
  const store = faultyStore(recordingStore(base, history), faults)
  const queue = faultyQueue(MemoryQueue({ clock: systemClock }), faults)
  const rt = createRuntime({
    store,
    queue,
    clock: systemClock,
    logger: silentLogger,
    pepper: "chaos-pepper",
    secrets: { get: async () => options.secret() },
  })
  const clean = Repos(base, systemClock, silentLogger, "chaos-pepper")
  const app = createApp(rt)
  const { key } = await faults.quiet(async () => {
    await rt.repos.projects.create(project)
    await rt.repos.backends.put(project, backendId, options.config)
    return rt.repos.projects.createKey(project, "admin")
  })
  const maxWait = options.maxRetryWaitMs ?? 5_000
  /** A request, retried with the same Idempotency-Key while the answer says to try again. */
  const callApi = async (method: string, path: string, body?: unknown, idem?: string) => {
    for (let tries = 1; ; tries++) {
      const res = await app.request(path, {
        method,
        headers: {
          Authorization: `Bearer ${key}`,
          ...(body === undefined ? {} : { "Content-Type": "application/json" }),
          ...(idem ? { "Idempotency-Key": idem } : {}),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      })
      // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary response shapes
      const json: any = await res.json().catch(() => undefined)
      if (res.status < 500 && ![409, 429].includes(res.status)) return { status: res.status, json }
      await sleep(Math.min(maxWait, (maxWait / 25) * 2 ** tries))
    }
  }
  const passes = { ran: 0, skipped: 0, failed: 0 }
  let owners = 0
  /** One pass as a ticker runs it; `wrap` puts something of the test's around the (faulty) backend. */
  const pass = async (wrap: (backend: TaskBackend) => TaskBackend = (backend) => backend) => {
    let last: PassReport | undefined
    try {
      for (const record of await rt.repos.backends.listAll()) {
        const backend = wrap(faultyBackend(await createBackend(record, rt), faults))
        last = await reconcilePass(rt, record, `chaos-${owners++}`, backend, {
          leaseTtlMs: options.leaseTtlMs,
        }).finally(() => backend.close())
        if (!last.ran) passes.skipped++
        else if (last.error) passes.failed++
        else passes.ran++
      }
    } catch {
      passes.failed++
    }
    return last
  }
  return { rt, queue, clean, history, callApi, pass, passes }
}
