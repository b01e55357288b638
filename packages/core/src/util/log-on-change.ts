/**
 * Repeated failures logged once, then again only when they change: a backend that stays unreachable
 * says so once, not every second. Per process (in Lambda, per container), keyed by what failed.
 */
import type { Logger } from "./logger"

const last = new Map<string, string>()

/** Log `message` as a warning for `key` unless it is what was logged for `key` last; `undefined` clears it. */
export function warnOnChange(logger: Logger, key: string, message: string | undefined): void {
  if (message === undefined) {
    if (last.delete(key)) logger.info(`${key}: recovered`)
    return
  }
  if (last.get(key) === message) return
  last.set(key, message)
  logger.warn(`${key}: ${message}`)
}
