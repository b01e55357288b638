/**
 * Test support: a runtime on the in-memory store and queue with a fake clock and a logger that keeps
 * what it was told, as the control loop's tests build it. Any part can be given instead.
 */
import { MemoryQueue } from "../../queue/memory"
import { createRuntime, type Runtime } from "../../runtime"
import type { Secrets } from "../../secrets/port"
import { MemoryStore } from "../../store/memory"
import type { StateStore } from "../../store/port"
import { FakeClock } from "../../util/clock"
import { memoryLogger } from "../../util/logger"

export function memoryRuntime(parts: { store?: StateStore; clock?: FakeClock; secrets?: Secrets } = {}): {
  rt: Runtime
  clock: FakeClock
  logger: ReturnType<typeof memoryLogger>
} {
  const clock = parts.clock ?? new FakeClock()
  const logger = memoryLogger()
  const rt = createRuntime({
    store: parts.store ?? MemoryStore(),
    queue: MemoryQueue({ clock }),
    clock,
    logger,
    pepper: "p",
    secrets: parts.secrets ?? { get: async () => "" },
  })
  return { rt, clock, logger }
}
