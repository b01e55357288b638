/**
 * The CLI's error edge: stable exit codes, `CliError` (a one-line message with the fix), and the
 * mapping of API errors to both. Every failure reaches the user as one line on stderr:
 * `swarmplane: <what went wrong> (<code>); <how to fix it>`.
 */
import type { ApiError } from "./client"

/** Exit codes: stable, documented in docs/cli.md and `swarmplane --help`. */
export const ExitCode = {
  ok: 0,
  error: 1,
  usage: 2,
  notFound: 3,
  auth: 4,
  invalid: 5,
  conflict: 6,
  timeout: 7,
  ended: 8,
} as const
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode]

export const ExitCodeHelp = `Exit codes:
  0  ok
  1  error (network, server, anything else)
  2  usage: unknown command or flag, missing argument
  3  not found (swarm, job, backend, task, profile)
  4  auth: the key is missing, unknown (401) or lacks the role (403)
  5  invalid input: a file or request the API refused (400, 413, 415, 422)
  6  conflict with the object's current state (409)
  7  timed out waiting (--wait, --watch with --timeout)
  8  the swarm or job ended FAILED/CANCELLED (or STOPPED) while waiting`

/** An error the user can act on: shown as one line, ending the command with `exitCode`. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: ExitCode = ExitCode.error,
    readonly hint?: string,
    readonly code?: string,
  ) {
    super(message)
    this.name = "CliError"
  }
}

/** A command line that cannot be run as written (exit 2). */
export class UsageError extends CliError {
  constructor(message: string, hint?: string) {
    super(message, ExitCode.usage, hint)
    this.name = "UsageError"
  }
}

/** Exit code of an API error: by its code first (any `*.not_found` is 3), then by HTTP status. */
export function exitCodeOf(status: number, code: string): ExitCode {
  if (code.endsWith(".not_found") && code !== "route.not_found") return ExitCode.notFound
  if (status === 404 && code !== "route.not_found") return ExitCode.notFound
  if (status === 401 || status === 403) return ExitCode.auth
  if ([400, 413, 415, 422].includes(status)) return ExitCode.invalid
  if (status === 409) return ExitCode.conflict
  return ExitCode.error
}

/** Where the key came from, so an auth error can say what to check. */
export interface KeySource {
  profile?: string
  fromEnv: boolean
}

/** The next command to run after an API error, when there is an obvious one. */
export function hintFor(error: ApiError, keys: KeySource): string | undefined {
  switch (error.code) {
    case "swarm.not_found":
      return "list swarms with: swarmplane swarm list"
    case "job.not_found":
      return "list jobs with: swarmplane job list"
    case "task.not_found":
    case "attempt.not_found":
      return "see the job's tasks and attempts with: swarmplane job status JOB"
    case "backend.not_found":
      return "list backends with: swarmplane backend list"
    case "backend.none":
      return "register one with: swarmplane backend add -f backend.yaml"
    case "backend.ambiguous":
      return "name one with --backend ID, or backendId in the file (swarmplane backend list)"
    case "backend.wrong_type":
      return "name a backend of the type the file asks for with --backend ID (swarmplane backend list)"
    case "project.not_found":
      return "check the project name (swarmplane whoami shows your key's project)"
    case "auth.unauthorized":
      if (keys.fromEnv) return "check SWARMPLANE_KEY, or unset it to use the profile's key"
      if (keys.profile)
        return `check the key of profile "${keys.profile}" (swarmplane profile list), or set it with: swarmplane profile set ${keys.profile} --api URL --key KEY`
      return "set a key with: swarmplane profile set NAME --api URL --key KEY, or SWARMPLANE_KEY"
    case "auth.key_revoked":
    case "auth.key_expired":
      return "ask an admin of the project for a new key (swarmplane key create), then: swarmplane profile set NAME --api URL --key KEY"
    case "auth.forbidden":
      return "use a key with that role: an admin creates one with swarmplane key create --role ROLE"
    case "worker.role_required":
      return "give the agent a worker key: swarmplane key create --role worker --name agents"
    case "key.self_revoke":
      return "add --self to revoke the key you are using, or use another admin key"
    case "rate_limited":
      return "too many requests with this key: wait a moment and try again"
    case "idempotency.key_reused":
      return "use a new --idempotency-key for a different request"
    case "idempotency.in_progress":
      return "the first request is still running: try again in a few seconds"
    default:
      return undefined
  }
}

/** One line, whatever the message holds. */
export function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, " ").trim()
}

export function formatError(error: CliError): string {
  const code = error.code ? ` (${error.code})` : ""
  const hint = error.hint ? `; ${error.hint}` : ""
  return `swarmplane: ${oneLine(error.message)}${code}${hint}\n`
}
