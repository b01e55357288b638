/** Shapes shared by every API response: the error body, health, and paged lists. */
import { z } from "./zod"

export const ErrorBody = z
  .object({
    error: z
      .object({
        code: z.string().describe("Stable dotted code, e.g. `request.invalid`, `swarm.not_found`."),
        message: z.string().describe("What went wrong and what to send instead."),
        details: z
          .unknown()
          .optional()
          .describe("Structured detail; for `request.invalid`, `[{ path, message }]`."),
      })
      .describe("The error."),
  })
  .openapi("Error")

export const Health = z
  .object({
    status: z.literal("ok").describe("Always `ok` when the API answers."),
    version: z.string().describe("swarmplane version."),
    time: z.string().describe("Server time, ISO-8601."),
  })
  .openapi("Health")

/** A page of a listing: the items and, when more follow, the cursor of the next page. */
export function pageOf<T extends z.ZodType>(item: T, name: string) {
  return z
    .object({
      items: z.array(item).describe("Items of this page."),
      nextCursor: z
        .string()
        .optional()
        .describe("Pass as `cursor` to get the next page; absent on the last page."),
    })
    .openapi(name)
}
