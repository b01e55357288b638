/** The endpoint client against real sockets: what is retried, what is final, and how a row's failure reads. */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { retryAfterMs } from "@swarmplane/core/contract/retry-after"
import { afterEach, describe, expect, it } from "vitest"
import { backoffMs, endpointBase, endpointClient, StoppedError } from "./client"

const servers: ReturnType<typeof createServer>[] = []
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections()
    await new Promise((r) => s.close(r))
  }
})

/** A server answering each request with the next of `answers` (the last one repeats). */
async function serve(answers: ((req: IncomingMessage, res: ServerResponse) => void)[]) {
  let n = 0
  const seen: { method?: string; url?: string; auth?: string; body: string }[] = []
  const server = createServer((req, res) => {
    let body = ""
    req.on("data", (c: Buffer) => (body += c.toString()))
    req.on("end", () => {
      seen.push({ method: req.method, url: req.url, auth: req.headers.authorization, body })
      const answer = answers[Math.min(n++, answers.length - 1)]
      answer?.(req, res)
    })
  })
  servers.push(server)
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen }
}

const json =
  (status: number, body: unknown, headers: Record<string, string> = {}) =>
  (_: unknown, res: ServerResponse) => {
    res.writeHead(status, { "content-type": "application/json", ...headers })
    res.end(JSON.stringify(body))
  }
const policy = { maxRetries: 2, initialMs: 1, maxMs: 2 }

describe("endpointClient", () => {
  it("retries 429 and 500, then returns the answer; sends the token and the body", async () => {
    const { url, seen } = await serve([
      json(429, { error: { message: "slow down" } }, { "retry-after": "0" }),
      json(500, { error: "boom" }),
      json(200, { ok: 1 }),
    ])
    const retries: string[] = []
    const client = endpointClient({
      endpoint: `${url}/v1/`,
      token: "t0k",
      timeoutMs: 5000,
      policy,
      onRetry: (r) => retries.push(r),
    })
    const result = await client.post("/v1/completions", { prompt: "x" })
    client.close()
    expect(result).toEqual({ ok: true, response: { ok: 1 }, attempts: 3 })
    expect(retries).toEqual(["HTTP 429: slow down", "HTTP 500: boom"])
    expect(seen.map((s) => [s.method, s.url, s.auth, s.body])).toEqual(
      Array(3).fill(["POST", "/v1/completions", "Bearer t0k", '{"prompt":"x"}']),
    )
  })

  it("a 400 is final at once, with the endpoint's message and status", async () => {
    const { url, seen } = await serve([
      json(400, { error: { message: "messages: must be a non-empty array" } }),
    ])
    const client = endpointClient({ endpoint: url, timeoutMs: 5000, policy })
    const result = await client.post("/v1/chat/completions", {})
    client.close()
    expect(result).toEqual({
      ok: false,
      error: { message: "HTTP 400: messages: must be a non-empty array", status: 400, attempts: 1 },
    })
    expect(seen).toHaveLength(1)
  })

  it("an endpoint that does not answer in time fails the row after the retries, saying so", async () => {
    const { url, seen } = await serve([() => {}])
    const client = endpointClient({ endpoint: url, timeoutMs: 100, policy: { ...policy, maxRetries: 1 } })
    const result = await client.post("/v1/completions", { prompt: "x" })
    client.close()
    expect(result).toEqual({
      ok: false,
      error: { message: "no answer within 0.1 s (after 2 tries)", attempts: 2 },
    })
    expect(seen).toHaveLength(2)
  })

  it("a stop ends a call in flight with StoppedError, not a row failure", async () => {
    const { url } = await serve([() => {}])
    const stop = new AbortController()
    const client = endpointClient({ endpoint: url, timeoutMs: 60_000, policy, signal: stop.signal })
    const call = client.post("/v1/completions", { prompt: "x" })
    setImmediate(() => stop.abort())
    await expect(call).rejects.toBeInstanceOf(StoppedError)
    client.close()
  })

  it("a 200 whose body is not JSON is retried, then reported", async () => {
    const { url } = await serve([(_, res) => res.end("<html>")])
    const client = endpointClient({ endpoint: url, timeoutMs: 5000, policy: { ...policy, maxRetries: 0 } })
    const result = await client.post("/v1/completions", {})
    client.close()
    expect(result).toMatchObject({
      ok: false,
      error: { message: "HTTP 200 with a body that is not JSON (after 1 tries)" },
    })
  })
})

describe("backoff and Retry-After", () => {
  it("doubles from initialMs up to maxMs, with equal jitter", () => {
    const p = { maxRetries: 10, initialMs: 500, maxMs: 30_000 }
    expect([1, 2, 3, 8].map((n) => backoffMs(n, p, () => 0))).toEqual([250, 500, 1000, 15_000])
    expect(backoffMs(3, p, () => 1)).toBe(2000)
  })
  it("reads seconds or an HTTP date, capped at 5 minutes", () => {
    expect(retryAfterMs("2")).toBe(2000)
    expect(retryAfterMs(new Date(10_000).toUTCString(), 4_000)).toBe(6000)
    expect(retryAfterMs("86400")).toBe(300_000)
    expect(retryAfterMs("soon")).toBeUndefined()
    expect(retryAfterMs(null)).toBeUndefined()
  })
  it("an endpoint given with /v1 or a trailing slash means the same base", () => {
    expect(endpointBase("http://h:8000/v1/")).toBe("http://h:8000")
    expect(endpointBase("http://h:8000")).toBe("http://h:8000")
  })
})
