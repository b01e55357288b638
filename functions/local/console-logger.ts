/** The local control plane's logger: one readable line per entry, `HH:MM:SS message`, secrets redacted. */
import { type LogFields, type Logger, redact } from "@swarmplane/core/util/logger"

const levels = ["debug", "info", "warn", "error"] as const
type Level = (typeof levels)[number]

export function consoleLogger(options: { level?: Level; write?: (line: string) => void } = {}): Logger {
  const min = levels.indexOf(options.level ?? "info")
  const write = options.write ?? ((line: string) => process.stdout.write(`${line}\n`))
  const at =
    (level: Level) =>
    (message: string, fields?: LogFields): void => {
      if (levels.indexOf(level) < min) return
      const time = new Date().toISOString().slice(11, 19)
      const tag = level === "info" ? "" : `${level.toUpperCase()} `
      const extra =
        level === "debug" || level === "error" ? fields && JSON.stringify(redact(fields)) : undefined
      write(`${time} ${tag}${message}${extra && extra !== "{}" ? ` ${extra}` : ""}`)
    }
  return { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") }
}
