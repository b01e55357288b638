/** The part of autocannon 8 (which ships no types) that `bench/load.ts` uses. */
declare module "autocannon" {
  export interface Request {
    method?: string
    path?: string
    headers?: Record<string, string>
    body?: string
    setupRequest?: (request: Request, context: Record<string, unknown>) => Request
    onResponse?: (status: number, body: string, context: Record<string, unknown>) => void
  }
  export interface Options {
    url: string
    connections?: number
    duration?: number
    overallRate?: number
    timeout?: number
    method?: string
    headers?: Record<string, string>
    body?: string
    requests?: Request[]
  }
  export interface Histogram {
    average: number
    p50: number
    p99: number
    max: number
  }
  export interface Result {
    latency: Histogram
    requests: { total: number; average: number }
    errors: number
    timeouts: number
    non2xx: number
    statusCodeStats: Record<string, { count: number }>
  }
  function autocannon(options: Options): Promise<Result> & { stop(): void }
  export default autocannon
}
