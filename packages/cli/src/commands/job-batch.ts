/**
 * The batch form of `job submit`: `--input` and its flags become the job's `batch` block, from which
 * the API builds the command every task runs (the agent's batch runner over its shard of the rows).
 * `--output DIR` is the results folder when DIR is not an output format name (`table`, `json`, `yaml`);
 * `--output-dir DIR` always is. Two flags are named apart from the runner's own, whose names the CLI
 * already uses: `--openai-api` (`--api` is the control plane URL) and `--request-retries`
 * (`--max-retries` is the task's retries after it fails).
 */
import { resolve } from "node:path"
import type { BatchSpec } from "@swarmplane/core/contract"
import { type Command, Option } from "commander"
import { isRecord } from "../client"
import { UsageError } from "../errors"
import { integer, outputOption } from "../kit"
import type { Origins } from "../normalize"
import { Formats } from "../output"

export interface BatchFlags {
  input?: string
  outputDir?: string
  inputFormat?: string
  idColumn?: string
  promptColumn?: string
  openaiApi?: string
  model?: string
  maxTokens?: number
  concurrency?: number
  checkpointEvery?: number
  shardBy?: string
  requestRetries?: number
  overwrite?: boolean
}

/**
 * Each batch flag: the option, the `BatchFlags` key commander gives it, and its `batch` field. Fresh
 * options each time, as each run builds a fresh command tree.
 */
const flags = (): [Option, keyof BatchFlags, keyof BatchSpec][] => [
  [
    new Option(
      "--input <file>",
      "rows to process: JSONL, CSV or Parquet, a path or s3://bucket/key (needs --output-dir and --swarm)",
    ),
    "input",
    "input",
  ],
  [
    new Option(
      "--output-dir <dir>",
      "folder for shard-<n>.jsonl results and checkpoints where the tasks run, or s3://bucket/prefix (also: --output DIR)",
    ),
    "outputDir",
    "output",
  ],
  [
    new Option("--input-format <format>", "format of --input (default: from its extension)").choices([
      "jsonl",
      "csv",
      "parquet",
    ]),
    "inputFormat",
    "format",
  ],
  [new Option("--id-column <name>", "column with each row's unique id (default id)"), "idColumn", "idColumn"],
  [
    new Option(
      "--prompt-column <name>",
      "column with the prompt (default prompt; chat uses a messages column as is)",
    ),
    "promptColumn",
    "promptColumn",
  ],
  [
    new Option(
      "--openai-api <api>",
      "chat calls /v1/chat/completions, completions /v1/completions (default chat)",
    ).choices(["chat", "completions"]),
    "openaiApi",
    "api",
  ],
  [
    new Option("--model <name>", "model name to send (default: the endpoint's first model)"),
    "model",
    "model",
  ],
  [
    new Option("--max-tokens <n>", "max_tokens of each request").argParser(integer(1)),
    "maxTokens",
    "maxTokens",
  ],
  [
    new Option("--concurrency <n>", "requests in flight per shard (default 8)").argParser(integer(1)),
    "concurrency",
    "concurrency",
  ],
  [
    new Option(
      "--checkpoint-every <n>",
      "rows per checkpoint part; a retried shard resumes from them (default 100)",
    ).argParser(integer(1)),
    "checkpointEvery",
    "checkpointEvery",
  ],
  [
    new Option(
      "--shard-by <how>",
      "hash of the id (stable whatever the order) or contiguous ranges (default hash)",
    ).choices(["hash", "range"]),
    "shardBy",
    "shardBy",
  ],
  [
    new Option(
      "--request-retries <n>",
      "retries of a request on 429, 5xx and timeouts, with backoff (default 8)",
    ).argParser(integer(0)),
    "requestRetries",
    "maxRetries",
  ],
  [
    new Option(
      "--overwrite",
      "start each shard over when the output holds results of another input or request (else that refuses; the same input resumes)",
    ),
    "overwrite",
    "overwrite",
  ],
]

/** Add the batch flags to `job submit`, under their own heading in its help. */
export function batchOptions(submit: Command): Command {
  submit.optionsGroup(
    "Batch inference (no command: each task runs the batch runner over its shard of --input):",
  )
  for (const [option] of flags()) submit.addOption(option)
  return submit
}

/**
 * `-o/--output` of `job submit`: an output format, or, for a batch job (with `--input`), the results
 * folder when the value is not a format name (`--output results`), as `--output-dir` would give it.
 */
export function submitOutputOption(): Option {
  return outputOption().argParser((value: string) => value)
}

/**
 * Sort `-o/--output` out: a format stays one; any other value is the batch results folder when
 * `--input` is given, and a usage error otherwise. Call before the format is read.
 */
export function splitOutput(cmd: Command, o: BatchFlags & { output?: string }): void {
  const value = o.output
  if (value === undefined || (Formats as readonly string[]).includes(value)) return
  if (o.input === undefined)
    throw new UsageError(
      `-o/--output "${value}" is not one of ${Formats.join(", ")}`,
      "choose an output format; a batch job's results folder goes with --input FILE --output DIR",
    )
  if (o.outputDir !== undefined)
    throw new UsageError(
      `--output "${value}" and --output-dir "${o.outputDir}" both name the results folder`,
      "give one of them",
    )
  o.outputDir = value
  o.output = "table"
  cmd.setOptionValue("output", "table")
}

/**
 * Put the batch flags into `body.batch` (over a job file's own `batch`). Relative paths become
 * absolute against `cwd`, as the tasks that read them run in other folders (and on the local plane,
 * on this machine); URLs such as `s3://...` stay as written. A half-given or mixed form is a usage
 * error, thrown before anything is sent. Does nothing without batch flags.
 */
export function applyBatch(
  body: Record<string, unknown>,
  origins: Origins,
  o: BatchFlags,
  cwd: string,
): void {
  const given = flags().filter(([, key]) => o[key] !== undefined)
  const first = given[0]?.[0].long
  if (!first) return
  const fromFile = isRecord(body.batch) ? body.batch : undefined
  if (o.input === undefined && !fromFile)
    throw new UsageError(
      `${first} is a batch flag and needs --input FILE`,
      `add --input FILE --output-dir DIR (the rows, and where the results go), or drop ${first}`,
    )
  if (body.command !== undefined)
    throw new UsageError(
      "a batch job (--input) takes no command: each task runs the batch runner",
      "drop the command after -- (or command in the job file), or drop --input and the batch flags",
    )
  const batch: Record<string, unknown> = { ...fromFile }
  for (const [option, key, field] of given) {
    const value = o[key]
    batch[field] = field === "input" || field === "output" ? location(String(value), cwd) : value
    origins.set(["batch", field], [option.long ?? field])
  }
  if (batch.output === undefined)
    throw new UsageError(
      "--input needs --output DIR",
      "add --output DIR (or --output-dir DIR): the folder for the shard-<n>.jsonl results, where the tasks run",
    )
  if (!body.swarm)
    throw new UsageError(
      "--input needs --swarm NAME",
      "add --swarm NAME: the swarm whose endpoint serves the rows (see swarmplane swarm list)",
    )
  body.batch = batch
}

/** A path made absolute against `cwd`; a URL (`s3://bucket/key`) as is. */
export function location(value: string, cwd: string): string {
  return /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(value) ? value : resolve(cwd, value)
}
