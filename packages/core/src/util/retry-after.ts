/**
 * `Retry-After` (RFC 9110 §10.2.3) read the same way by every client of ours: the CLI, the agent's
 * heartbeat loop and the batch runner (through contract/retry-after.ts), and the backends' HTTP clients.
 */

/** A `Retry-After` beyond this is clamped: a client should not sleep for hours on one header. */
export const RetryAfterCapMs = 300_000

/** `Retry-After` in ms (delta-seconds or an HTTP date); undefined when absent or unreadable. */
export function retryAfterMs(
  header: string | null | undefined,
  now = Date.now(),
  capMs = RetryAfterCapMs,
): number | undefined {
  if (header === null || header === undefined || header.trim() === "") return undefined
  const seconds = Number(header)
  const ms = Number.isFinite(seconds) ? seconds * 1000 : Date.parse(header) - now
  if (!Number.isFinite(ms)) return undefined
  return Math.min(Math.max(ms, 0), capMs)
}
