/**
 * Logging port. Core logs through this; the Lambda composition root adapts Powertools' logger to it
 * and the local control plane prints one readable line per entry. Fields whose names look like
 * secrets are redacted before any sink sees them.
 */
export type LogFields = Record<string, unknown>

export interface Logger {
  debug(message: string, fields?: LogFields): void
  info(message: string, fields?: LogFields): void
  warn(message: string, fields?: LogFields): void
  error(message: string, fields?: LogFields): void
}

const secretName = /(key|token|secret|password|passphrase|authorization|credential|pepper)/i

/** A copy of `fields` with secret-looking values replaced by "[redacted]" (recursively). */
export function redact(fields: LogFields | undefined): LogFields | undefined {
  if (!fields) return fields
  const walk = (value: unknown, depth: number): unknown => {
    if (depth > 6 || value === null || typeof value !== "object") return value
    if (Array.isArray(value)) return value.map((v) => walk(v, depth + 1))
    if (value instanceof Error) return { name: value.name, message: value.message }
    const out: Record<string, unknown> = {}
    for (const [k, v] of Object.entries(value)) {
      out[k] =
        secretName.test(k) && (typeof v === "string" || typeof v === "number")
          ? "[redacted]"
          : walk(v, depth + 1)
    }
    return out
  }
  return walk(fields, 0) as LogFields
}

export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} }

/** Collects entries in memory; for tests that assert on what was logged. */
export function memoryLogger(): Logger & {
  entries: { level: string; message: string; fields?: LogFields }[]
} {
  const entries: { level: string; message: string; fields?: LogFields }[] = []
  const at =
    (level: string) =>
    (message: string, fields?: LogFields): void => {
      entries.push({ level, message, fields: redact(fields) })
    }
  return { entries, debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") }
}
