/** The agent's log: one line per event on stderr, so stdout stays free for what a command prints. */

export interface Logger {
  info(message: string): void
  warn(message: string): void
  error(message: string): void
}

export function stderrLogger(name = "swarmplane-agent"): Logger {
  const line = (level: string, message: string) =>
    process.stderr.write(`${new Date().toISOString()} ${level} ${name}: ${message}\n`)
  return {
    info: (m) => line("info ", m),
    warn: (m) => line("warn ", m),
    error: (m) => line("error", m),
  }
}

export const silentLogger: Logger = { info() {}, warn() {}, error() {} }
