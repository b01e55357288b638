import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createEchoServer, type EchoServer } from "./echo-server"

let echo: EchoServer
let base: string

beforeAll(async () => {
  echo = createEchoServer()
  base = `http://127.0.0.1:${await echo.listen(0)}`
})
afterAll(() => echo.close())

const post = (path: string, body: unknown) =>
  fetch(`${base}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  })

/** The JSON payloads of an SSE body, and whether it ended with `data: [DONE]`. */
function events(text: string): { chunks: Record<string, unknown>[]; done: boolean } {
  const data = text
    .split("\n\n")
    .filter(Boolean)
    .map((event) => event.replace(/^data: /, ""))
  return {
    chunks: data.filter((d) => d !== "[DONE]").map((d) => JSON.parse(d) as Record<string, unknown>),
    done: data.at(-1) === "[DONE]",
  }
}

describe("echo server", () => {
  it("answers health and the model list", async () => {
    const health = await fetch(`${base}/health`)
    expect(health.status).toBe(200)
    expect(await health.json()).toEqual({ status: "ok" })
    const models = await (await fetch(`${base}/v1/models`)).json()
    expect(models).toMatchObject({
      object: "list",
      data: [{ id: "echo", object: "model", owned_by: "swarmplane" }],
    })
  })

  it("echoes the last user message as a chat completion with word counts", async () => {
    const res = await post("/v1/chat/completions", {
      model: "my-model",
      messages: [
        { role: "system", content: "be brief" },
        { role: "user", content: "first question" },
        { role: "assistant", content: "an answer" },
        { role: "user", content: [{ type: "text", text: "hello there world" }] },
      ],
    })
    expect(res.status).toBe(200)
    const body = await res.json()
    expect(body).toMatchObject({
      object: "chat.completion",
      model: "my-model",
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: "echo: hello there world" },
          finish_reason: "stop",
        },
      ],
      usage: { prompt_tokens: 9, completion_tokens: 4, total_tokens: 13 },
    })
    expect(body.id).toMatch(/^chatcmpl-/)
    expect(typeof body.created).toBe("number")
  })

  it("streams a chat completion as SSE chunks ending with [DONE]", async () => {
    const res = await post("/v1/chat/completions", {
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: "user", content: "stream me" }],
    })
    expect(res.headers.get("content-type")).toBe("text/event-stream")
    const { chunks, done } = events(await res.text())
    expect(done).toBe(true)
    type Chunk = { choices: { delta: { content?: string }; finish_reason: string | null }[]; usage?: unknown }
    const typed = chunks as unknown as Chunk[]
    expect(typed.map((c) => c.choices[0]?.delta.content ?? "").join("")).toBe("echo: stream me")
    expect(typed.at(-2)?.choices[0]?.finish_reason).toBe("stop")
    expect(typed.at(-1)?.usage).toEqual({ prompt_tokens: 2, completion_tokens: 3, total_tokens: 5 })
    expect(chunks.every((c) => c.object === "chat.completion.chunk")).toBe(true)
  })

  it("completes a prompt, streamed or not, and honours max_tokens", async () => {
    const plain = await (await post("/v1/completions", { prompt: "one two three" })).json()
    expect(plain).toMatchObject({
      object: "text_completion",
      choices: [{ index: 0, text: "echo: one two three", finish_reason: "stop" }],
      usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 },
    })
    const cut = await (await post("/v1/completions", { prompt: "one two three", max_tokens: 2 })).json()
    expect(cut.choices[0]).toMatchObject({ text: "echo: one", finish_reason: "length" })
    const { chunks, done } = events(
      await (await post("/v1/completions", { prompt: "a b", stream: true })).text(),
    )
    expect(done).toBe(true)
    const texts = chunks.map((c) => (c.choices as { text: string }[])[0]?.text ?? "")
    expect(texts.join("")).toBe("echo: a b")
  })

  const bad: Record<string, { path: string; body: string; status: number; param: string | null }> = {
    "invalid JSON": { path: "/v1/chat/completions", body: "{not json", status: 400, param: null },
    "a JSON array": { path: "/v1/chat/completions", body: "[]", status: 400, param: null },
    "no messages": { path: "/v1/chat/completions", body: "{}", status: 400, param: "messages" },
    "no prompt": { path: "/v1/completions", body: '{"prompt":3}', status: 400, param: "prompt" },
    "an unknown route": { path: "/v1/embeddings", body: "{}", status: 404, param: null },
  }
  for (const [name, tc] of Object.entries(bad))
    it(`answers ${name} with an OpenAI-style error`, async () => {
      const res = await post(tc.path, tc.body)
      expect(res.status).toBe(tc.status)
      const body = await res.json()
      expect(body.error).toMatchObject({ param: tc.param, code: null })
      expect(typeof body.error.message).toBe("string")
      expect(typeof body.error.type).toBe("string")
    })

  it("counts the /v1 requests it served, not health checks", async () => {
    const before = (await (await fetch(`${base}/stats`)).json()).requests
    await fetch(`${base}/health`)
    await fetch(`${base}/v1/models`)
    await post("/v1/completions", { prompt: "x" })
    expect((await (await fetch(`${base}/stats`)).json()).requests).toBe(before + 2)
  })
})
