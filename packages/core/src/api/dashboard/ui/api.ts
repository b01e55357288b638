/**
 * The dashboard's API client. The key is kept in sessionStorage only (gone when the tab closes) and
 * travels only in the `Authorization` header, never in a URL; errors become `ApiError` with the API's
 * `{ error: { code, message, details } }`.
 */
const StorageKey = "swarmplane.apiKey"

export class ApiError extends Error {
  readonly status: number
  readonly code: string
  readonly details: unknown

  constructor(status: number, code: string, message: string, details?: unknown) {
    super(message)
    this.name = "ApiError"
    this.status = status
    this.code = code
    this.details = details
  }
}

/** The HTTP status of an API error; undefined for anything else (an abort, a bug). */
export function statusOf(error: unknown): number | undefined {
  return error instanceof ApiError ? error.status : undefined
}

/** Whether the call was aborted (the view moved on), which is never shown. */
export function isAbort(error: unknown): boolean {
  return typeof error === "object" && error !== null && "name" in error && error.name === "AbortError"
}

/** An error's message, for a sentence. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

export const session = {
  get key(): string | null {
    try {
      return sessionStorage.getItem(StorageKey)
    } catch {
      return null
    }
  },
  save(key: string): void {
    sessionStorage.setItem(StorageKey, key)
  },
  clear(): void {
    try {
      sessionStorage.removeItem(StorageKey)
    } catch {}
  },
}

export interface ApiOptions {
  method?: string
  /** The key to send; the session's by default (sign-in passes the one typed). */
  key?: string | null
  signal?: AbortSignal
  headers?: Record<string, string>
}

interface ErrorFields {
  code?: string
  message?: string
  details?: unknown
}

/** Call the API on this origin. Resolves with the JSON body; rejects with ApiError (or AbortError). */
export async function api<T>(path: string, options: ApiOptions = {}): Promise<T> {
  const { method = "GET", key = session.key, signal, headers = {} } = options
  let res: Response
  try {
    res = await fetch(path, {
      method,
      signal,
      cache: "no-store",
      credentials: "omit",
      headers: { Accept: "application/json", ...(key ? { Authorization: `Bearer ${key}` } : {}), ...headers },
    })
  } catch (error) {
    if (isAbort(error)) throw error
    throw new ApiError(0, "network", "The control plane did not answer; check your connection.")
  }
  const text = await res.text()
  let body: unknown
  try {
    body = text ? JSON.parse(text) : undefined
  } catch {
    body = undefined
  }
  if (!res.ok) {
    const error = (body as { error?: unknown } | undefined)?.error
    const e: ErrorFields = typeof error === "object" && error ? error : {}
    throw new ApiError(
      res.status,
      e.code || `http.${res.status}`,
      e.message || res.statusText || "the request failed",
      e.details,
    )
  }
  return body as T
}

/** A fresh Idempotency-Key, so a retried POST is answered once. */
export function idempotencyKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16))
  return `dashboard-${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`
}
