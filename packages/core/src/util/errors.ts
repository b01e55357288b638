/**
 * Errors that cross an edge. Core throws `VisibleError`s for what a caller can fix; adapters wrap
 * transport failures as `BackendError { retryable }`. Each edge (API, queue consumer, CLI) maps
 * them once: the API to `{ error: { code, message, details } }` with the error's status.
 */

/** HTTP statuses a `VisibleError` may carry. */
export type ErrorStatus = 400 | 401 | 403 | 404 | 409 | 410 | 413 | 415 | 422 | 429 | 501 | 503

/** An error whose code and message are safe to show to the caller (never includes secrets). */
export class VisibleError extends Error {
  constructor(
    /** Dotted, stable code such as `swarm.not_found`. */
    readonly code: string,
    message: string,
    readonly status: ErrorStatus = 400,
    readonly details?: unknown,
  ) {
    super(message)
    this.name = "VisibleError"
  }
}

/** One problem in a request, with the path of the field it is about. */
export interface FieldIssue {
  path: string
  message: string
}

export class ValidationError extends VisibleError {
  constructor(
    readonly issues: FieldIssue[],
    code = "request.invalid",
  ) {
    super(code, issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join("; "), 400, issues)
    this.name = "ValidationError"
  }
}

export class NotFoundError extends VisibleError {
  constructor(kind: string, id: string) {
    super(`${kind}.not_found`, `${kind} "${id}" not found in this project`, 404, { kind, id })
    this.name = "NotFoundError"
  }
}

export class ConflictError extends VisibleError {
  constructor(code: string, message: string, details?: unknown) {
    super(code, message, 409, details)
    this.name = "ConflictError"
  }
}

export class UnauthorizedError extends VisibleError {
  constructor(message: string) {
    super("auth.unauthorized", message, 401)
    this.name = "UnauthorizedError"
  }
}

export class ForbiddenError extends VisibleError {
  constructor(message: string) {
    super("auth.forbidden", message, 403)
    this.name = "ForbiddenError"
  }
}

/** A capability a backend lacks: never a silent no-op. */
export class NotSupportedError extends VisibleError {
  constructor(backendType: string, capability: string) {
    super("backend.not_supported", `backend type "${backendType}" does not support ${capability}`, 501, {
      backendType,
      capability,
    })
    this.name = "NotSupportedError"
  }
}

/** A failure talking to a substrate or a dependency. `retryable` decides whether the work is retried. */
export class BackendError extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
    options?: { cause?: unknown },
  ) {
    super(message, options)
    this.name = "BackendError"
  }
}

/** True when retrying the same operation later may succeed. */
export function isRetryable(error: unknown): boolean {
  if (error instanceof BackendError) return error.retryable
  if (error instanceof VisibleError) return false
  return true
}
