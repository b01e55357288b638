/**
 * Logging port. Core logs through this; the Lambdas write JSON lines (`jsonLogger`) and the local
 * control plane prints one readable line per entry. Fields whose names look like secrets are redacted
 * before any sink sees them.
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

export const LogLevels = ["debug", "info", "warn", "error", "silent"] as const
export type LogLevel = (typeof LogLevels)[number]

/**
 * Structured JSON, one line per entry (what CloudWatch Logs and Logs Insights read as fields):
 * `{"level":"INFO","message":...,"timestamp":...,"service":...,...fields}`, fields redacted, entries
 * under `level` dropped. Chosen over Powertools' logger for the Lambdas: the same line shape, without
 * its 20 KB and its setup on every cold start.
 */
export function jsonLogger(options: {
  service: string
  level?: LogLevel
  write?: (line: string) => void
  now?: () => Date
}): Logger {
  const min = LogLevels.indexOf(options.level ?? "info")
  const write = options.write ?? ((line: string) => process.stdout.write(`${line}\n`))
  const now = options.now ?? (() => new Date())
  const at =
    (level: Exclude<LogLevel, "silent">) =>
    (message: string, fields?: LogFields): void => {
      if (LogLevels.indexOf(level) < min) return
      let line: string
      try {
        line = JSON.stringify({
          ...redact(fields),
          level: level.toUpperCase(),
          message,
          timestamp: now().toISOString(),
          service: options.service,
        })
      } catch {
        // A field that cannot be serialised (a cycle, a BigInt) does not lose the entry.
        line = JSON.stringify({
          level: level.toUpperCase(),
          message,
          timestamp: now().toISOString(),
          service: options.service,
        })
      }
      write(line)
    }
  return { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") }
}

/** A log level named in the environment (`debug`, `INFO`, `SILENT`, ...; `WARNING`, `FATAL` as Lambda names them), else undefined. */
export function parseLogLevel(value: string | undefined): LogLevel | undefined {
  const level = value?.trim().toLowerCase()
  if (level === "warning") return "warn"
  if (level === "critical" || level === "fatal") return "error"
  return LogLevels.find((l) => l === level)
}
