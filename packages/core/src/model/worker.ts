/**
 * Workers of `workers` (worker-daemon) backends: they register, then heartbeat with the attempts they
 * observe; each heartbeat's answer is the complete desired set of attempts (pull-based, so the control
 * plane never has to reach a worker).
 */
import { z } from "@hono/zod-openapi"
import { Attributes, Command, Env, Name, Resources, Timestamp } from "./common"
import { AttemptState, WorkerHealth } from "./states"

export const RegisterWorkerRequest = z
  .object({
    backendId: Name.describe("The `workers` backend this worker serves."),
    scaleGroup: Name.optional().describe(
      "Scale group that started the worker; absent for hand-started workers.",
    ),
    name: z.string().max(128).optional().describe("Host name or label, for display."),
    address: z
      .string()
      .max(256)
      .optional()
      .describe("`host:port` where the worker's router or replicas can be reached."),
    resources: Resources.describe("Resources the worker offers."),
    attributes: Attributes.default({}).describe(
      'Attributes the worker advertises, e.g. `{ "accelerator": "h100" }`.',
    ),
    agentVersion: z.string().max(64).optional().describe("Version of the agent."),
  })
  .strict()
  .openapi("RegisterWorkerRequest")

export const Worker = z
  .object({
    id: z.string().describe("Worker id."),
    project: Name.describe("Project the worker belongs to."),
    backendId: Name.describe("Backend the worker serves."),
    scaleGroup: Name.optional().describe("Scale group that started it."),
    name: z.string().optional().describe("Host name or label."),
    address: z.string().optional().describe("`host:port` of the worker."),
    resources: Resources.describe("Resources it offers."),
    attributes: Attributes.describe("Attributes it advertises."),
    health: WorkerHealth.describe(
      "`healthy`, `suspect` (late heartbeat) or `dead` (silent past the grace period).",
    ),
    lastSeen: Timestamp.describe("Time of the last heartbeat."),
    registeredAt: Timestamp.describe("When it registered."),
    agentVersion: z.string().optional().describe("Version of the agent."),
  })
  .openapi("Worker")
export type Worker = z.infer<typeof Worker>

export const ObservedAttempt = z
  .object({
    attemptUid: z.string().max(128).describe("Attempt the worker runs or ran."),
    state: AttemptState.describe("What the worker sees of it."),
    exitCode: z.number().int().optional().describe("Exit code, once it exited."),
    message: z.string().max(4096).optional().describe("Detail, e.g. the last line of output."),
  })
  .strict()
  .openapi("ObservedAttempt")

export const HeartbeatRequest = z
  .object({
    attempts: z
      .array(ObservedAttempt)
      .max(1024)
      .default([])
      .describe("Every attempt the worker currently knows of."),
  })
  .strict()
  .openapi("HeartbeatRequest")

export const DesiredAttempt = z
  .object({
    attemptUid: z.string().describe("Attempt id."),
    action: z.enum(["run", "stop"]).describe("`run`: keep it running (start it if new); `stop`: kill it."),
    jobId: z.string().describe("Job of the attempt."),
    taskIndex: z.number().int().describe("Task index (`SHARD_ID`)."),
    command: Command.optional().describe("Command to run (for `run`)."),
    env: Env.optional().describe("Environment to run with (for `run`)."),
  })
  .openapi("DesiredAttempt")

export const HeartbeatResponse = z
  .object({
    desired: z.array(DesiredAttempt).describe("The complete desired set of attempts on this worker."),
    heartbeatIntervalS: z.number().int().describe("When to send the next heartbeat."),
  })
  .openapi("HeartbeatResponse")

export const RegisterWorkerResponse = z
  .object({
    worker: Worker.describe("The registered worker."),
    heartbeatIntervalS: z.number().int().describe("How often to heartbeat, seconds."),
  })
  .openapi("RegisterWorkerResponse")
