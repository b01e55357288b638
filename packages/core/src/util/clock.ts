/** Time, injected everywhere so tests never sleep: `systemClock` in production, `FakeClock` in tests. */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number
  /** Resolves after `ms` of this clock's time. */
  sleep(ms: number): Promise<void>
}

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
}

/** A clock that only moves when told to; `sleep` advances it at once, so polling loops finish instantly. */
export class FakeClock implements Clock {
  constructor(private current = Date.parse("2026-01-01T00:00:00Z")) {}
  now(): number {
    return this.current
  }
  advance(ms: number): void {
    this.current += ms
  }
  async sleep(ms: number): Promise<void> {
    this.current += ms
    await Promise.resolve()
  }
}

/** ISO-8601 text of a clock reading. */
export function iso(ms: number): string {
  return new Date(ms).toISOString()
}
