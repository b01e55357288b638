import { once } from "node:events"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createEchoServer, type EchoServer } from "./echo-server"
import { freePort } from "./net"
import { createRouter, type Router, RouterStatusPath } from "./router"

let a: EchoServer
let b: EchoServer
let urlA: string
let urlB: string
let router: Router
let base: string
/** An upstream that answers with what it received, to see headers and bodies arrive intact. */
let mirror: Server
let urlMirror: string

beforeAll(async () => {
  a = createEchoServer()
  b = createEchoServer()
  urlA = `http://127.0.0.1:${await a.listen(0)}`
  urlB = `http://127.0.0.1:${await b.listen(0)}`
  mirror = createServer(async (req, res) => {
    const chunks: Buffer[] = []
    for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk)
    res.writeHead(201, { "content-type": "application/json", "x-mirror": "yes" })
    res.end(
      JSON.stringify({
        method: req.method,
        url: req.url,
        headers: req.headers,
        body: Buffer.concat(chunks).toString(),
      }),
    )
  })
  mirror.listen(0, "127.0.0.1")
  await once(mirror, "listening")
  urlMirror = `http://127.0.0.1:${(mirror.address() as AddressInfo).port}`
  router = createRouter()
  base = `http://127.0.0.1:${await router.listen(0)}`
})
afterAll(async () => {
  await Promise.all([router.close(), a.close(), b.close()])
  mirror.closeAllConnections()
  mirror.close()
})

const chat = (text: string) =>
  fetch(`${base}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: text }] }),
  })

async function served(): Promise<[number, number]> {
  return [a.stats.requests, b.stats.requests]
}

describe("router", () => {
  it("answers 503 with a JSON error while it has no upstream", async () => {
    router.setUpstreams([])
    const res = await chat("anyone?")
    expect(res.status).toBe(503)
    const body = await res.json()
    expect(body.error).toMatchObject({ code: "router.no_upstream", type: "service_unavailable" })
    expect(await (await fetch(`${base}${RouterStatusPath}`)).json()).toEqual({ upstreams: [], ready: false })
  })

  it("spreads requests round-robin over its upstreams", async () => {
    router.setUpstreams([urlA, urlB])
    const [a0, b0] = await served()
    for (let i = 0; i < 6; i++) {
      const res = await chat(`hello ${i}`)
      expect(res.status).toBe(200)
      expect((await res.json()).choices[0].message.content).toBe(`echo: hello ${i}`)
    }
    const [a1, b1] = await served()
    expect([a1 - a0, b1 - b0]).toEqual([3, 3])
  })

  it("streams SSE answers through", async () => {
    router.setUpstreams([urlA])
    const res = await fetch(`${base}/v1/completions`, {
      method: "POST",
      body: JSON.stringify({ prompt: "flow through", stream: true }),
    })
    expect(res.headers.get("content-type")).toBe("text/event-stream")
    const text = await res.text()
    expect(text.trim().endsWith("data: [DONE]")).toBe(true)
  })

  it("keeps method, path, status, headers and body, and adds x-forwarded-for", async () => {
    router.setUpstreams([urlMirror])
    const res = await fetch(`${base}/some/path?q=1`, {
      method: "PUT",
      headers: { "x-custom": "kept", "x-forwarded-for": "10.9.9.9" },
      body: "payload",
    })
    expect(res.status).toBe(201)
    expect(res.headers.get("x-mirror")).toBe("yes")
    const seen = await res.json()
    expect(seen).toMatchObject({ method: "PUT", url: "/some/path?q=1", body: "payload" })
    expect(seen.headers["x-custom"]).toBe("kept")
    expect(seen.headers["x-forwarded-for"]).toBe("10.9.9.9, 127.0.0.1")
    expect(seen.headers.host).toBe(new URL(urlMirror).host)
  })

  it("retries on another upstream when a connection is refused, with the whole body", async () => {
    const refused = `http://127.0.0.1:${await freePort()}`
    router.setUpstreams([refused, urlMirror])
    for (let i = 0; i < 4; i++) {
      const res = await fetch(`${base}/echo-body`, { method: "POST", body: `body ${i}` })
      expect(res.status).toBe(201)
      expect((await res.json()).body).toBe(`body ${i}`)
    }
  })

  it("answers 502 when every upstream it tries refuses", async () => {
    const refused = `http://127.0.0.1:${await freePort()}`
    router.setUpstreams([refused])
    const res = await chat("nobody home")
    expect(res.status).toBe(502)
    expect((await res.json()).error.code).toBe("router.upstream_failed")
  })
})
