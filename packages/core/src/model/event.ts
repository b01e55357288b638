/** Events: every state change, written beside the object it is about, read by describe/events/dashboard. */

import { Timestamp } from "./common"
import { z } from "./zod"

export const EntityKinds = ["job", "task", "swarm", "worker", "backend"] as const

export const Event = z
  .object({
    id: z.string().describe("Event id, time-sortable."),
    entity: z
      .object({
        kind: z.enum(EntityKinds).describe("Kind of object the event is about."),
        id: z.string().describe("Id of that object (for a task: `<jobId>/<index>`)."),
      })
      .describe("The object that changed."),
    from: z.string().optional().describe("State before the change; absent on creation."),
    to: z.string().describe("State after the change."),
    reason: z
      .string()
      .describe("Short machine-readable reason, e.g. `created`, `cancel_requested`, `exit_code`."),
    message: z.string().optional().describe("Human-readable detail."),
    at: Timestamp.describe("When it happened."),
  })
  .openapi("Event")
export type Event = z.infer<typeof Event>
