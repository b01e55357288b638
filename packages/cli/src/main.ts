/**
 * `swarmplane`: runs one command line and returns its exit code (the bin launcher exits with it).
 * Every failure ends here and becomes one line on stderr with the fix, and a stable exit code
 * (errors.ts): usage errors 2, API errors by their code and status, anything unexpected 1.
 */
import { ApiError } from "./client"
import { createContext, type Io, processIo } from "./context"
import { CliError, ExitCode, exitCodeOf, formatError, hintFor, oneLine } from "./errors"
import { buildProgram, CommandLineError } from "./program"

export async function main(
  argv: string[],
  env: Record<string, string | undefined> = process.env,
  io: Io = processIo(),
  fetchImpl?: typeof fetch,
): Promise<number> {
  const ctx = createContext(io, env, fetchImpl)
  const program = buildProgram(ctx)
  try {
    await program.parseAsync(argv, { from: "user" })
    return ctx.exitCode
  } catch (error) {
    const failure = toCliError(error, ctx.lastConnection)
    if (failure === "done") return ExitCode.ok
    if (failure === "help") return ExitCode.usage
    io.stderr.write(formatError(failure))
    if (env.SWARMPLANE_DEBUG && error instanceof Error && error.stack) io.stderr.write(`${error.stack}\n`)
    return failure.exitCode
  }
}

function toCliError(
  error: unknown,
  connection: { profile?: string; keyFromEnv: boolean } | undefined,
): CliError | "done" | "help" {
  if (error instanceof CommandLineError) {
    const { code } = error.cause
    if (code === "commander.helpDisplayed" || code === "commander.version") return "done"
    // Help shown because a command needs a subcommand: commander printed it to stderr already.
    if (code === "commander.help") return "help"
    const message = oneLine(error.cause.message.replace(/^error: /, "")).replace(/\.$/, "")
    const after =
      /unknown option '-/.test(message) && error.command.endsWith("job submit")
        ? `see '${error.command} --help'; the job's own command and its flags go after --, e.g. swarmplane job submit --tasks 2 -- python infer.py --batch-size 8`
        : `see '${error.command} --help'`
    return new CliError(message, ExitCode.usage, after)
  }
  if (error instanceof CliError) return error
  if (error instanceof ApiError) {
    const keys = {
      ...(connection?.profile ? { profile: connection.profile } : {}),
      fromEnv: connection?.keyFromEnv ?? false,
    }
    return new CliError(
      error.message,
      exitCodeOf(error.status, error.code),
      hintFor(error, keys),
      error.status === 0 ? undefined : error.code,
    )
  }
  const message = error instanceof Error ? error.message : String(error)
  return new CliError(
    `unexpected error: ${message}`,
    ExitCode.error,
    "run again with SWARMPLANE_DEBUG=1 for details, and report it",
  )
}
