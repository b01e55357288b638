/**
 * Fault injection for the control plane's ports: wrappers that make chosen calls of the store, the
 * schedule queue and a backend fail or hang at chosen points, driven by a seeded PRNG and a plan, so a
 * run that broke can be replayed from its seed.
 *
 * Kinds of fault, each decided per call by the plan's rules (the first rule that matches and fires):
 *   error        a transient error before the call takes effect (a DynamoDB ThrottlingException, a
 *                connection reset, an SSH channel that closed): nothing happened, the caller sees it.
 *   error-after  the call takes effect, then the caller sees the same error: a write that landed
 *                but whose answer was lost, a submit that reached the substrate.
 *   hang         the call waits until the plan's hang is over (clock time: past a pass's lease when
 *                the hang is long), then either goes through late or times out, half and half.
 *   race         a conditional write loses its race: another writer changes the item just before it
 *                (the store's version moves on), so the write is refused as a real conflict would be.
 *   duplicate    a queue message is delivered twice (SQS is at-least-once), or sent twice.
 * Every injected fault is counted by point and kind; `summary()` prints the counts.
 */
import type { TaskBackend } from "@swarmplane/core/backends/protocol"
import type { ReceivedMessage, ScheduleQueue } from "@swarmplane/core/queue/port"
import type { Key, StateStore, StoredItem } from "@swarmplane/core/store/port"
import type { Clock } from "@swarmplane/core/util/clock"
import { BackendError } from "@swarmplane/core/util/errors"

/** A small, fast, seeded PRNG (mulberry32): the same seed gives the same run. */
export class Rng {
  private state: number
  constructor(readonly seed: number) {
    this.state = seed >>> 0
  }
  /** A number in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0
    let t = this.state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  /** An integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1))
  }
  chance(p: number): boolean {
    return p > 0 && this.next() < p
  }
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)]!
  }
}

export const FaultKinds = ["error", "error-after", "hang", "race", "duplicate"] as const
export type FaultKind = (typeof FaultKinds)[number]

/** One call as a rule sees it: where (`store.update`, `queue.receive`, `backend.launch`) and its arguments. */
export interface Call {
  point: string
  args: readonly unknown[]
}

export interface FaultRule {
  /** The points it applies to: a name (`store.update`), a prefix with `*` (`store.*`), or a pattern. */
  point: string | RegExp
  kind: FaultKind
  /** Chance per matching call, 0..1. */
  rate: number
  /** Only calls this accepts (e.g. writes of task items). */
  when?: (call: Call) => boolean
  /** How long a hang lasts, in clock ms: [min, max]. Default [5 s, 90 s] (a pass's lease is 60 s). */
  hangMs?: readonly [number, number]
}

export interface FaultPlan {
  seed: number
  rules: readonly FaultRule[]
}

/** What an injected fault throws: a retryable transport failure, as the adapters wrap theirs. */
export class InjectedFault extends BackendError {
  constructor(
    readonly point: string,
    readonly kind: FaultKind,
    what: string,
  ) {
    super(`${point}: ${what} (injected fault)`, true)
    this.name = "InjectedFault"
  }
}

/** The error text of a transient failure at a point, in the words its real counterpart uses. */
function transient(point: string, kind: FaultKind): InjectedFault {
  const [port = "", method = ""] = point.split(".")
  const what =
    port === "store"
      ? `DynamoDB ${method}: ThrottlingException: Rate of requests exceeds the allowed throughput`
      : port === "queue"
        ? `SQS ${method}: read ECONNRESET`
        : `${method}: the SSH channel closed before the command finished`
  return new InjectedFault(point, kind, what)
}

function timedOut(point: string): InjectedFault {
  return new InjectedFault(point, "hang", "the call timed out after a hang")
}

const matches = (rule: FaultRule, call: Call) =>
  (typeof rule.point === "string"
    ? rule.point.endsWith("*")
      ? call.point.startsWith(rule.point.slice(0, -1))
      : call.point === rule.point
    : rule.point.test(call.point)) &&
  (rule.when?.(call) ?? true)

interface Hang {
  point: string
  until: number
  release: () => void
}

/**
 * The faults of one run: the plan, its PRNG, what was injected, and the calls hanging now. Hangs end
 * on the clock: a run on a fake clock calls `releaseDue()` after it advances it; with `realTime`, a
 * timer ends each hang (a run against a real substrate).
 */
export class Faults {
  readonly rng: Rng
  /** Injected faults by `<point> <kind>`. */
  readonly counts = new Map<string, number>()
  /** Calls seen by point (faulted or not), to put the counts in proportion. */
  readonly calls = new Map<string, number>()
  private hangs: Hang[] = []
  private on = true

  constructor(
    readonly plan: FaultPlan,
    readonly clock: Clock,
    readonly options: { realTime?: boolean } = {},
  ) {
    this.rng = new Rng(plan.seed)
  }

  get enabled(): boolean {
    return this.on
  }

  /** Inject nothing from now on, and let every hanging call go on. */
  stop(): void {
    this.on = false
    this.releaseAll()
  }

  /** Inject again (after `stop`). */
  resume(): void {
    this.on = true
  }

  /** Run `work` with no faults injected (setting up, checking). */
  async quiet<T>(work: () => Promise<T>): Promise<T> {
    const was = this.on
    this.on = false
    try {
      return await work()
    } finally {
      this.on = was
    }
  }

  /**
   * The fault to inject into this call, if any (counted). `first: false` for a second decision about
   * the same call (a race before a write, a duplicate delivery), so each call is counted once.
   */
  decide(
    point: string,
    args: readonly unknown[],
    allowed: readonly FaultKind[],
    first = true,
  ): FaultRule | undefined {
    if (first) this.calls.set(point, (this.calls.get(point) ?? 0) + 1)
    if (!this.on) return undefined
    const call = { point, args }
    for (const rule of this.plan.rules) {
      if (!allowed.includes(rule.kind) || !matches(rule, call)) continue
      if (!this.rng.chance(rule.rate)) continue
      this.count(point, rule.kind)
      return rule
    }
    return undefined
  }

  count(point: string, kind: FaultKind): void {
    const key = `${point} ${kind}`
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1)
  }

  /** Wait out a hang of `rule`'s length; resolves to whether the call then times out. */
  async hang(point: string, rule: FaultRule): Promise<boolean> {
    const [min, max] = rule.hangMs ?? [5_000, 90_000]
    const ms = this.rng.int(min, max)
    const timesOut = this.rng.chance(0.5)
    await new Promise<void>((release) => {
      const hang: Hang = { point, until: this.clock.now() + ms, release }
      this.hangs.push(hang)
      if (this.options.realTime) setTimeout(() => this.end(hang), ms).unref()
    })
    return timesOut
  }

  private end(hang: Hang): void {
    if (!this.hangs.includes(hang)) return
    this.hangs = this.hangs.filter((h) => h !== hang)
    hang.release()
  }

  /** End the hangs whose time has come (after the clock moved). */
  releaseDue(): void {
    const now = this.clock.now()
    for (const hang of this.hangs.filter((h) => h.until <= now)) this.end(hang)
  }

  releaseAll(): void {
    for (const hang of [...this.hangs]) this.end(hang)
  }

  /** When the next hang ends (clock ms), if any hangs. */
  nextHangAt(): number | undefined {
    return this.hangs.length ? Math.min(...this.hangs.map((h) => h.until)) : undefined
  }

  /** Calls hanging now. */
  hanging(): number {
    return this.hangs.length
  }

  /** Every fault injected. */
  total(): number {
    return [...this.counts.values()].reduce((a, b) => a + b, 0)
  }

  /** The counts as lines, `point kind: n (of m calls)`, most first. */
  summary(): string {
    const lines = [...this.counts.entries()]
      .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
      .map(([key, n]) => `  ${key}: ${n} (of ${this.calls.get(key.split(" ")[0]!) ?? 0} calls)`)
    return `${this.total()} faults injected (seed ${this.plan.seed})${lines.length ? `\n${lines.join("\n")}` : ""}`
  }
}

/**
 * Call `run` under the fault `faults` picks for this call: an error before it, a hang (then the call
 * or a timeout), or an error after it took effect. `kinds` are the faults this call can take.
 */
async function guarded<T>(
  faults: Faults,
  point: string,
  args: readonly unknown[],
  kinds: readonly FaultKind[],
  run: () => Promise<T>,
): Promise<T> {
  const rule = faults.decide(point, args, kinds)
  if (!rule) return run()
  switch (rule.kind) {
    case "error":
      throw transient(point, rule.kind)
    case "hang":
      if (await faults.hang(point, rule)) throw timedOut(point)
      return run()
    case "error-after":
      await run()
      throw transient(point, rule.kind)
    default:
      return run()
  }
}

const reads = ["get", "getMany", "query", "queryIndex"] as const
const writes = ["create", "createMany", "update", "delete"] as const

/** The item type a store call is about (`task`, `job`, `event`, `lease`, ...), for rules' `when`. */
export function itemTypes(call: Call): string[] {
  const [first] = call.args
  if (call.point === "store.createMany") return [...new Set((first as { type: string }[]).map((i) => i.type))]
  if (first && typeof first === "object" && "type" in first) return [(first as { type: string }).type]
  return []
}

/**
 * A StateStore whose calls take the faults of `faults`' plan at points `store.<method>`: reads can
 * fail or hang; writes can also fail after they landed; `update` and a versioned `delete` can lose a
 * race (the item is rewritten just before, so the store itself refuses the call).
 */
export function faultyStore(store: StateStore, faults: Faults): StateStore {
  const bump = async (key: Key) => {
    const current = await store.get(key, { consistent: true })
    if (current) await store.update(current as StoredItem)
  }
  const wrapped: Partial<StateStore> = {}
  for (const name of reads) {
    const method = store[name].bind(store) as (...args: unknown[]) => Promise<unknown>
    ;(wrapped as Record<string, unknown>)[name] = (...args: unknown[]) =>
      guarded(faults, `store.${name}`, args, ["error", "hang"], () => method(...args))
  }
  for (const name of writes) {
    const method = store[name].bind(store) as (...args: unknown[]) => Promise<unknown>
    const canRace = name === "update" || name === "delete"
    ;(wrapped as Record<string, unknown>)[name] = async (...args: unknown[]) => {
      const point = `store.${name}`
      if (canRace && (name === "update" || args[1] !== undefined)) {
        const race = faults.decide(point, args, ["race"], false)
        if (race) await bump(args[0] as Key)
      }
      return guarded(faults, point, args, ["error", "error-after", "hang"], () => method(...args))
    }
  }
  return wrapped as StateStore
}

/**
 * A ScheduleQueue with faults at `queue.<method>`: sends, receives and deletes can fail (a send or
 * delete also after it took effect: the message went, or is gone) or hang; `duplicate` sends a request
 * twice, or delivers a received message twice in one batch (two consumers handle it at once).
 */
export function faultyQueue<Q extends ScheduleQueue>(queue: Q, faults: Faults): Q {
  return new Proxy(queue, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver)
      if (typeof value !== "function") return value
      const method = value.bind(target) as (...args: unknown[]) => Promise<unknown>
      switch (name) {
        case "send":
          return async (...args: unknown[]) => {
            if (faults.decide("queue.send", args, ["duplicate"], false)) await method(...args)
            return guarded(faults, "queue.send", args, ["error", "error-after", "hang"], () =>
              method(...args),
            )
          }
        case "receive":
          return async (...args: unknown[]) => {
            const got = (await guarded(faults, "queue.receive", args, ["error", "hang"], () =>
              method(...args),
            )) as ReceivedMessage[]
            return got.flatMap((m) =>
              faults.decide("queue.receive", [m], ["duplicate"], false)
                ? [m, { ...m, id: `${m.id}-dup` }]
                : [m],
            )
          }
        case "delete":
        case "release":
          return (...args: unknown[]) =>
            guarded(faults, `queue.${String(name)}`, args, ["error", "error-after", "hang"], () =>
              method(...args),
            )
        default:
          return method
      }
    },
  })
}

/** Backend members whose calls take faults: the seam's required core and the worker-store calls. */
const seam = [
  "status",
  "schedule",
  "launch",
  "reconcile",
  "stop",
  "fetchLogs",
  "seedLiveness",
  "pruneDeadWorkers",
  "createOrUpdate",
  "servingStatus",
  "delete",
  "resourceCapacity",
] as const

/**
 * A backend whose seam takes faults at `backend.<method>`: an error before the call (nothing reached
 * the substrate), after it (the submit or stop happened; the caller sees an error), or a hang. Every
 * capability the backend has it still has (its guards see the same members).
 */
export function faultyBackend<B extends TaskBackend>(backend: B, faults: Faults): B {
  return new Proxy(backend, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver)
      if (typeof value !== "function" || !(seam as readonly (string | symbol)[]).includes(name)) return value
      const method = value.bind(target) as (...args: unknown[]) => Promise<unknown>
      return (...args: unknown[]) =>
        guarded(faults, `backend.${String(name)}`, args, ["error", "error-after", "hang"], () =>
          method(...args),
        )
    },
  })
}
