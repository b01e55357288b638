/**
 * A failed parse as the API reports it: `{ path, message }` pairs such as `config.port: must be at most
 * 65535`, worded by `friendlyMessage` (model/issues.ts; the CLI words its offline checks with it too).
 */
import type { z } from "@hono/zod-openapi"
import { friendlyMessage } from "../model/issues"
import type { FieldIssue } from "../util/errors"

/** Field issues of a failed parse; `prefix` names where the input came from (`query`, `path`), none for the body. */
export function fieldIssues(error: z.ZodError, prefix?: string): FieldIssue[] {
  return error.issues.map((issue) => {
    const path = [...(prefix ? [prefix] : []), ...issue.path.map(String)].join(".")
    return { path, message: friendlyMessage(issue) }
  })
}
