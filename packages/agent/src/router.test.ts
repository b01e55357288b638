import { spawn } from "node:child_process"
import { once } from "node:events"
import { createServer, type Server } from "node:http"
import { type AddressInfo, connect } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createEchoServer, type EchoServer } from "./echo-server"
import { freePort } from "./net"
import { createRouter, type Router, RouterMetricsPath, RouterStatusPath } from "./router"
import { DurationBuckets } from "./router-metrics"

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
    expect(await (await fetch(`${base}${RouterStatusPath}`)).json()).toEqual({
      upstreams: [],
      ready: false,
      coolingDown: [],
    })
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

  it("sends a request again to another replica when the first dies before answering (requeued mid-request)", async () => {
    // A replica that reads the whole request, then goes away without a word.
    const dying = createServer((req) => req.on("end", () => req.socket.destroy()).resume())
    await new Promise<void>((resolve) => dying.listen(0, "127.0.0.1", resolve))
    const dead = `http://127.0.0.1:${(dying.address() as AddressInfo).port}`
    try {
      router.setUpstreams([dead, urlMirror])
      for (let i = 0; i < 4; i++) {
        const res = await fetch(`${base}/echo-body`, { method: "POST", body: `body ${i}` })
        expect(res.status).toBe(201)
        expect((await res.json()).body).toBe(`body ${i}`)
      }
    } finally {
      dying.close()
    }
  })

  it("answers 502 when every upstream it tries refuses", async () => {
    const refused = `http://127.0.0.1:${await freePort()}`
    router.setUpstreams([refused])
    const res = await chat("nobody home")
    expect(res.status).toBe(502)
    expect((await res.json()).error.code).toBe("router.upstream_failed")
  })

  it("moves on when an upstream does not connect in time, and leaves it out until the cooldown ends", async () => {
    const hole = await blackhole()
    let clock = 1_000
    const r = createRouter([hole.url, urlA], { connectTimeoutMs: 150, cooldownMs: 10_000, now: () => clock })
    const url = `http://127.0.0.1:${await r.listen(0)}`
    try {
      const before = a.stats.requests
      const status = async () => (await fetch(`${url}${RouterStatusPath}`)).json()
      // The first request starts at the silent upstream (round-robin from the first), then goes to A.
      const first = await fetch(`${url}/v1/models`)
      expect(first.status).toBe(200)
      expect((await status()).coolingDown).toEqual([hole.url])
      for (let i = 0; i < 3; i++) expect((await fetch(`${url}/v1/models`)).status).toBe(200)
      expect(a.stats.requests - before).toBe(4)
      clock += 10_001
      expect((await status()).coolingDown).toEqual([])
    } finally {
      await r.close()
      hole.close()
    }
  })

  it("a refused upstream cools down too: the others take its share, and alone it is still tried", async () => {
    const refused = `http://127.0.0.1:${await freePort()}`
    const clock = 1_000
    const r = createRouter([refused], { cooldownMs: 10_000, now: () => clock })
    const url = `http://127.0.0.1:${await r.listen(0)}`
    try {
      expect((await fetch(`${url}/x`)).status).toBe(502)
      expect((await (await fetch(`${url}${RouterStatusPath}`)).json()).coolingDown).toEqual([refused])
      const again = await fetch(`${url}/x`)
      expect((await again.json()).error.code).toBe("router.upstream_failed")
      // Still tried (the only one), so a replica back on its feet is used at once.
      r.setUpstreams([refused, urlB])
      const before = b.stats.requests
      expect((await fetch(`${url}/v1/models`)).status).toBe(200)
      expect(b.stats.requests - before).toBe(1)
    } finally {
      await r.close()
    }
  })
})

/** A replica that holds every answer until the test lets it go (`held`, one release per request). */
async function heldReplica() {
  const held: (() => void)[] = []
  const gate = createServer((req, res) => {
    req.resume()
    held.push(() => res.end("slow"))
  })
  await new Promise<void>((resolve) => gate.listen(0, "127.0.0.1", resolve))
  return { held, gate, slow: `http://127.0.0.1:${(gate.address() as AddressInfo).port}` }
}

describe("load-aware routing and metrics", () => {
  it("sends requests to the replica with the fewest in flight: a busy one is passed over until it answers", async () => {
    const { held, gate, slow } = await heldReplica()
    const r = createRouter([slow, urlA])
    const url = `http://127.0.0.1:${await r.listen(0)}`
    try {
      // Ties go in turn: two requests at once take one replica each, the held one stays busy.
      const first = fetch(`${url}/v1/models`)
      const second = fetch(`${url}/v1/models`)
      await until(() => held.length === 1)
      const before = a.stats.requests
      for (let i = 0; i < 5; i++) expect((await fetch(`${url}/v1/models`)).status).toBe(200)
      expect(a.stats.requests - before, "all five went to the idle replica").toBe(5)
      expect(r.metrics.inFlight(new URL(slow).origin)).toBe(1)
      for (const release of held) release()
      expect(await (await first).text()).toBeTruthy()
      expect(await (await second).text()).toBeTruthy()
      expect(r.metrics.inFlight(new URL(slow).origin)).toBe(0)
    } finally {
      await r.close()
      gate.closeAllConnections()
      gate.close()
    }
  })

  it("round robin (the benchmark's baseline) takes replicas in turn, busy or not", async () => {
    const { held, gate, slow } = await heldReplica()
    const r = createRouter([slow, urlA], { balance: "round-robin" })
    const url = `http://127.0.0.1:${await r.listen(0)}`
    try {
      const answers = Array.from({ length: 4 }, () => fetch(`${url}/v1/models`))
      // Half went to the held replica though it answered none of them yet.
      await until(() => held.length === 2)
      for (const release of held) release()
      for (const answer of answers) expect((await answer).status).toBe(200)
    } finally {
      await r.close()
      gate.closeAllConnections()
      gate.close()
    }
  })

  it("measures each replica: answers by class, completion tokens (reported or counted), latency, in Prometheus text", async () => {
    const r = createRouter([urlB])
    const url = `http://127.0.0.1:${await r.listen(0)}`
    try {
      const post = (path: string, body: unknown) =>
        fetch(`${url}${path}`, { method: "POST", body: JSON.stringify(body) }).then((res) => res.text())
      // JSON: its usage (echo: + 3 words = 4); a stream without usage: its chunks with text (4); a stream
      // with usage: the usage (4, its text chunks not counted again).
      await post("/v1/chat/completions", { messages: [{ role: "user", content: "one two three" }] })
      await post("/v1/chat/completions", {
        stream: true,
        messages: [{ role: "user", content: "one two three" }],
      })
      await post("/v1/completions", {
        prompt: "one two three",
        stream: true,
        stream_options: { include_usage: true },
      })
      expect((await fetch(`${url}/v1/nothing-here`)).status).toBe(404)
      const [replica] = r.metrics.snapshot()
      expect(replica).toMatchObject({
        upstream: new URL(urlB).origin,
        inFlight: 0,
        answers: { "2xx": 3, "4xx": 1 },
        failures: 0,
        tokens: 12,
        requests: 4,
      })
      expect(replica!.firstByteP50).toBeGreaterThan(0)
      // What the control plane gets of it: the same, as counters.
      const [reported] = r.metrics.totals().replicas
      expect(reported).toMatchObject({
        url: new URL(urlB).origin,
        inFlight: 0,
        requests: 4,
        failures: 0,
        answers5xx: 0,
        tokens: 12,
      })
      expect(reported!.firstByteBuckets.reduce((x, y) => x + y, 0)).toBe(4)
      expect(reported!.busySeconds).toBeGreaterThan(0)
      const text = await (await fetch(`${url}${RouterMetricsPath}`)).text()
      const label = `upstream="${new URL(urlB).origin}"`
      expect(text).toContain(`swarmplane_router_answers_total{${label},code="2xx"} 3`)
      expect(text).toContain(`swarmplane_router_completion_tokens_total{${label}} 12`)
      expect(text).toContain(`swarmplane_router_in_flight{${label}} 0`)
      expect(text).toContain(`swarmplane_router_request_duration_seconds_bucket{${label},le="+Inf"} 4`)
      expect(text).toContain(`swarmplane_router_first_byte_seconds_count{${label}} 4`)
      expect(text).toMatch(/^# TYPE swarmplane_router_request_duration_seconds histogram$/m)
    } finally {
      await r.close()
    }
  })

  it("reports each replica routed to from the start, counts one that could not be reached as a failure, and forgets replicas no longer routed to", async () => {
    const refused = `http://127.0.0.1:${await freePort()}`
    const r = createRouter([refused, urlA])
    const url = `http://127.0.0.1:${await r.listen(0)}`
    try {
      // Routed to but not asked yet: each replica is reported, at zero.
      expect(r.metrics.totals().replicas.map((m) => [m.url, m.requests])).toEqual([
        [new URL(refused).origin, 0],
        [new URL(urlA).origin, 0],
      ])
      for (let i = 0; i < 2; i++) expect((await fetch(`${url}/v1/models`)).status).toBe(200)
      const failures = Object.fromEntries(r.metrics.snapshot().map((m) => [m.upstream, m.failures]))
      expect(failures[new URL(refused).origin]).toBe(1)
      r.setUpstreams([urlA])
      expect(r.metrics.snapshot().map((m) => m.upstream)).toEqual([new URL(urlA).origin])
    } finally {
      await r.close()
    }
  })
})

/**
 * An upstream that never completes a connection, as a machine that is gone: a listener whose
 * accept queue is full (backlog 0, never accepting), so the kernel drops further SYNs.
 */
async function blackhole(): Promise<{ url: string; close(): void }> {
  const script =
    "import socket,time; s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen(0); print(s.getsockname()[1], flush=True); time.sleep(600)"
  const child = spawn("python3", ["-c", script], { stdio: ["ignore", "pipe", "inherit"] })
  const port = await new Promise<number>((resolve) =>
    child.stdout.once("data", (d) => resolve(Number(String(d).trim()))),
  )
  const fill = [0, 1, 2].map(() => connect(port, "127.0.0.1").on("error", () => {}))
  await until(() => fill.filter((s) => !s.connecting).length >= 1)
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => {
      for (const s of fill) s.destroy()
      child.kill()
    },
  }
}

const RouterBucketIndex = (s: number) => DurationBuckets.indexOf(s)

async function until(done: () => boolean): Promise<void> {
  while (!done()) await new Promise((r) => setImmediate(r))
}

describe("a swarm scaled to zero: requests held while a replica wakes", () => {
  it("holds a request with no upstream, says it waits, and answers it once a replica comes", async () => {
    let told = 0
    let clock = 0
    const r = createRouter([], { onWaiting: () => told++, now: () => clock })
    r.setHold(10_000)
    const url = `http://127.0.0.1:${await r.listen(0)}`
    try {
      const answer = fetch(`${url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ messages: [{ role: "user", content: "wake up" }] }),
      })
      for (let i = 0; i < 100 && r.waiting() === 0; i++) await new Promise((ok) => setImmediate(ok))
      expect(r.waiting()).toBe(1)
      expect(told).toBe(1)
      expect(r.metrics.totals(r.waiting()).waiting).toBe(1)
      clock = 3000
      r.setUpstreams([urlA])
      const res = await answer
      expect(res.status).toBe(200)
      expect(JSON.stringify(await res.json())).toContain("wake up")
      expect(r.waiting()).toBe(0)
      // It waited 3 s in the router: the queue-wait histogram has it in its 5 s bucket.
      const wait = r.metrics.totals().queueWaitBuckets
      expect(wait[RouterBucketIndex(5)]).toBe(1)
      expect(wait.reduce((x, y) => x + y, 0)).toBe(1)
      expect(await (await fetch(`${url}${RouterMetricsPath}`)).text()).toContain(
        'swarmplane_router_queue_wait_seconds_bucket{le="5"} 1',
      )
    } finally {
      await r.close()
    }
  })

  it("answers 503 with Retry-After when no replica came within the hold", async () => {
    const r = createRouter()
    r.setHold(200)
    const url = `http://127.0.0.1:${await r.listen(0)}`
    try {
      const held = await fetch(`${url}/v1/models`)
      expect(held.status).toBe(503)
      expect(held.headers.get("retry-after")).toBe("1")
      expect((await held.json()).error).toMatchObject({ code: "router.waking" })
      expect(r.waiting()).toBe(0)
    } finally {
      await r.close()
    }
  })

  it("without a hold, no upstream is a 503 at once, as before", async () => {
    const r = createRouter()
    const url = `http://127.0.0.1:${await r.listen(0)}`
    try {
      const res = await fetch(`${url}/v1/models`)
      expect(res.status).toBe(503)
      expect((await res.json()).error).toMatchObject({ code: "router.no_upstream" })
    } finally {
      await r.close()
    }
  })
})
