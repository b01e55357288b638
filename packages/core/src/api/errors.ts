/**
 * The API's one error edge: every error becomes `{ "error": { "code", "message", "details" } }`. Visible
 * errors keep their status and code; anything else is a 500 whose detail is logged, never returned.
 */
import type { Context } from "hono"
import { HTTPException } from "hono/http-exception"
import { InvalidCursorError } from "../store/port"
import { VisibleError } from "../util/errors"
import type { Logger } from "../util/logger"

export function errorBody(code: string, message: string, details?: unknown) {
  return { error: { code, message, ...(details === undefined ? {} : { details }) } }
}

export function onError(logger: Logger) {
  return (error: Error, c: Context): Response => {
    // A body refused for its size is not read to its end: say the connection closes, so the client is
    // answered at once instead of sending on into a socket that is then dropped.
    if ((error instanceof VisibleError || error instanceof HTTPException) && error.status === 413)
      c.header("Connection", "close")
    if (error instanceof VisibleError)
      return c.json(errorBody(error.code, error.message, error.details), error.status)
    if (error instanceof InvalidCursorError)
      return c.json(
        errorBody(
          "request.invalid_cursor",
          "query.cursor: not a cursor of this listing; pass the nextCursor of the previous page",
          [{ path: "query.cursor", message: "not a cursor of this listing" }],
        ),
        400,
      )
    if (error instanceof HTTPException) {
      if (error.status === 400 && /malformed json/i.test(error.message))
        return c.json(
          errorBody(
            "request.malformed_json",
            "the body is not valid JSON: send a JSON object with Content-Type: application/json",
          ),
          400,
        )
      if (error.status === 413)
        return c.json(errorBody("request.too_large", "the body is too large: send at most 512 KiB"), 413)
      return c.json(errorBody(`http.${error.status}`, error.message || "request refused"), error.status)
    }
    logger.error("unhandled error", {
      method: c.req.method,
      path: c.req.path,
      error: error.message,
      stack: error.stack,
    })
    return c.json(errorBody("internal", "internal error; it was logged, try again"), 500)
  }
}
