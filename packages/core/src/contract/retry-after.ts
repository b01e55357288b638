/** `Retry-After` as every client of ours reads it (the CLI and the agent reach it through the contract). */
export { RetryAfterCapMs, retryAfterMs } from "../util/retry-after"
