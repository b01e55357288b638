/** Small helpers for route definitions: JSON bodies, standard error responses, the security scheme. */
import type { OpenAPIHono } from "@hono/zod-openapi"
import { ErrorBody } from "../model/api"
import { z } from "../model/zod"
import type { ApiEnv } from "./context"

export type App = OpenAPIHono<ApiEnv>

export const security = [{ apiKey: [] }]

export function jsonBody<T extends z.ZodType>(schema: T, description: string) {
  return { content: { "application/json": { schema } }, required: true, description }
}

export function jsonResponse<T extends z.ZodType>(schema: T, description: string) {
  return { content: { "application/json": { schema } }, description }
}

const errorText: Record<number, string> = {
  400: "Bad input: `request.invalid` with the field paths, or malformed JSON.",
  401: "Missing or unknown API key.",
  403: "The key's role does not allow this.",
  404: "No such object in this project.",
  409: "Conflicts with the object's current state.",
  410: "Gone.",
  413: "Request body too large.",
  415: "Body is not JSON.",
  422: "Idempotency-Key reused for a different request.",
}

/** Error responses for a route, all with the standard error body. */
export function errors(...statuses: (keyof typeof errorText)[]) {
  return Object.fromEntries(
    statuses.map((s) => [
      s,
      { content: { "application/json": { schema: ErrorBody } }, description: errorText[s]! },
    ]),
  )
}

export const idempotencyHeader = z.object({
  "idempotency-key": z
    .string()
    .max(255)
    .optional()
    .describe("Makes the POST safe to retry: the same key with the same body returns the first response."),
})

export const nameParam = (what: string) =>
  z.object({
    name: z
      .string()
      .max(63)
      .describe(`${what} name.`)
      .openapi({ param: { name: "name", in: "path" } }),
  })
export const idParam = (what: string) =>
  z.object({
    id: z
      .string()
      .max(128)
      .describe(`${what} id.`)
      .openapi({ param: { name: "id", in: "path" } }),
  })
