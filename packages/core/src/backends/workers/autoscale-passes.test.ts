/**
 * The workers autoscaler pass after pass on the in-memory store, whose reads hand out frozen data as
 * the local plane's journal does: each pass reads its state, changes its own copy and puts it back.
 */
import { expect, test } from "vitest"
import { memoryRuntime } from "../../control/testing/runtime"
import { BackendConfig } from "../../model/backend"
import type { ProviderInstance, ScaleGroupProvider } from "../../providers/port"
import { WorkersBackend } from "./backend"

test("a group with a minimum is kept at it pass after pass, and the state each pass leaves is the next one's", async () => {
  const { rt, clock } = memoryRuntime()
  const running: ProviderInstance[] = []
  const provider: ScaleGroupProvider = {
    async start(_target, count) {
      const ids = Array.from({ length: count }, (_, i) => `i-${running.length + i}`)
      for (const id of ids) running.push({ id, startedAt: clock.now() })
      return ids
    },
    async stop(_target, ids) {
      for (const id of ids)
        running.splice(
          running.findIndex((r) => r.id === id),
          1,
        )
    },
    async list() {
      return [...running]
    },
  }
  const config = BackendConfig.parse({
    type: "workers",
    scaleGroups: [{ name: "g", provider: { type: "local" }, min: 1, max: 2, resources: {} }],
  })
  const { backend: record } = await rt.repos.backends.put("p", "w", config)
  const backend = WorkersBackend(record as Parameters<typeof WorkersBackend>[0], {
    ...rt,
    providers: { local: provider },
  })
  const results = []
  for (let pass = 0; pass < 3; pass++) {
    results.push(await backend.autoscale({ pending: [], live: [] }))
    clock.advance(60_000)
  }
  // One start for the minimum, then nothing more: the later passes read the start the first recorded.
  expect(running.map((r) => r.id)).toEqual(["i-0"])
  expect(results).toHaveLength(3)
})
