/**
 * What the swarm router costs a request: 300 sequential chat completions (after a warm-up) and 300
 * streamed ones, each timed to its last byte by a client with kept-alive connections, sent straight to
 * an echo replica (the baseline, in the same process) and through a router in front of two replicas.
 * The router's target is a p50 within 1 ms of the direct call.
 *
 * Then balance: two replicas of unequal speed (one answers after 5 ms, the other after 40 ms), 16
 * clients each sending requests back to back for a fixed time, through a router that picks the replica
 * with the fewest requests in flight and through one that takes them in turn (the baseline, the same
 * router with `balance: "round-robin"`): the share each replica answered, requests per second, p50/p99.
 */
import { Agent, request } from "node:http"
import { createEchoServer } from "../packages/agent/src/echo-server"
import { createRouter } from "../packages/agent/src/router"
import { record, table } from "./util"

const Requests = 300
const Warmup = 50

const agent = new Agent({ keepAlive: true, maxSockets: 1 })

/** The balance run: clients at once, and how long they send. */
const Clients = 16
const BalanceSeconds = 5
const ReplicaDelaysMs = [5, 40]

/** One POST, timed to the answer's last byte, in ms. */
function timed(base: string, path: string, body: string): Promise<number> {
  const started = performance.now()
  return new Promise((resolve, reject) => {
    const req = request(
      `${base}${path}`,
      {
        method: "POST",
        agent,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
      },
      (res) => {
        res.resume()
        res.once("end", () => resolve(performance.now() - started))
      },
    )
    req.once("error", reject)
    req.end(body)
  })
}

const percentile = (xs: number[], p: number) => {
  const sorted = xs.slice().sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)]!
}

export async function main(): Promise<void> {
  const replicas = [createEchoServer(), createEchoServer()]
  const urls = await Promise.all(replicas.map(async (r) => `http://127.0.0.1:${await r.listen(0)}`))
  const router = createRouter(urls)
  const routed = `http://127.0.0.1:${await router.listen(0)}`
  const kinds = {
    chat: JSON.stringify({ messages: [{ role: "user", content: "how long does the router take?" }] }),
    streamed: JSON.stringify({
      stream: true,
      messages: [{ role: "user", content: "how long does the router take?" }],
    }),
  }
  const rows: string[][] = []
  try {
    for (const [kind, body] of Object.entries(kinds)) {
      const figures: Record<string, { p50: number; p99: number }> = {}
      for (const [path, base] of [
        ["direct", urls[0]!],
        ["router", routed],
      ] as const) {
        for (let i = 0; i < Warmup; i++) await timed(base, "/v1/chat/completions", body)
        const ms: number[] = []
        for (let i = 0; i < Requests; i++) ms.push(await timed(base, "/v1/chat/completions", body))
        figures[path] = { p50: percentile(ms, 0.5), p99: percentile(ms, 0.99) }
      }
      const d = figures.direct!
      const r = figures.router!
      rows.push(
        [kind, "direct to a replica (baseline)", d.p50.toFixed(2), d.p99.toFixed(2), "1.00", "-"],
        [
          kind,
          "through the router (2 replicas)",
          r.p50.toFixed(2),
          r.p99.toFixed(2),
          (r.p50 / d.p50).toFixed(2),
          (r.p50 - d.p50).toFixed(2),
        ],
      )
      record({ [`router_${kind}`]: { direct: d, router: r, addedP50Ms: r.p50 - d.p50 } })
    }
  } finally {
    agent.destroy()
    await router.close()
    await Promise.all(replicas.map((r) => r.close()))
  }
  console.log(`\nRouter overhead: ${Requests} sequential requests each, kept-alive client, loopback\n`)
  console.log(table(["request", "path", "p50 ms", "p99 ms", "× direct (p50)", "added p50 ms"], rows))
  await balance()
}

/** Replicas of unequal speed behind each kind of router, under the same closed-loop load. */
async function balance(): Promise<void> {
  const body = JSON.stringify({ messages: [{ role: "user", content: "which replica answers?" }] })
  const rows: string[][] = []
  const results: Record<string, { perSecond: number; p50: number; p99: number; shares: number[] }> = {}
  for (const kind of ["round-robin", "least-outstanding"] as const) {
    const replicas = ReplicaDelaysMs.map((delayMs) => createEchoServer({ delayMs }))
    const urls = await Promise.all(replicas.map(async (r) => `http://127.0.0.1:${await r.listen(0)}`))
    const router = createRouter(urls, { balance: kind })
    const base = `http://127.0.0.1:${await router.listen(0)}`
    const clients = new Agent({ keepAlive: true, maxSockets: Clients })
    const ms: number[] = []
    try {
      const until = performance.now() + BalanceSeconds * 1000
      await Promise.all(
        Array.from({ length: Clients }, async () => {
          while (performance.now() < until) {
            const started = performance.now()
            await new Promise<void>((resolve, reject) => {
              const req = request(
                `${base}/v1/chat/completions`,
                {
                  method: "POST",
                  agent: clients,
                  headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
                },
                (res) => {
                  res.resume()
                  res.once("end", () => resolve())
                },
              )
              req.once("error", reject)
              req.end(body)
            })
            ms.push(performance.now() - started)
          }
        }),
      )
    } finally {
      clients.destroy()
      await router.close()
      await Promise.all(replicas.map((r) => r.close()))
    }
    const answered = replicas.map((r) => r.stats.requests)
    const total = answered.reduce((a, b) => a + b, 0)
    const shares = answered.map((n) => n / total)
    const figures = {
      perSecond: ms.length / BalanceSeconds,
      p50: percentile(ms, 0.5),
      p99: percentile(ms, 0.99),
      shares,
    }
    results[kind] = figures
    rows.push([
      kind === "round-robin" ? "in turn (baseline)" : "fewest in flight",
      shares.map((x) => `${(x * 100).toFixed(0)}%`).join(" / "),
      figures.perSecond.toFixed(0),
      figures.p50.toFixed(1),
      figures.p99.toFixed(1),
    ])
  }
  const rr = results["round-robin"]!
  const lor = results["least-outstanding"]!
  rows[1]!.push(`${(lor.perSecond / rr.perSecond).toFixed(2)}×`, `${(lor.p99 / rr.p99).toFixed(2)}×`)
  rows[0]!.push("1.00×", "1.00×")
  console.log(
    `\nBalance: replicas answering after ${ReplicaDelaysMs.join(" and ")} ms, ${Clients} clients back to back for ${BalanceSeconds} s\n`,
  )
  console.log(
    table(
      [
        "router picks",
        `share (${ReplicaDelaysMs.map((d) => `${d} ms`).join(" / ")})`,
        "req/s",
        "p50 ms",
        "p99 ms",
        "req/s ×",
        "p99 ×",
      ],
      rows,
    ),
  )
  record({
    router_balance: {
      replicaDelaysMs: ReplicaDelaysMs,
      clients: Clients,
      roundRobin: rr,
      leastOutstanding: lor,
    },
  })
}
