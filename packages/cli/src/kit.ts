/**
 * Small helpers shared by the commands: options every command reads, number and KEY=VALUE flag
 * parsers (their errors are usage errors, exit 2), help examples, reading spec files for a command
 * (warnings and every error printed, exit 5 on a broken file), and printing results.
 */
import { type Command, InvalidArgumentError, Option } from "commander"
import type { Client } from "./client"
import type { Ctx } from "./context"
import { CliError, ExitCode } from "./errors"
import { formatIssue, type Kind, parseSpec, readSpecText, type SpecFile } from "./files"
import { type Format, Formats, formatted, parseFormat } from "./output"

/** Options any command may get: connection flags (global) and the output format. */
export interface Common {
  profile?: string
  api?: string
  output?: string
  /** `--json`: the same as `-o json`, and it wins over `-o`. */
  json?: boolean
}

export function common(cmd: Command): Common & { format: Format } {
  const o = cmd.optsWithGlobals<Common>()
  return { ...o, format: o.json ? "json" : parseFormat(o.output) }
}

export function client(ctx: Ctx, cmd: Command): Promise<Client> {
  const { profile, api } = cmd.optsWithGlobals<Common>()
  return ctx.client({ ...(profile ? { profile } : {}), ...(api ? { api } : {}) })
}

export const outputOption = () =>
  new Option("-o, --output <format>", "output format").choices(Formats).default("table")

/** `--json`, the shorthand scripts reach for, beside `-o`. */
export const jsonOption = () => new Option("--json", "the same as -o json")

export function examples(cmd: Command, lines: string[]): Command {
  return cmd.addHelpText("after", `\nExamples:\n${lines.map((l) => `  ${l}`).join("\n")}\n`)
}

/** A parser of whole numbers in [min, max] for commander options. */
export function integer(min = 0, max = Number.MAX_SAFE_INTEGER) {
  return (value: string): number => {
    const n = Number(value)
    if (!/^-?\d+$/.test(value.trim()) || n < min || n > max)
      throw new InvalidArgumentError(
        `must be a whole number${max < Number.MAX_SAFE_INTEGER ? ` from ${min} to ${max}` : ` of at least ${min}`}`,
      )
    return n
  }
}

/** A parser of positive numbers (fractions allowed), e.g. CPU cores. */
export function positive(value: string): number {
  const n = Number(value)
  if (!Number.isFinite(n) || n <= 0)
    throw new InvalidArgumentError("must be a positive number, e.g. 0.5 or 2")
  return n
}

/** Collects a repeatable option into a list. */
export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value]
}

/** `KEY=VALUE` pairs into a map; a bare `KEY` takes its value from this environment. */
export function pairs(
  items: string[],
  what: string,
  env: Record<string, string | undefined>,
): Record<string, string> {
  const result: Record<string, string> = {}
  for (const item of items) {
    const at = item.indexOf("=")
    const key = at < 0 ? item : item.slice(0, at)
    const value = at < 0 ? env[key] : item.slice(at + 1)
    if (!key)
      throw new CliError(`${what} "${item}" has no name`, ExitCode.usage, `write ${what} as KEY=VALUE`)
    if (value === undefined)
      throw new CliError(
        `${what} "${key}" has no value and is not set here`,
        ExitCode.usage,
        `write it as ${key}=VALUE`,
      )
    result[key] = value
  }
  return result
}

/** Print to stdout. */
export function out(ctx: Ctx, text: string): void {
  ctx.io.stdout.write(text.endsWith("\n") || text === "" ? text : `${text}\n`)
}

/** Print a note for people to stderr (never parsed by scripts). */
export function note(ctx: Ctx, text: string): void {
  ctx.io.stderr.write(`${text}\n`)
}

/** Print an API object: JSON/YAML as is, else the table view. */
export function show(ctx: Ctx, format: Format, value: unknown, render: () => string): void {
  out(ctx, formatted(format, value, render))
}

/**
 * Read and check a spec file of `kind` for a command: warnings go to stderr, and a broken file prints
 * every error (file:line:col: path: message) and ends the command with exit 5.
 */
export async function readSpec(ctx: Ctx, file: string, kind: Kind, command: string): Promise<SpecFile> {
  const text = await readSpecText(file, ctx.io.readStdin)
  const shown = file === "-" ? "<stdin>" : file
  const guess = parseSpec(text, shown)
  if (guess.kind && guess.kind !== kind)
    throw new CliError(
      `${shown} looks like a ${guess.kind} file, not a ${kind} file`,
      ExitCode.invalid,
      `${command} takes a ${kind} file; for a ${guess.kind} use: ${usageOf(guess.kind)}`,
    )
  // The guess already is the file read as `kind` when it detected that kind.
  const spec = guess.kind === kind ? guess : parseSpec(text, shown, kind)
  for (const warning of spec.warnings) note(ctx, formatIssue(shown, warning))
  if (spec.errors.length) {
    for (const error of spec.errors) note(ctx, formatIssue(shown, error))
    throw new CliError(
      `${shown} is not a valid ${kind} file: ${spec.errors.length} error${spec.errors.length > 1 ? "s" : ""} (above)`,
      ExitCode.invalid,
    )
  }
  return spec
}

function usageOf(kind: Kind): string {
  return {
    swarm: "swarmplane up -f FILE",
    job: "swarmplane job submit -f FILE",
    backend: "swarmplane backend add -f FILE",
  }[kind]
}
