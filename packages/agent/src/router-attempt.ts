/**
 * A `router` attempt: the swarm router run inside the agent on a free port. Its upstreams come with
 * every heartbeat answer; it is ready while it has at least one.
 */
import type { DesiredAttempt, ObservedAttempt } from "@swarmplane/core/contract/worker"
import { type Attempt, type AttemptContext, type Observation, ReportLimits } from "./attempt"
import { httpUrl } from "./net"
import type { ProcessOutcome } from "./process-runner"
import { createRouter, type Router } from "./router"

export class RouterAttempt implements Attempt {
  readonly uid: string
  private readonly router: Router
  private port: number | undefined
  private outcome: ProcessOutcome | undefined
  private readonly listening: Promise<void>
  private stopping: Promise<void> | undefined
  finalDelivered = false

  constructor(
    desired: DesiredAttempt,
    private readonly ctx: AttemptContext,
  ) {
    this.uid = desired.attemptUid
    this.router = createRouter(desired.upstreams ?? [])
    this.listening = this.router.listen(0, ctx.bindHost).then(
      (port) => {
        this.port = port
        ctx.log.info(`attempt ${this.uid}: router on ${this.endpoint()} over ${this.describeUpstreams()}`)
        ctx.onChange()
      },
      (error: Error) => this.end({ state: "FAILED", message: `router could not listen: ${error.message}` }),
    )
  }

  get finished(): boolean {
    return this.outcome !== undefined
  }

  private get ready(): boolean {
    return !this.outcome && this.port !== undefined && this.router.upstreams().length > 0
  }

  update(desired: DesiredAttempt): void {
    const before = this.router.upstreams().join(" ")
    const wasReady = this.ready
    this.router.setUpstreams(desired.upstreams ?? [])
    if (this.router.upstreams().join(" ") !== before)
      this.ctx.log.info(`attempt ${this.uid}: router upstreams now ${this.describeUpstreams()}`)
    if (this.ready !== wasReady) this.ctx.onChange()
  }

  observe(): Observation {
    const report: ObservedAttempt = { attemptUid: this.uid, state: this.outcome?.state ?? "RUNNING" }
    if (this.outcome?.message) report.message = this.outcome.message.slice(0, ReportLimits.message)
    const endpoint = this.endpoint()
    if (endpoint) report.endpoint = endpoint
    report.ready = this.ready
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
      await this.listening
      if (this.outcome) return
      await this.router.close()
      this.end({ state: "KILLED", message: "stopped by the agent" })
    })()
    return this.stopping
  }

  killNow(): void {
    this.router.server.closeAllConnections()
    this.router.server.close()
  }

  private end(outcome: ProcessOutcome): void {
    if (this.outcome) return
    this.outcome = outcome
    this.ctx.log.info(
      `attempt ${this.uid}: router ${outcome.state}${outcome.message ? `: ${outcome.message}` : ""}`,
    )
    this.ctx.onChange()
  }

  private endpoint(): string | undefined {
    return this.port === undefined ? undefined : httpUrl(this.ctx.advertiseHost, this.port)
  }

  private describeUpstreams(): string {
    const upstreams = this.router.upstreams()
    return upstreams.length ? upstreams.join(", ") : "no upstreams yet"
  }
}
