/**
 * The single-table key scheme (DESIGN.md §5). Every key of every item is built here, so the layout
 * can be read in one place:
 *
 * | item        | pk                         | sk              | gsi1 (active)                     | gsi2 (list)              |
 * |-------------|----------------------------|-----------------|-----------------------------------|--------------------------|
 * | project     | `PROJECTS`                 | `<p>`           |                                   |                          |
 * | api key     | `KEY#<hmac>`               | `KEY`           |                                   | `P#<p>#KEYS` / id        |
 * | backend     | `BACKENDS`                 | `<p>#<id>`      |                                   |                          |
 * | swarm       | `P#<p>#SWARM#<name>`       | `A#SWARM`       | `ACTIVE#<p>#<b>#<n>` / `swarm#..` | `P#<p>#SWARMS` / name    |
 * | swarm metrics | `P#<p>#SWARM#<name>`     | `M#ROUTER`      |                                   |                          |
 * | job         | `P#<p>#JOB#<id>`           | `A#JOB`         | `ACTIVE#<p>#<b>#<n>` / `job#..`   | `P#<p>#JOBS` / id        |
 * | task        | `P#<p>#JOB#<id>`           | `B#TASK#<00042>`| `ACTIVE#<p>#<b>#<n>` / `task#..`  |                          |
 * | worker      | `P#<p>#WORKER#<id>`        | `A#WORKER`      |                                   | `P#<p>#WORKERS` / b#id   |
 * | log tail    | `P#<p>#JOB#<id>`           | `L#<idx>#<uid>` |                                   |                          |
 * | lease       | `P#<p>#BACKEND#<b>`        | `LEASE#<name>`  |                                   |                          |
 * | event       | (its object's pk)          | `E#<event id>`  |                                   |                          |
 * | idempotency | `P#<p>#IDEM#<sha256(k,key)>`| `IDEM`          |                                   |                          |
 *
 * A task live on a worker (workers backends) is also in gsi2 under `P#<p>#WTASKS#<worker>`: a heartbeat
 * reads exactly that worker's tasks, and one conditional write both assigns a task and tells the worker.
 * A job and its tasks share a partition, so `GET /v1/jobs/{id}` is one query (sk < `C`). Terminal
 * items drop their gsi1 keys, so ticks read O(active), not O(history). The active index is spread
 * over `ActiveShards` partitions per backend so one busy backend does not make a hot partition.
 */
import { createHash } from "node:crypto"
import type { IndexKey, Key } from "./port"

export const ActiveShards = 4

/** Sort keys of a job partition: the job and its tasks sort before `C`; events after `E#`. */
export const JobPartition = { headAndTasksBefore: "C", taskPrefix: "B#TASK#", eventPrefix: "E#" } as const

const pad = (n: number) => n.toString().padStart(5, "0")

function shardOf(id: string): number {
  return createHash("sha1").update(id).digest()[0]! % ActiveShards
}

export const Keys = {
  project: (p: string): Key => ({ pk: "PROJECTS", sk: p }),
  projects: () => "PROJECTS",
  apiKey: (hmac: string): Key => ({ pk: `KEY#${hmac}`, sk: "KEY" }),
  backend: (p: string, id: string): Key => ({ pk: "BACKENDS", sk: `${p}#${id}` }),
  backends: () => "BACKENDS",
  backendEvents: (p: string, id: string) => `P#${p}#BACKEND#${id}`,
  swarm: (p: string, name: string): Key => ({ pk: `P#${p}#SWARM#${name}`, sk: "A#SWARM" }),
  swarmMetrics: (p: string, name: string): Key => ({ pk: `P#${p}#SWARM#${name}`, sk: "M#ROUTER" }),
  job: (p: string, id: string): Key => ({ pk: `P#${p}#JOB#${id}`, sk: "A#JOB" }),
  task: (p: string, jobId: string, index: number): Key => ({
    pk: `P#${p}#JOB#${jobId}`,
    sk: `${JobPartition.taskPrefix}${pad(index)}`,
  }),
  worker: (p: string, id: string): Key => ({ pk: `P#${p}#WORKER#${id}`, sk: "A#WORKER" }),
  /** The hash of the credential a worker got at registration (apart from the worker, which is listed). */
  workerCredential: (p: string, id: string): Key => ({ pk: `P#${p}#WORKER#${id}`, sk: "CRED" }),
  /** Scoped to the API key that sent the request: another key's request with the same header is another request. */
  idempotency: (p: string, apiKeyId: string, key: string): Key => ({
    pk: `P#${p}#IDEM#${createHash("sha256").update(`${apiKeyId}\n${key}`).digest("hex")}`,
    sk: "IDEM",
  }),
  event: (pk: string, eventId: string): Key => ({ pk, sk: `E#${eventId}` }),
  /** The output tail of one attempt, beside its job. */
  log: (p: string, jobId: string, index: number, attemptUid: string): Key => ({
    pk: `P#${p}#JOB#${jobId}`,
    sk: `L#${pad(index)}#${attemptUid}`,
  }),
  /** The per-backend lease of the control loop, with its fencing token. */
  lease: (p: string, backendId: string, name: string): Key => ({
    pk: `P#${p}#BACKEND#${backendId}`,
    sk: `LEASE#${name}`,
  }),
  /** Autoscaler state of a backend (per-group counters, backoff). */
  autoscaler: (p: string, backendId: string): Key => ({
    pk: `P#${p}#BACKEND#${backendId}`,
    sk: "AUTOSCALER",
  }),
} as const

export const ListIndex = {
  keys: (p: string, id: string): IndexKey => ({ pk: `P#${p}#KEYS`, sk: id }),
  keysOf: (p: string) => `P#${p}#KEYS`,
  swarm: (p: string, name: string): IndexKey => ({ pk: `P#${p}#SWARMS`, sk: name }),
  swarmsOf: (p: string) => `P#${p}#SWARMS`,
  job: (p: string, id: string): IndexKey => ({ pk: `P#${p}#JOBS`, sk: id }),
  jobsOf: (p: string) => `P#${p}#JOBS`,
  worker: (p: string, backendId: string, id: string): IndexKey => ({
    pk: `P#${p}#WORKERS`,
    sk: `${backendId}#${id}`,
  }),
  /** A live task on a worker: what a heartbeat reads to build the worker's desired set. */
  workerTask: (p: string, workerId: string, jobId: string, index: number): IndexKey => ({
    pk: `P#${p}#WTASKS#${workerId}`,
    sk: `${jobId}#${pad(index)}`,
  }),
  workerTasksOf: (p: string, workerId: string) => `P#${p}#WTASKS#${workerId}`,
  workersOf: (p: string) => `P#${p}#WORKERS`,
} as const

/** Active-index keys. `ref` is the object's own id (swarm name, job id, `jobId#index` for tasks). */
export const ActiveIndex = {
  swarm: (p: string, backendId: string, name: string): IndexKey => ({
    pk: `ACTIVE#${p}#${backendId}#${shardOf(name)}`,
    sk: `swarm#${name}`,
  }),
  job: (p: string, backendId: string, jobId: string): IndexKey => ({
    pk: `ACTIVE#${p}#${backendId}#${shardOf(jobId)}`,
    sk: `job#${jobId}`,
  }),
  task: (p: string, backendId: string, jobId: string, index: number): IndexKey => ({
    pk: `ACTIVE#${p}#${backendId}#${shardOf(`${jobId}#${index}`)}`,
    sk: `task#${jobId}#${pad(index)}`,
  }),
  /** Every partition of one backend's active work. */
  partitions: (p: string, backendId: string): string[] =>
    Array.from({ length: ActiveShards }, (_, n) => `ACTIVE#${p}#${backendId}#${n}`),
} as const
