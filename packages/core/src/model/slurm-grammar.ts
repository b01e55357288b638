/**
 * Slurm's own grammar for every value swarmplane puts into an `#SBATCH` line or a login-node command
 * line. One source of truth: the API validates with these (a 400 that names the field), and the Slurm
 * backend checks the same patterns again where it writes a script, whatever the value's source, so a
 * value that slipped past (an old stored item, a direct store write) is refused rather than run.
 *
 * `#SBATCH` lines are comments to bash but options to sbatch: a newline in a value ends the comment
 * and turns the rest into a shell command on the login node. Names therefore allow only what Slurm
 * itself allows in them (letters, digits, `_`, `.`, `-`), never whitespace, quotes or control characters.
 */

/** A partition, account, QOS, GRES or feature name as slurm.conf defines them. */
export const SlurmNamePattern = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$/

/** `--partition` also takes a comma-separated list (the job runs in the first that can start it). */
export const SlurmPartitionsPattern =
  /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}(,[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}){0,15}$/

/**
 * `--time`: `minutes`, `minutes:seconds`, `hours:minutes:seconds`, `days-hours`,
 * `days-hours:minutes`, `days-hours:minutes:seconds`, or `UNLIMITED`/`INFINITE`.
 */
export const SlurmTimePattern =
  /^(?:UNLIMITED|INFINITE|\d{1,7}(?::\d{1,2}){0,2}|\d{1,4}-\d{1,2}(?::\d{1,2}){0,2})$/

/**
 * A folder on the cluster (`--output` is built from it): a POSIX path of portable characters, `~/` at
 * the start for the home folder. No whitespace (sbatch splits `#SBATCH` lines on it), no `%` (sbatch's
 * own patterns), no quotes or `$`.
 */
export const SlurmPathPattern = /^(~\/?)?[A-Za-z0-9_.+@/-]{0,1000}$/

/**
 * One extra `#SBATCH` option: `--name`, `--name=value` or `-x value`, with the `#SBATCH ` prefix or
 * without; printable characters only (no newline, no NUL), so it stays one directive. The value is one
 * word, or quoted whole (`--comment="a b"`), and a value after a space does not start with `-`: sbatch
 * reads every word of the line as an option, so `--exclusive --array=0-9` would set one swarmplane owns.
 */
export const SbatchOptionPattern =
  /^(#SBATCH[ \t]+)?--?[A-Za-z][A-Za-z0-9-]*(=("[\x20\x21\x23-\x7e]*"|'[\x20-\x26\x28-\x7e]*'|[\x21-\x7e]*)| ("[\x20\x21\x23-\x7e]*"|'[\x20-\x26\x28-\x7e]*'|[\x21-\x2c\x2e-\x7e][\x21-\x7e]*))?$/

/** Options that would take the work out of swarmplane's hands: it owns retries, names and output. */
export const ReservedSbatchOptions = [
  "job-name",
  "J",
  "output",
  "o",
  "error",
  "e",
  "array",
  "a",
  "requeue",
  "no-requeue",
  "open-mode",
  "parsable",
  "wrap",
]

/** The option name of an `#SBATCH` line (`--requeue` → `requeue`, `-J x` → `J`), if it has one. */
export function sbatchOptionName(line: string): string | undefined {
  return /^(?:#SBATCH\s+)?--?([A-Za-z][A-Za-z0-9-]*)/.exec(line)?.[1]
}

/** Whether `text` is one line without control characters (a tab is allowed when `tab`). */
export function oneLine(text: string, { tab = false }: { tab?: boolean } = {}): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if ((c < 32 && !(tab && c === 9)) || c === 127) return false
  }
  return true
}

const loneSurrogate = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/

/**
 * Whether `text` reaches a program byte-exact, quoted through a shell or as an argv word: no NUL (bash
 * cannot hold it in a word, and no argv can) and no lone UTF-16 surrogate (it has no UTF-8 bytes, so
 * the program would get U+FFFD instead).
 */
export const programText = (text: string): boolean => !text.includes("\0") && !loneSurrogate.test(text)

/** A login host: a DNS name or an IPv4/IPv6 address. */
export const HostPattern =
  /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*|\[?[0-9A-Fa-f:.]+\]?)$/

/** Messages that say what the grammar is, for the API's 400 and the backend's refusal alike. */
export const SlurmGrammarText = {
  name: "a Slurm name: letters, digits, '_', '.' and '-' (no spaces, quotes or newlines), at most 64",
  partitions: "a Slurm partition name, or several joined by ',': letters, digits, '_', '.' and '-'",
  time: "a Slurm time such as `60` (minutes), `01:00:00`, `2-00:00:00` or `UNLIMITED`",
  path: "a path of letters, digits and `_ . + @ / -` (`~/` at the start for the home folder); no spaces, `%`, quotes or `$`",
  sbatchOption:
    'one sbatch option such as `--exclusive` or `--gres=gpu:2`, on one line; a value with spaces in quotes (`--comment="a b"`)',
  shellLine: "one line of shell (no newline, carriage return or NUL)",
  programText:
    "well-formed text without NUL characters (a lone surrogate or a NUL cannot reach a program as sent)",
  host: "a host name or an IP address",
} as const
