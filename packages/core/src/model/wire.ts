/**
 * What the API answers about a backend beyond its record: its descriptor, live health, capacity, the
 * autoscaler's decisions (`GET /v1/backends/{id}/status`) and task output tails (`.../logs`). Plain
 * types: backends produce them (backends/protocol.ts), the API passes them through, the CLI reads them.
 */
import type { BackendKind } from "./states"

/** What a backend is, for the scheduler, the dashboard and the CLI. */
export interface BackendDescriptor {
  backendId: string
  kind: BackendKind
  /** Attribute values the backend's capacity can satisfy, e.g. `{ accelerator: ["h100"] }`. */
  advertisedAttributes: Record<string, string[]>
  scaleGroups: string[]
  displayName: string
}

export interface ScaleGroupStatus {
  group: string
  min: number
  max: number
  /** Workers registered (healthy) and instances still starting. */
  current: number
  starting: number
  /** Workers the pending work needs in this group (dry-run placement). */
  demand: number
  target: number
  action: "none" | "scale_up" | "scale_down" | "blocked"
  /** In words: why this decision, e.g. `3 tasks need 2 more workers; rate limit allows 1 this minute`. */
  reason: string
  backoffUntil?: string
}

export interface BackendStatus {
  healthy: boolean
  message?: string
  /** Delegated backends: queues, partitions, node groups; worker-daemon: workers by health. */
  detail: Record<string, unknown>
}

export interface ResourceCapacity {
  total: { cpu: number; memoryMiB: number; gpu: number }
  free: { cpu: number; memoryMiB: number; gpu: number }
}

export interface LogTail {
  attemptUid: string
  lines: string[]
  /** True when older output was dropped. */
  truncated: boolean
  updatedAt?: string
}
