/**
 * What every command gets: the process's streams (injectable for tests), the environment, the
 * connection to the control plane (resolved lazily, so offline commands never need a profile) and the
 * API client. A command reports its exit code through `exitCode` or by throwing a `CliError`.
 */
import { createInterface } from "node:readline"
import { type Client, createClient } from "./client"
import { type Connection, type ConnectionFlags, type Env, readConfig, resolveConnection } from "./config"
import { colorEnabled, type Paint, paint } from "./output"

export interface Stream {
  write(text: string): void
  isTTY: boolean
  columns?: number
}

export interface Io {
  stdout: Stream
  stderr: Stream
  stdinIsTTY: boolean
  /** All of stdin (for `-f -` and `--key -`). */
  readStdin(): Promise<string>
  /** Ask a question on the terminal and return the answer line. */
  prompt(question: string): Promise<string>
}

export interface Ctx {
  io: Io
  env: Env
  /** Colours for stdout and for stderr. */
  out: Paint
  err: Paint
  /** The exit code the command ends with when it does not throw. */
  exitCode: number
  /** Resolve the profile / flags / environment into where and how to call. */
  connection(flags: ConnectionFlags): Promise<Connection>
  /** The API client for these flags. */
  client(flags: ConnectionFlags): Promise<Client>
  /** The connection of the last client made, for hints in error messages. */
  lastConnection?: Connection
}

export function processIo(): Io {
  const stream = (s: NodeJS.WriteStream): Stream => ({
    write: (text) => void s.write(text),
    get isTTY() {
      return s.isTTY === true
    },
    get columns() {
      return s.columns
    },
  })
  return {
    stdout: stream(process.stdout),
    stderr: stream(process.stderr),
    stdinIsTTY: process.stdin.isTTY === true,
    async readStdin() {
      const chunks: Buffer[] = []
      for await (const chunk of process.stdin) chunks.push(Buffer.from(chunk))
      return Buffer.concat(chunks).toString("utf8")
    },
    prompt(question) {
      const rl = createInterface({ input: process.stdin, output: process.stderr })
      return new Promise((resolve) => {
        rl.question(question, (answer) => {
          rl.close()
          resolve(answer)
        })
        rl.once("close", () => resolve(""))
      })
    },
  }
}

export function createContext(
  io: Io,
  env: Env,
  fetchImpl?: typeof fetch,
  sleep?: (ms: number) => Promise<void>,
): Ctx {
  const ctx: Ctx = {
    io,
    env,
    out: paint(colorEnabled(io.stdout.isTTY, env)),
    err: paint(colorEnabled(io.stderr.isTTY, env)),
    exitCode: 0,
    async connection(flags) {
      return resolveConnection(await readConfig(env), env, flags)
    },
    async client(flags) {
      const connection = await ctx.connection(flags)
      ctx.lastConnection = connection
      return createClient({
        api: connection.api,
        ...(connection.key ? { key: connection.key } : {}),
        ...(fetchImpl ? { fetch: fetchImpl } : {}),
        ...(sleep ? { sleep } : {}),
      })
    },
  }
  return ctx
}
