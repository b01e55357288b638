/**
 * How a failed Kubernetes call is told: `KubeApiError` (a `BackendError`, so the control loop records
 * an unreachable or refusing cluster as the backend's health) with the `reason` of the API server's
 * `Status` body (backend-contracts.md Part D), which callers branch on: `AlreadyExists` means adopt,
 * `NotFound` means gone, `Conflict` means read again.
 */
import { BackendError } from "../../util/errors"
import type { Status } from "./types"

/** The `Status.reason`s the backend acts on (the API server has more; any string may come). */
export const KubeReason = {
  NotFound: "NotFound",
  AlreadyExists: "AlreadyExists",
  Conflict: "Conflict",
  Invalid: "Invalid",
  Forbidden: "Forbidden",
  Unauthorized: "Unauthorized",
  TooManyRequests: "TooManyRequests",
  Expired: "Expired",
  Gone: "Gone",
  Timeout: "Timeout",
  ServerTimeout: "ServerTimeout",
  InternalError: "InternalError",
  ServiceUnavailable: "ServiceUnavailable",
  BadRequest: "BadRequest",
  UnsupportedMediaType: "UnsupportedMediaType",
} as const
export type KubeReason = (typeof KubeReason)[keyof typeof KubeReason]

/** The reason a status implies when the body carries none (a proxy's HTML page, an empty body). */
const reasonOfStatus: Record<number, KubeReason> = {
  400: "BadRequest",
  401: "Unauthorized",
  403: "Forbidden",
  404: "NotFound",
  409: "Conflict",
  410: "Expired",
  415: "UnsupportedMediaType",
  422: "Invalid",
  429: "TooManyRequests",
  500: "InternalError",
  503: "ServiceUnavailable",
  504: "Timeout",
}

/** A failed call to the cluster's API server: the status (absent when no answer came) and its reason. */
export class KubeApiError extends BackendError {
  constructor(
    message: string,
    retryable: boolean,
    readonly method: string,
    readonly path: string,
    readonly status?: number,
    readonly reason?: KubeReason | (string & {}),
    readonly details?: Status["details"],
    options?: { cause?: unknown },
  ) {
    super(message, retryable, options)
    this.name = "KubeApiError"
  }
}

/** True when `error` is a `KubeApiError` with this reason. */
export const isReason = (error: unknown, reason: KubeReason): error is KubeApiError =>
  error instanceof KubeApiError && error.reason === reason

/** The `Status` of an error answer, or what its HTTP status implies when the body is not one. */
export function statusOf(
  httpStatus: number,
  body: string,
): { reason?: string; message?: string; details?: Status["details"] } {
  try {
    const parsed = JSON.parse(body) as Partial<Status> | null
    if (parsed && typeof parsed === "object" && parsed.kind === "Status")
      return {
        reason:
          typeof parsed.reason === "string" && parsed.reason ? parsed.reason : reasonOfStatus[httpStatus],
        message: typeof parsed.message === "string" ? parsed.message : undefined,
        details: parsed.details && typeof parsed.details === "object" ? parsed.details : undefined,
      }
  } catch {
    // not JSON: quoted below as text
  }
  const trimmed = body.trim().slice(0, 200)
  return { reason: reasonOfStatus[httpStatus], message: trimmed || undefined }
}

/** Worth another pass: a busy or broken server, a refused token (fixed outside the work), a stale read. */
export function retryableStatus(status: number, reason?: string): boolean {
  return (
    status === 429 ||
    status >= 500 ||
    status === 401 ||
    status === 403 ||
    reason === "Conflict" ||
    status === 410
  )
}

export const hint: Record<number, string> = {
  401: "; the cluster refused the token (is the function's IAM role mapped by an EKS access entry?)",
  403: "; the function's IAM role lacks the Kubernetes permission (check its access entry / RBAC)",
}
