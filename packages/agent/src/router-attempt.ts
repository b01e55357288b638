/**
 * A `router` attempt: the swarm router as a process of its own (`swarmplane-agent router-process`),
 * supervised by the agent, behind a port the agent holds.
 *
 * The agent listens on the attempt's port (the swarm's, when the control plane names one; else one it
 * picks) for the attempt's whole life and hands each connection to the router process over their IPC
 * channel; the router process proxies it to the replicas the agent last heard of from the control
 * plane. When the router process exits, or stops answering its status path, the agent starts another
 * at once (up to `fastRestarts` times in `restartWindowMs`; then the attempt fails and the control
 * plane's retry, on the same port, takes over) and gives it the replicas. Meanwhile the port stays
 * open: new connections wait in the agent and are handed to the new router process once it is up, so
 * a router's loss costs its clients the requests it had in flight, not refused connections, and never
 * the address. While it is not serving the attempt reports not ready, with why, so the swarm does not
 * read RUNNING meanwhile.
 *
 * The router process ends with its agent, however the agent dies (`kill -9` too): the kernel closes
 * the IPC channel, which the router process takes as its cue to exit.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import { request } from "node:http"
import { createServer, type Server, Socket } from "node:net"
import { setTimeout as sleep } from "node:timers/promises"
import type { DesiredAttempt, ObservedAttempt, RouterCounters } from "@swarmplane/core/contract/worker"
import { type Attempt, type AttemptContext, type Observation, ReportLimits } from "./attempt"
import { httpUrl } from "./net"
import { signalGroup } from "./process-group"
import { AgentProgram, attemptEnv, type ProcessOutcome, resolveArgv } from "./process-runner"
import { createRouter, RouterStatusPath } from "./router"
import type { RouterTotals } from "./router-metrics"

/** The agent's internal command that runs one router process (it needs the agent's channel). */
export const RouterProcessCommand = "router-process"

export interface RouterSupervision {
  /** Restarts allowed within `restartWindowMs` before the attempt fails. Default 5 in 60 s. */
  fastRestarts?: number
  restartWindowMs?: number
  /** Status probes of a running router: period, timeout, and failures in a row that count as hung. */
  probeEveryMs?: number
  probeTimeoutMs?: number
  probeFailures?: number
  /** How long to wait for the port while another process holds it (the router being replaced). */
  bindWaitMs?: number
  /** Connections held while no router process is up: at most this many, this long. */
  maxHeld?: number
  holdMs?: number
  /** The argv of one router process (default: this agent's `router-process`). */
  argv?: string[]
}

const defaults: Required<RouterSupervision> = {
  fastRestarts: 5,
  restartWindowMs: 60_000,
  probeEveryMs: 1000,
  probeTimeoutMs: 1000,
  probeFailures: 3,
  bindWaitMs: 10_000,
  maxHeld: 1024,
  holdMs: 30_000,
  argv: [AgentProgram, RouterProcessCommand],
}

/** What the agent tells its router process; a `connection` comes with the client's socket. */
type ToRouter = { type: "upstreams"; upstreams: string[]; holdMs?: number } | { type: "connection" }
/**
 * What a router process tells its agent: it is ready to take the replicas and connections; and, every
 * second while they change, its counters since it started (`startedAt`, epoch ms).
 */
type FromRouter = { type: "hello" } | { type: "totals"; startedAt: number; totals: RouterTotals }

/** How often a router process sends its counters when they changed. */
const TotalsEveryMs = 1000

export class RouterAttempt implements Attempt {
  readonly uid: string
  finalDelivered = false
  private readonly o: Required<RouterSupervision>
  /** The ready replicas, as the last heartbeat answer listed them. */
  private upstreams: string[]
  /** A swarm that scales to zero: how long its router holds a request for a replica, ms (0: not). */
  private holdMs: number
  /** While requests wait for a replica: heartbeats come often, so the replica that wakes is seen soon. */
  private waker: NodeJS.Timeout | undefined
  private readonly listener: Server
  /** The attempt's port, once the agent listens on it. */
  private port: number | undefined
  private child: ChildProcess | undefined
  private childExit: Promise<void> = Promise.resolve()
  /** The current router process has said hello: it takes connections. */
  private up = false
  /** Connections that came while no router process was up, and when. */
  private held: { socket: Socket; at: number }[] = []
  private probeFails = 0
  /** The current (or last) router process's counters, reported with each heartbeat. */
  private totals: RouterCounters | undefined
  private probing = false
  /** Why the router is not serving while the attempt runs (reported as its message). */
  private note: string | undefined
  /** When router processes ended unexpectedly, within the restart window. */
  private exits: number[] = []
  private output = ""
  private outcome: ProcessOutcome | undefined
  private stopRequested = false
  private stopping: Promise<void> | undefined
  private readonly bound: Promise<void>
  private readonly timer: NodeJS.Timeout

  constructor(
    desired: DesiredAttempt,
    private readonly ctx: AttemptContext,
    options: RouterSupervision = {},
  ) {
    this.uid = desired.attemptUid
    this.o = { ...defaults, ...options }
    this.upstreams = [...(desired.upstreams ?? [])]
    this.holdMs = (desired.wakeHoldS ?? 0) * 1000
    // Paused: a connection's bytes are read by the router process it is handed to, not here.
    this.listener = createServer({ pauseOnConnect: true }, (socket) => this.accept(socket))
    this.listener.on("error", () => undefined)
    this.timer = setInterval(() => this.tick(), this.o.probeEveryMs)
    this.timer.unref()
    this.bound = this.bind(desired.port).catch((error: Error) =>
      this.end({ state: "FAILED", message: error.message }),
    )
    this.startRouter()
  }

  get finished(): boolean {
    return this.outcome !== undefined
  }

  /** The current router process, while one runs (for status and tests). */
  get pid(): number | undefined {
    return this.child?.pid
  }

  private get ready(): boolean {
    return (
      !this.outcome &&
      this.port !== undefined &&
      this.up &&
      // Scaled to zero it serves by holding requests while a replica wakes.
      (this.upstreams.length > 0 || this.holdMs > 0) &&
      this.probeFails < this.o.probeFailures
    )
  }

  update(desired: DesiredAttempt): void {
    const next = desired.upstreams ?? []
    const holdMs = (desired.wakeHoldS ?? 0) * 1000
    if (next.join(" ") === this.upstreams.join(" ") && holdMs === this.holdMs) return
    const wasReady = this.ready
    this.upstreams = [...next]
    this.holdMs = holdMs
    if (this.up) this.tell({ type: "upstreams", upstreams: this.upstreams, holdMs })
    this.watchWaiting()
    this.ctx.log.info(`attempt ${this.uid}: router upstreams now ${this.describeUpstreams()}`)
    if (this.ready !== wasReady) this.ctx.onChange()
  }

  observe(): Observation {
    const report: ObservedAttempt = { attemptUid: this.uid, state: this.outcome?.state ?? "RUNNING" }
    if (this.outcome?.exitCode !== undefined) report.exitCode = this.outcome.exitCode
    const ready = this.ready
    const message = this.outcome ? this.outcome.message : ready ? undefined : this.note
    if (message) report.message = message.slice(0, ReportLimits.message)
    const endpoint = this.endpoint()
    if (endpoint) report.endpoint = endpoint
    report.ready = ready
    if (this.totals) report.router = this.totals
    const final = this.finished
    return {
      report,
      delivered: () => {
        if (final) this.finalDelivered = true
      },
    }
  }

  stop(): Promise<void> {
    this.stopping ??= (async () => {
      this.stopRequested = true
      this.release()
      await this.bound
      const child = this.child
      if (child?.pid !== undefined && child.exitCode === null && child.signalCode === null) {
        signalGroup(child.pid, "SIGTERM")
        const killer = setTimeout(() => signalGroup(child.pid!, "SIGKILL"), this.ctx.stopGraceMs)
        await this.childExit
        clearTimeout(killer)
      }
      this.end({ state: "KILLED", message: "stopped by the agent" })
    })()
    return this.stopping
  }

  killNow(): void {
    this.stopRequested = true
    this.release()
    const child = this.child
    if (child?.pid !== undefined && child.exitCode === null && child.signalCode === null)
      signalGroup(child.pid, "SIGKILL")
  }

  /** Listen on the swarm's port, waiting a while if another process holds it; or on a picked one. */
  private async bind(port: number | undefined): Promise<void> {
    const host = this.ctx.bindHost
    if (port === undefined) this.port = await listenOnPicked(this.listener, host)
    else {
      const deadline = Date.now() + this.o.bindWaitMs
      for (;;) {
        try {
          this.port = await listen(this.listener, port, host)
          break
        } catch (error) {
          const code = (error as NodeJS.ErrnoException).code
          if (code !== "EADDRINUSE")
            throw new Error(`the router could not listen on ${host}:${port}: ${(error as Error).message}`)
          if (Date.now() >= deadline)
            throw new Error(
              `port ${port} on ${host}, the swarm's address, is in use by another process (waited ${Math.round(this.o.bindWaitMs / 1000)} s): free it and the router is retried there, or re-create the swarm for a new address`,
            )
          if (!this.note) {
            this.note = `router waiting for port ${port} on ${host}, the swarm's address, held by another process`
            this.ctx.log.warn(`attempt ${this.uid}: ${this.note}`)
            this.ctx.onChange()
          }
          await sleep(200)
          if (this.stopRequested) return
        }
      }
    }
    if (this.stopRequested || this.outcome) return this.release()
    if (this.note?.startsWith("router waiting for port")) this.note = undefined
    this.ctx.log.info(`attempt ${this.uid}: router on ${this.endpoint()} over ${this.describeUpstreams()}`)
    this.ctx.onChange()
  }

  /** A client's connection: to the router process, or held until one is up. */
  private accept(socket: Socket): void {
    socket.on("error", () => undefined)
    if (this.up && this.child?.connected) this.handOver(socket)
    else if (this.held.length >= this.o.maxHeld || this.outcome || this.stopRequested) socket.destroy()
    else this.held.push({ socket, at: Date.now() })
  }

  private handOver(socket: Socket): void {
    const child = this.child
    if (!child?.connected) {
      socket.destroy()
      return
    }
    try {
      child.send({ type: "connection" } satisfies ToRouter, socket, (error) => {
        if (error) socket.destroy()
      })
    } catch {
      socket.destroy()
    }
  }

  /** Start a router process; it says hello when it can take the replicas and connections. */
  private startRouter(): void {
    const [file, ...args] = resolveArgv(this.o.argv)
    let child: ChildProcess
    try {
      child = spawn(file ?? "", args, {
        // The agent's environment without its token: the router needs nothing of the control plane.
        env: attemptEnv(process.env, { attemptUid: this.uid, argv: this.o.argv }),
        // Its own group (as every attempt's), so a terminal's Ctrl-C reaches the agent, which stops it.
        detached: true,
        stdio: ["ignore", "pipe", "pipe", "ipc"],
      })
    } catch (error) {
      this.end({ state: "FAILED", message: `could not start the router: ${String(error)}` })
      return
    }
    this.child = child
    this.up = false
    this.probeFails = 0
    this.output = ""
    this.childExit = new Promise((resolve) => child.once("exit", () => resolve()))
    for (const stream of [child.stdout, child.stderr]) {
      stream?.setEncoding("utf8")
      stream?.on("data", (text: string) => {
        this.output = (this.output + text).slice(-2048)
      })
    }
    child.on("error", (error) => {
      if (child.pid === undefined && child === this.child)
        this.end({ state: "FAILED", message: `could not start the router: ${error.message}` })
    })
    child.on("message", (message: FromRouter) => {
      if (child !== this.child) return
      if (message?.type === "hello") this.hello(child)
      else if (message?.type === "totals") {
        const before = this.totals?.waiting ?? 0
        this.totals = { startedAt: message.startedAt, ...message.totals }
        // Requests began to wait for a replica: the control plane hears it now, to wake one.
        if (before === 0 && (this.totals.waiting ?? 0) > 0) this.ctx.onChange()
        this.watchWaiting()
      }
    })
    child.once("exit", (code, signal) => this.exited(child, code, signal))
  }

  /**
   * While requests wait for a replica and none is known, heartbeat about every quarter second (the
   * agent's least gap), so the replica that wakes reaches the router soon; stop once one is known.
   */
  private watchWaiting(): void {
    const waiting = (this.totals?.waiting ?? 0) > 0 && this.upstreams.length === 0 && !this.outcome
    if (waiting && !this.waker) {
      this.waker = setInterval(() => this.ctx.onChange(), 250)
      this.waker.unref()
    } else if (!waiting && this.waker) {
      clearInterval(this.waker)
      this.waker = undefined
    }
  }

  /** A router process is up: give it the replicas, then the connections that waited for it. */
  private hello(child: ChildProcess): void {
    const wasReady = this.ready
    this.up = true
    this.tell({ type: "upstreams", upstreams: this.upstreams, holdMs: this.holdMs })
    for (const { socket } of this.held.splice(0)) this.handOver(socket)
    if (this.note?.startsWith("router restarting")) this.note = undefined
    this.ctx.log.info(`attempt ${this.uid}: router process ${child.pid} up`)
    if (this.ready !== wasReady) this.ctx.onChange()
  }

  private exited(child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (child !== this.child) return
    this.child = undefined
    this.up = false
    if (this.outcome || this.stopRequested) return
    const hung = this.probeFails >= this.o.probeFailures
    const how = hung
      ? `stopped answering ${RouterStatusPath}`
      : signal
        ? `was killed by ${signal}`
        : `exited with code ${code}`
    const now = Date.now()
    this.exits = [...this.exits.filter((t) => now - t < this.o.restartWindowMs), now]
    if (this.exits.length > this.o.fastRestarts) {
      const said = lastLine(this.output)
      this.end({
        state: "FAILED",
        ...(code !== null ? { exitCode: code } : {}),
        message: `the router process ${how}, its ${this.exits.length}th end within ${this.o.restartWindowMs / 1000} s; not restarting it here again${said ? `; last output: ${said}` : ""}`,
      })
      return
    }
    this.note = `router restarting (restart ${this.exits.length} of ${this.o.fastRestarts}): the router process ${how}`
    this.ctx.log.warn(`attempt ${this.uid}: ${this.note}`)
    this.ctx.onChange()
    this.startRouter()
  }

  /** Every probe period: drop connections held too long, and probe the router through the port. */
  private tick(): void {
    const now = Date.now()
    const stale = this.held.filter((h) => now - h.at > this.o.holdMs)
    if (stale.length) {
      this.held = this.held.filter((h) => now - h.at <= this.o.holdMs)
      for (const { socket } of stale) socket.destroy()
    }
    void this.probe()
  }

  /** One status probe, through the port as a client would come; a few failures in a row and it is restarted. */
  private async probe(): Promise<void> {
    const child = this.child
    if (!this.up || this.probing || this.port === undefined || !child) return
    this.probing = true
    const host = this.ctx.bindHost === "0.0.0.0" ? "127.0.0.1" : this.ctx.bindHost
    const ok = await answers(`${httpUrl(host, this.port)}${RouterStatusPath}`, this.o.probeTimeoutMs)
    this.probing = false
    if (child !== this.child || this.outcome) return
    const wasReady = this.ready
    this.probeFails = ok ? 0 : this.probeFails + 1
    if (this.probeFails === this.o.probeFailures && child.pid !== undefined) {
      this.note = `router not answering ${RouterStatusPath}; restarting it`
      signalGroup(child.pid, "SIGKILL")
    }
    if (this.ready !== wasReady) this.ctx.onChange()
  }

  private tell(message: ToRouter): void {
    const child = this.child
    if (!child?.connected) return
    try {
      child.send(message, (error) => {
        if (error) this.ctx.log.warn(`attempt ${this.uid}: could not reach the router: ${error.message}`)
      })
    } catch {
      // The channel closed under us: the router process is ending, and its successor gets the list.
    }
  }

  /** Stop listening and drop the connections held: the attempt is ending. */
  private release(): void {
    clearInterval(this.timer)
    if (this.waker) clearInterval(this.waker)
    this.waker = undefined
    this.listener.close()
    for (const { socket } of this.held.splice(0)) socket.destroy()
  }

  private end(outcome: ProcessOutcome): void {
    if (this.outcome) return
    this.outcome = outcome
    this.release()
    if (this.child?.pid !== undefined && !this.stopRequested) signalGroup(this.child.pid, "SIGTERM")
    this.ctx.log.info(
      `attempt ${this.uid}: router ${outcome.state}${outcome.message ? `: ${outcome.message}` : ""}`,
    )
    this.ctx.onChange()
  }

  private endpoint(): string | undefined {
    return this.port === undefined ? undefined : httpUrl(this.ctx.advertiseHost, this.port)
  }

  private describeUpstreams(): string {
    return this.upstreams.length ? this.upstreams.join(", ") : "no upstreams yet"
  }
}

/** A 200 from `url` within `timeoutMs`, on a connection of its own (as a new client comes, through the port). */
function answers(url: string, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request(url, { agent: false, timeout: timeoutMs }, (res) => {
      res.resume()
      resolve(res.statusCode === 200)
    })
    req.once("timeout", () => req.destroy())
    req.once("error", () => resolve(false))
    req.end()
  })
}

function lastLine(text: string): string | undefined {
  return text
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean)
    .at(-1)
    ?.slice(0, 300)
}

function listen(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const failed = (error: Error) => reject(error)
    server.once("error", failed)
    server.listen(port, host, () => {
      server.off("error", failed)
      const address = server.address()
      resolve(typeof address === "object" && address ? address.port : port)
    })
  })
}

/**
 * A router's first port: one below the kernel's ephemeral range when there is room, so that no
 * outgoing connection holds it when a later attempt of the router binds it again; else any free one.
 */
async function listenOnPicked(server: Server, host: string): Promise<number> {
  const range = pickableRange()
  for (let tries = 0; range && tries < 20; tries++) {
    const port = range[0] + Math.floor(Math.random() * (range[1] - range[0] + 1))
    try {
      return await listen(server, port, host)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EADDRINUSE") break
    }
  }
  return listen(server, 0, host)
}

/** Ports 20000 up to the start of the ephemeral range (`ip_local_port_range`), when that leaves 1000. */
export function pickableRange(
  read: () => string = () => readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8"),
): readonly [number, number] | undefined {
  let low = 32768
  try {
    const first = Number(read().trim().split(/\s+/)[0])
    if (Number.isInteger(first) && first > 0) low = first
  } catch {}
  const range = [20_000, low - 1] as const
  return range[1] - range[0] >= 1000 ? range : undefined
}

/**
 * `swarmplane-agent router-process`: one router process of a worker's agent. It says hello, then
 * serves the connections the agent hands it over the replicas the agent names, and ends when the agent
 * closes the channel or goes away.
 */
export async function runRouterProcess(): Promise<number> {
  if (!process.send || !process.connected) {
    process.stderr.write(
      "swarmplane-agent router-process: run by a worker agent only; for a router of your own use 'swarmplane-agent router'\n",
    )
    return 2
  }
  const startedAt = Date.now()
  let last = ""
  const sendTotals = () => {
    const now = router.metrics.totals(router.waiting())
    const text = JSON.stringify(now)
    if (text === last || !process.connected) return
    last = text
    process.send?.({ type: "totals", startedAt, totals: now } satisfies FromRouter)
  }
  // A request that starts to wait for a replica is told to the agent at once (it asks for a wake).
  const router = createRouter([], { onWaiting: () => setImmediate(sendTotals) })
  const done = new Promise<void>((resolve) => {
    process.once("disconnect", resolve)
    process.once("SIGTERM", resolve)
    process.once("SIGINT", resolve)
  })
  // The server never listens (the agent does), so it does not track its connections itself.
  const connections = new Set<Socket>()
  process.on("message", (message: ToRouter, handle: unknown) => {
    if (message?.type === "upstreams" && Array.isArray(message.upstreams)) {
      router.setHold(typeof message.holdMs === "number" ? message.holdMs : 0)
      router.setUpstreams(message.upstreams.filter((u) => typeof u === "string"))
    } else if (message?.type === "connection" && handle instanceof Socket) {
      connections.add(handle)
      handle.once("close", () => connections.delete(handle))
      router.server.emit("connection", handle)
    }
  })
  process.send({ type: "hello" } satisfies FromRouter)
  const totals = setInterval(sendTotals, TotalsEveryMs)
  totals.unref()
  await done
  clearInterval(totals)
  // Its agent stopped it or is gone (and its port with it): what it still serves ends now.
  for (const socket of connections) socket.destroy()
  await router.close()
  return 0
}
