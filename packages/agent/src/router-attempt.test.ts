import { spawn } from "node:child_process"
import { once } from "node:events"
import { request } from "node:http"
import { createServer } from "node:net"
import { ObservedAttempt as ObservedAttemptSchema, RouterBuckets } from "@swarmplane/core/contract"
import type { DesiredAttempt, ObservedAttempt } from "@swarmplane/core/contract/worker"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import type { AttemptContext } from "./attempt"
import { createEchoServer, type EchoServer } from "./echo-server"
import { silentLogger } from "./logger"
import { processAlive } from "./process-group"
import { AgentProgram, resolveArgv } from "./process-runner"
import { pickableRange, RouterAttempt, RouterProcessCommand, type RouterSupervision } from "./router-attempt"
import { DurationBuckets } from "./router-metrics"
import { waitFor } from "./testing/wait"

let echo: EchoServer
let replica: string
const started: RouterAttempt[] = []

beforeAll(async () => {
  echo = createEchoServer()
  replica = `http://127.0.0.1:${await echo.listen(0, "127.0.0.1")}`
})
afterAll(() => echo.close())
afterEach(async () => {
  await Promise.all(started.splice(0).map((a) => a.stop()))
})

/** A router attempt over the echo replica, with every report it made on a change kept in `reports`. */
function router(over: Partial<DesiredAttempt> = {}, options: RouterSupervision = {}) {
  const reports: ObservedAttempt[] = []
  let attempt: RouterAttempt | undefined
  const ctx: AttemptContext = {
    advertiseHost: "127.0.0.1",
    bindHost: "127.0.0.1",
    onChange: () => {
      if (attempt) reports.push(withoutCounters(attempt.observe().report))
    },
    log: silentLogger,
    stopGraceMs: 2000,
  }
  const desired: DesiredAttempt = {
    attemptUid: `router-${started.length}`,
    action: "run",
    kind: "router",
    jobId: "srv-llm-g1",
    taskIndex: 1,
    upstreams: [replica],
    ...over,
  }
  attempt = new RouterAttempt(desired, ctx, options)
  started.push(attempt)
  return { attempt, reports }
}

/** One completion through the router on a connection of its own: true when it is answered 200. */
const chat = (base: string) =>
  new Promise<boolean>((resolve) => {
    const req = request(
      `${base}/v1/chat/completions`,
      { method: "POST", agent: false, timeout: 5000, headers: { "content-type": "application/json" } },
      (res) => {
        res.resume()
        res.once("end", () => resolve(res.statusCode === 200))
      },
    )
    req.once("timeout", () => req.destroy())
    req.once("error", () => resolve(false))
    req.end(JSON.stringify({ messages: [{ role: "user", content: "hi" }] }))
  })

/** A report without the router's counters, which move with every request (checked on their own). */
function withoutCounters(report: ObservedAttempt): ObservedAttempt {
  const { router: _, ...rest } = report
  return rest
}

const readyReport = (attempt: RouterAttempt) =>
  waitFor("the router to be ready", () => {
    const report = withoutCounters(attempt.observe().report)
    return report.ready === true && report
  })

describe("router attempt", () => {
  it("a router process killed with SIGKILL is replaced at once on the same port; connections meanwhile wait, none is refused", async () => {
    const { attempt, reports } = router()
    const before = await readyReport(attempt)
    expect(await chat(before.endpoint!)).toBe(true)
    const pid = attempt.pid!
    process.kill(pid, "SIGKILL")
    const killedAt = Date.now()
    await waitFor("the agent to see the router process end", () => attempt.pid !== pid)
    // The port stays open while the next router process starts: these connect now and are answered once it is up.
    const meanwhile = await Promise.all([
      chat(before.endpoint!),
      chat(before.endpoint!),
      chat(before.endpoint!),
    ])
    const outage = Date.now() - killedAt
    console.log(`router process killed: connections made meanwhile answered after ${outage} ms`)
    expect(meanwhile).toEqual([true, true, true])
    expect(processAlive(pid)).toBe(false)
    // While it was down it said so, at the same address; then it was ready again there.
    expect(reports).toContainEqual({
      attemptUid: before.attemptUid,
      state: "RUNNING",
      ready: false,
      endpoint: before.endpoint,
      message: "router restarting (restart 1 of 5): the router process was killed by SIGKILL",
    })
    expect(await readyReport(attempt)).toEqual({ ...before, ready: true })
  })

  it("reports its router process's counters: requests answered, tokens, and the buckets of their durations", async () => {
    const { attempt } = router()
    const { endpoint } = await readyReport(attempt)
    for (let i = 0; i < 3; i++) expect(await chat(endpoint!)).toBe(true)
    const counters = await waitFor("the router's counters to show the requests", () => {
      const c = attempt.observe().report.router
      return c && c.requests === 3 && c
    })
    expect(counters.answers).toEqual({ "2xx": 3 })
    expect(counters.failures).toBe(0)
    expect(counters.tokens).toBeGreaterThan(0)
    expect(counters.durationBuckets.reduce((a, b) => a + b, 0)).toBe(3)
    expect(counters.firstByteBuckets.reduce((a, b) => a + b, 0)).toBe(3)
    expect(counters.startedAt).toBeLessThanOrEqual(Date.now())
    // What the control plane checks a heartbeat against accepts it.
    expect(ObservedAttemptSchema.safeParse(attempt.observe().report).success).toBe(true)
    expect(DurationBuckets).toEqual([...RouterBuckets])
  })

  it("binds the port the control plane names, and keeps it", async () => {
    const port = await freeTcpPort()
    const { attempt } = router({ port })
    expect((await readyReport(attempt)).endpoint).toBe(`http://127.0.0.1:${port}`)
  })

  it("with no port named, picks one below the kernel's ephemeral range, where no outgoing connection can hold it later", async () => {
    const { attempt } = router()
    const port = Number(new URL((await readyReport(attempt)).endpoint!).port)
    const range = pickableRange()
    if (range) expect(port).toBeGreaterThanOrEqual(range[0])
    if (range) expect(port).toBeLessThanOrEqual(range[1])
  })

  it("a router whose process keeps ending fails the attempt after 5 fast restarts, saying why", async () => {
    const { attempt } = router({}, { argv: ["sh", "-c", "echo 'router: boom' >&2; exit 3"] })
    const failed = await waitFor("the attempt to fail", () => attempt.finished && attempt.observe().report)
    expect(failed.state).toBe("FAILED")
    expect(failed.message).toBe(
      "the router process exited with code 3, its 6th end within 60 s; not restarting it here again; last output: router: boom",
    )
  })

  it("the swarm's port held by another process: the router says it waits, then the attempt fails saying so", async () => {
    const holder = createServer()
    holder.listen(0, "127.0.0.1")
    await once(holder, "listening")
    const port = (holder.address() as { port: number }).port
    try {
      const { attempt, reports } = router({ port }, { bindWaitMs: 1500 })
      const failed = await waitFor("the attempt to fail", () => attempt.finished && attempt.observe().report)
      expect(reports).toContainEqual(
        expect.objectContaining({
          ready: false,
          message: `router waiting for port ${port} on 127.0.0.1, the swarm's address, held by another process`,
        }),
      )
      expect(failed).toMatchObject({ state: "FAILED", ready: false })
      expect(failed.message).toMatch(
        new RegExp(`^port ${port} on 127.0.0.1, the swarm's address, is in use by another process`),
      )
    } finally {
      holder.close()
    }
  })

  it("a router that stops answering is killed and restarted on its port", async () => {
    const { attempt, reports } = router({}, { probeEveryMs: 100, probeTimeoutMs: 200, probeFailures: 3 })
    const before = await readyReport(attempt)
    const pid = attempt.pid!
    process.kill(pid, "SIGSTOP")
    await waitFor("a new router process", () => attempt.pid !== undefined && attempt.pid !== pid)
    await waitFor("the router to answer again", () => chat(before.endpoint!), { timeoutMs: 10_000 })
    expect(reports.map((r) => r.message)).toContain(
      "router restarting (restart 1 of 5): the router process stopped answering /_swarmplane/router",
    )
    expect((await readyReport(attempt)).endpoint).toBe(before.endpoint)
  })

  it("stop ends the router process and reports KILLED", async () => {
    const { attempt } = router()
    await readyReport(attempt)
    const pid = attempt.pid!
    await attempt.stop()
    expect(attempt.observe().report).toMatchObject({ state: "KILLED", message: "stopped by the agent" })
    await waitFor("the router process to be gone", () => !processAlive(pid))
  })
})

describe("router process", () => {
  it("ends when its agent's channel closes (the agent died)", async () => {
    const [file, ...args] = resolveArgv([AgentProgram, RouterProcessCommand])
    const child = spawn(file!, args, { stdio: ["ignore", "ignore", "inherit", "ipc"] })
    const [hello] = await once(child, "message")
    expect(hello).toEqual({ type: "hello" })
    const exited = once(child, "exit")
    child.disconnect()
    expect((await exited)[0]).toBe(0)
  })

  it("refuses to run without an agent", async () => {
    const [file, ...args] = resolveArgv([AgentProgram, RouterProcessCommand])
    const child = spawn(file!, args, { stdio: ["ignore", "ignore", "pipe"] })
    let err = ""
    child.stderr?.on("data", (c: Buffer) => (err += c.toString()))
    const [code] = await once(child, "exit")
    expect(code).toBe(2)
    expect(err).toContain("run by a worker agent only")
  })

  it("picks first ports below the kernel's ephemeral range, when there is room", () => {
    const cases: [string, readonly [number, number] | undefined][] = [
      ["32768\t60999\n", [20_000, 32_767]],
      ["40000 65000", [20_000, 39_999]],
      ["20500 60999", undefined],
      ["garbage", [20_000, 32_767]],
    ]
    for (const [text, range] of cases) expect(pickableRange(() => text)).toEqual(range)
  })
})

async function freeTcpPort(): Promise<number> {
  const server = createServer()
  server.listen(0, "127.0.0.1")
  await once(server, "listening")
  const port = (server.address() as { port: number }).port
  await new Promise((resolve) => server.close(resolve))
  return port
}
