/**
 * How a failed Lepton call is told: `LeptonApiError` (a `BackendError`, so the control loop records an
 * unreachable or refusing Lepton as the backend's health), Lepton's `{code, message}` body read out of
 * an answer, and a hint for the statuses a user can fix.
 */
import { BackendError } from "../../util/errors"
import { ErrorBody } from "./types"

/** A failed call to Lepton: the status (absent when no answer came) and Lepton's error code. */
export class LeptonApiError extends BackendError {
  constructor(
    message: string,
    retryable: boolean,
    readonly method: string,
    readonly path: string,
    readonly status?: number,
    readonly code?: string,
    options?: { cause?: unknown },
  ) {
    super(message, retryable, options)
    this.name = "LeptonApiError"
  }
}

/** Lepton's `{code, message}`, or the start of a body that is not one. */
export function errorOf(body: string): { code?: string; message?: string } {
  try {
    const parsed = ErrorBody.safeParse(JSON.parse(body))
    if (parsed.success)
      return { code: parsed.data.code ?? undefined, message: parsed.data.message ?? undefined }
  } catch {
    // not JSON: quoted below as text
  }
  const trimmed = body.trim().slice(0, 200)
  return trimmed ? { message: trimmed } : {}
}

export const hint: Record<number, string> = {
  401: "; check the backend's tokenSecret (the token is missing, wrong or expired)",
  403: "; check that the token belongs to this workspace and has not expired",
}
