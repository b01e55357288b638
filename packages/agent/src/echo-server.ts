/**
 * A tiny OpenAI-compatible model server that echoes its input: the stand-in replica for tests, local
 * runs and smoke checks of a swarm (health, model listing, chat and text completions, streaming).
 * For tests of clients: `failRate` answers a fraction of completion requests with 429 or 500, and
 * `GET /requests` lists the prompts answered successfully, in order (to count work done twice).
 */
import { randomBytes } from "node:crypto"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"

export const EchoModel = "echo"
const maxBodyBytes = 4 * 1024 * 1024
/** The request log keeps the newest prompts only, so a long-lived server does not grow without end. */
const maxLoggedPrompts = 1_000_000

export interface EchoOptions {
  /** Fraction (0..1) of completion requests answered 429 or 500 (half each), at random. Default 0. */
  failRate?: number
  /** Seed of that randomness (the same seed gives the same sequence of failures). Default: random. */
  seed?: number
  /** A service time: each `/v1/` request waits this long before it is answered. Default 0. */
  delayMs?: number
}

export interface EchoServer {
  readonly server: Server
  /** Requests to `/v1/*` served so far (health checks are not counted, so tests can compare). */
  readonly stats: { requests: number }
  /** Prompts answered successfully, in order: a chat's last user message, or a completion's prompt. */
  readonly requests: string[]
  listen(port?: number, host?: string): Promise<number>
  close(): Promise<void>
}

class RequestError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly param: string | null = null,
    readonly type = "invalid_request_error",
  ) {
    super(message)
  }
}

export function createEchoServer(options: EchoOptions = {}): EchoServer {
  const stats = { requests: 0 }
  const state: State = {
    stats,
    requests: [],
    failRate: options.failRate ?? 0,
    random: mulberry32(options.seed ?? Math.floor(Math.random() * 2 ** 32)),
  }
  const delayMs = options.delayMs ?? 0
  const server = createServer((req, res) => {
    const wait =
      delayMs > 0 && req.url?.startsWith("/v1/")
        ? new Promise<void>((resolve) => setTimeout(resolve, delayMs))
        : Promise.resolve()
    wait
      .then(() => handle(req, res, state))
      .catch((error: unknown) => {
        const e =
          error instanceof RequestError ? error : new RequestError(500, String(error), null, "server_error")
        if (res.headersSent) res.destroy()
        else
          sendJson(res, e.status, { error: { message: e.message, type: e.type, param: e.param, code: null } })
      })
  })
  return {
    server,
    stats,
    requests: state.requests,
    listen: (port = 0, host = "127.0.0.1") =>
      new Promise((resolve, reject) => {
        server.once("error", reject)
        server.listen(port, host, () => resolve((server.address() as AddressInfo).port))
      }),
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}

interface State {
  stats: { requests: number }
  requests: string[]
  failRate: number
  random: () => number
}

async function handle(req: IncomingMessage, res: ServerResponse, state: State) {
  const path = new URL(req.url ?? "/", "http://localhost").pathname
  const route = `${req.method} ${path}`
  if (path.startsWith("/v1/")) state.stats.requests++
  switch (route) {
    case "GET /health":
      return sendJson(res, 200, { status: "ok" })
    case "GET /stats":
      return sendJson(res, 200, { requests: state.stats.requests })
    case "GET /requests":
      return sendJson(res, 200, state.requests)
    case "GET /v1/models":
      return sendJson(res, 200, {
        object: "list",
        data: [{ id: EchoModel, object: "model", created: 0, owned_by: "swarmplane" }],
      })
    case "POST /v1/chat/completions": {
      const body = await readJson(req)
      if (!injectFailure(res, state)) log(state, chat(res, body))
      return
    }
    case "POST /v1/completions": {
      const body = await readJson(req)
      if (!injectFailure(res, state)) log(state, completion(res, body))
      return
    }
    default:
      throw new RequestError(404, `no route ${route}`, null, "not_found_error")
  }
}

/** With probability `failRate`, answer 429 (with `Retry-After: 0`) or 500 instead; true if it did. */
function injectFailure(res: ServerResponse, state: State): boolean {
  if (state.failRate <= 0 || state.random() >= state.failRate) return false
  if (state.random() < 0.5) {
    const body = {
      error: { message: "injected: too many requests", type: "rate_limit_error", param: null, code: null },
    }
    sendJson(res, 429, body, { "retry-after": "0" })
  } else {
    const body = {
      error: { message: "injected: internal error", type: "server_error", param: null, code: null },
    }
    sendJson(res, 500, body)
  }
  return true
}

function log(state: State, prompts: string[]): void {
  state.requests.push(...prompts)
  if (state.requests.length > maxLoggedPrompts) state.requests.splice(0, maxLoggedPrompts / 10)
}

/** A small seedable PRNG (mulberry32): uniform in [0, 1). */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

type Body = Record<string, unknown>

/** Answers a chat completion; returns the prompt it answered (the last user message). */
function chat(res: ServerResponse, body: Body): string[] {
  const messages = body.messages
  if (!Array.isArray(messages) || messages.length === 0)
    throw new RequestError(400, "messages: must be a non-empty array of chat messages", "messages")
  const texts = messages.map((m: unknown) => contentText(isObject(m) ? m.content : undefined))
  const lastUser = messages.findLastIndex((m: unknown) => isObject(m) && m.role === "user")
  const prompt = texts[lastUser >= 0 ? lastUser : texts.length - 1] ?? ""
  const reply = limitWords(`echo: ${prompt}`, body.max_tokens)
  const meta = { id: `chatcmpl-${randomBytes(12).toString("hex")}`, created: now(), model: modelOf(body) }
  const usage = countUsage(texts.join(" "), reply.text)
  if (body.stream !== true) {
    const message = { role: "assistant", content: reply.text }
    const choices = [{ index: 0, message, logprobs: null, finish_reason: reply.finish }]
    sendJson(res, 200, { ...meta, object: "chat.completion", choices, usage })
    return [prompt]
  }
  const chunk = (delta: Body, finish: string | null) => ({
    ...meta,
    object: "chat.completion.chunk",
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
  })
  sendEvents(res, [
    chunk({ role: "assistant", content: "" }, null),
    ...pieces(reply.text).map((piece) => chunk({ content: piece }, null)),
    chunk({}, reply.finish),
    ...(wantsUsage(body) ? [{ ...meta, object: "chat.completion.chunk", choices: [], usage }] : []),
  ])
  return [prompt]
}

/** Answers a text completion; returns the prompts it answered. */
function completion(res: ServerResponse, body: Body): string[] {
  const prompts = typeof body.prompt === "string" ? [body.prompt] : body.prompt
  if (!Array.isArray(prompts) || prompts.length === 0 || !prompts.every((p) => typeof p === "string"))
    throw new RequestError(400, "prompt: must be a string or a non-empty array of strings", "prompt")
  const replies = prompts.map((p: string) => limitWords(`echo: ${p}`, body.max_tokens))
  const meta = { id: `cmpl-${randomBytes(12).toString("hex")}`, created: now(), model: modelOf(body) }
  const usage = countUsage(prompts.join(" "), replies.map((r) => r.text).join(" "))
  if (body.stream !== true) {
    const choices = replies.map((r, index) => ({
      index,
      text: r.text,
      logprobs: null,
      finish_reason: r.finish,
    }))
    sendJson(res, 200, { ...meta, object: "text_completion", choices, usage })
    return prompts
  }
  const chunk = (index: number, text: string, finish: string | null) => ({
    ...meta,
    object: "text_completion",
    choices: [{ index, text, logprobs: null, finish_reason: finish }],
  })
  sendEvents(res, [
    ...replies.flatMap((r, index) => [
      ...pieces(r.text).map((piece) => chunk(index, piece, null)),
      chunk(index, "", r.finish),
    ]),
    ...(wantsUsage(body) ? [{ ...meta, object: "text_completion", choices: [], usage }] : []),
  ])
  return prompts
}

/** Text of a chat message content: a string, or the text parts of a multi-part content array. */
function contentText(content: unknown): string {
  if (typeof content === "string") return content
  if (!Array.isArray(content)) return ""
  return content
    .map((part: unknown) => (isObject(part) && typeof part.text === "string" ? part.text : ""))
    .filter(Boolean)
    .join(" ")
}

/** Honour `max_tokens` (counted in words, like the usage) so clients can test truncation. */
function limitWords(text: string, maxTokens: unknown): { text: string; finish: "stop" | "length" } {
  if (typeof maxTokens !== "number" || maxTokens <= 0) return { text, finish: "stop" }
  const words = text.split(/\s+/).filter(Boolean)
  if (words.length <= maxTokens) return { text, finish: "stop" }
  return { text: words.slice(0, maxTokens).join(" "), finish: "length" }
}

/** Word pieces of a text, each keeping its leading space, so the concatenation is the text again. */
function pieces(text: string): string[] {
  return text.match(/\s*\S+/g) ?? []
}

export function countWords(text: string): number {
  return text.split(/\s+/).filter(Boolean).length
}

function countUsage(prompt: string, reply: string) {
  const prompt_tokens = countWords(prompt)
  const completion_tokens = countWords(reply)
  return { prompt_tokens, completion_tokens, total_tokens: prompt_tokens + completion_tokens }
}

function wantsUsage(body: Body): boolean {
  return isObject(body.stream_options) && body.stream_options.include_usage === true
}

function modelOf(body: Body): string {
  return typeof body.model === "string" && body.model ? body.model : EchoModel
}

function now(): number {
  return Math.floor(Date.now() / 1000)
}

function isObject(value: unknown): value is Body {
  return typeof value === "object" && value !== null && !Array.isArray(value)
}

async function readJson(req: IncomingMessage): Promise<Body> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length
    if (size > maxBodyBytes) throw new RequestError(413, `request body is larger than ${maxBodyBytes} bytes`)
    chunks.push(chunk)
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(Buffer.concat(chunks).toString("utf8"))
  } catch (error) {
    throw new RequestError(400, `the body is not valid JSON: ${(error as Error).message}`)
  }
  if (!isObject(parsed)) throw new RequestError(400, "the body must be a JSON object")
  return parsed
}

function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body)
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
    ...headers,
  })
  res.end(text)
}

/** Server-sent events in OpenAI's framing: one `data:` line per chunk, then `data: [DONE]`. */
function sendEvents(res: ServerResponse, chunks: unknown[]): void {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
  for (const chunk of chunks) res.write(`data: ${JSON.stringify(chunk)}\n\n`)
  res.end("data: [DONE]\n\n")
}
