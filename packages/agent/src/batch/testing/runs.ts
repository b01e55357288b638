/**
 * Helpers of the runner's tests: a real echo server on loopback (closed by `closeEchoServers`), an
 * input file of fixture rows, a config, and the lines of a result file.
 */
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createEchoServer } from "../../echo-server"
import type { BatchConfig } from "../runner"
import { type FixtureRow, fixtureRows, toJsonl } from "./fixtures"

const servers: ReturnType<typeof createEchoServer>[] = []

/** An echo server on a free port of 127.0.0.1. */
export async function echo(options: Parameters<typeof createEchoServer>[0] = {}) {
  const server = createEchoServer(options)
  servers.push(server)
  const port = await server.listen(0)
  return { server, endpoint: `http://127.0.0.1:${port}` }
}

/** Close every server `echo` started (in `afterEach`). */
export async function closeEchoServers(): Promise<void> {
  await Promise.all(servers.splice(0).map((s) => s.close()))
}

/** A JSONL file of `n` fixture rows. */
export function input(n: number): { file: string; rows: FixtureRow[] } {
  const dir = mkdtempSync(join(tmpdir(), "swarmplane-runner-in-"))
  const rows = fixtureRows(n)
  const file = join(dir, "in.jsonl")
  writeFileSync(file, toJsonl(rows))
  return { file, rows }
}

/** A config for one shard of `file`, into a fresh local folder unless `extra.output` says otherwise. */
export function config(file: string, endpoint: string, extra: Partial<BatchConfig> = {}): BatchConfig {
  return {
    input: file,
    format: "jsonl",
    output: mkdtempSync(join(tmpdir(), "swarmplane-runner-out-")),
    idColumn: "id",
    promptColumn: "prompt",
    shardBy: "hash",
    shardId: 0,
    nshards: 1,
    endpoint,
    api: "chat",
    concurrency: 8,
    requestTimeoutS: 30,
    retry: { maxRetries: 8, initialMs: 1, maxMs: 5 },
    checkpointEvery: 25,
    ...extra,
  }
}

/** One line of a part or of the merged output. */
export interface Line {
  id: string
  request: { messages: { content: string }[] } | { prompt: string } | null
  response: { choices: ({ message: { content: string } } | { text: string })[] } | null
  usage: { total_tokens: number } | null
  error: { message: string; status?: number; attempts: number } | null
}

export const parseLines = (text: string): Line[] =>
  text
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Line)

export const lines = (file: string): Line[] => parseLines(readFileSync(file, "utf8"))

/** The answer's text: the chat message's content, or the completion's text. */
export const replyOf = (line: Line) => {
  const choice = line.response?.choices[0]
  return choice && "message" in choice ? choice.message.content : choice?.text
}
