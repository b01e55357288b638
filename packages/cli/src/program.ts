/**
 * The `swarmplane` command tree (commander): global options, command groups, help text with the
 * exit codes and environment, and every command wired to the context. A fresh tree per run.
 */
import { readFileSync } from "node:fs"
import { Command, type CommanderError } from "commander"
import { accessCommands } from "./commands/access"
import { backendCommands } from "./commands/backend"
import { completionCommand } from "./commands/completion"
import { jobCommands } from "./commands/job"
import { setupCommands } from "./commands/setup"
import { swarmCommands } from "./commands/swarm"
import type { Ctx } from "./context"
import { ExitCodeHelp } from "./errors"

/** A commander error, with the command it came from (for the `--help` hint). */
export class CommandLineError extends Error {
  constructor(
    override readonly cause: CommanderError,
    readonly command: string,
  ) {
    super(cause.message)
    this.name = "CommandLineError"
  }
}

const about = `LLM serving swarms and sharded GPU batch jobs, on a swarmplane control plane.
Start one here with 'swarmplane dev' (or npm start): it writes the profile "local",
so the commands below work with no setup.`

const footer = `
Environment:
  SWARMPLANE_API       control plane URL (instead of the profile's)
  SWARMPLANE_KEY       API key (instead of the profile's)
  SWARMPLANE_PROFILE   profile to use (like --profile)
  SWARMPLANE_CONFIG_DIR  where config.json is (default $XDG_CONFIG_HOME/swarmplane or ~/.config/swarmplane)
  NO_COLOR             no colours

${ExitCodeHelp}

Examples:
  swarmplane dev                                   # a local control plane (another terminal)
  swarmplane up -f swarm.yaml --wait
  swarmplane job submit --swarm demo --tasks 4 --watch -- sh -c 'echo shard $SHARD_ID'
  swarmplane job logs JOB --task 1
  swarmplane down demo --yes

Docs: docs/cli.md; the API reference is at <api>/docs.
`

function version(): string {
  try {
    const pkg: unknown = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"))
    const v = typeof pkg === "object" && pkg !== null && "version" in pkg ? pkg.version : undefined
    return typeof v === "string" ? v : "unknown"
  } catch {
    return "unknown"
  }
}

export function buildProgram(ctx: Ctx): Command {
  const program = new Command("swarmplane")
    .description(about)
    .version(version(), "-V, --version", "print the version")
    .option("--profile <name>", "profile to use (see swarmplane profile list)")
    .option("--api <url>", "control plane URL, instead of the profile's")
    .addHelpText("after", footer)
    .showSuggestionAfterError(true)

  program.commandsGroup("Swarms:")
  swarmCommands(program, ctx)
  program.commandsGroup("Jobs:")
  jobCommands(program, ctx)
  program.commandsGroup("Backends and workers:")
  backendCommands(program, ctx)
  program.commandsGroup("Access:")
  accessCommands(program, ctx)
  program.commandsGroup("Setup:")
  setupCommands(program, ctx)
  completionCommand(program, ctx)
  program.helpCommand("help [command]", "help for a command")

  // Every command writes through the context's streams and reports errors to main, not process.exit.
  const configure = (cmd: Command, path: string) => {
    cmd
      .configureHelp({ showGlobalOptions: true })
      .configureOutput({
        writeOut: (text) => ctx.io.stdout.write(text),
        writeErr: (text) => ctx.io.stderr.write(text),
        outputError: () => {},
      })
      .exitOverride((error) => {
        throw new CommandLineError(error, path)
      })
    for (const sub of cmd.commands) configure(sub, `${path} ${sub.name()}`)
  }
  configure(program, "swarmplane")
  return program
}
