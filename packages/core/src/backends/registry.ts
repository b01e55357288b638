/**
 * Backend registry: config `type` → factory. The switch is exhaustive: adding a type to the config
 * union without a factory fails to compile. Platform SDKs are loaded inside their backend modules, so
 * a function that never touches Slurm never loads ssh2.
 */
import type { Backend } from "../model/backend"
import type { JobSpec } from "../model/job"
import type { Runtime } from "../runtime"
import type { FieldIssue } from "../util/errors"
import type { ServingBackend, TaskBackend } from "./protocol"
import { SlurmBackend } from "./slurm/backend"
import { slurmJobIssues } from "./slurm/validate"
import { UnavailableBackend } from "./unavailable"
import { WorkersBackend } from "./workers/backend"

export type AnyBackend = TaskBackend & ServingBackend

export function createBackend(backend: Backend, runtime: Runtime): AnyBackend {
  const config = backend.config
  let instance: AnyBackend
  switch (config.type) {
    case "workers":
      instance = WorkersBackend({ ...backend, config })
      break
    case "slurm":
      instance = SlurmBackend({ ...backend, config })
      break
    case "lepton":
    case "eks":
      instance = UnavailableBackend(backend)
      break
    default: {
      const unknown: never = config
      throw new Error(`no backend factory for config type ${JSON.stringify(unknown)}`)
    }
  }
  instance.bindRuntime(runtime)
  return instance
}

/**
 * Use a backend for one request and close it after (a Slurm backend holds an SSH connection, kept
 * alive by keepalives, until it is closed).
 */
export async function withBackend<T>(
  backend: Backend,
  runtime: Runtime,
  use: (instance: AnyBackend) => Promise<T>,
): Promise<T> {
  const instance = createBackend(backend, runtime)
  try {
    return await use(instance)
  } finally {
    await instance.close()
  }
}

/** What a job spec asks that this backend type cannot take (each with its field path); none: fine. */
export function jobSpecIssues(backend: Backend, spec: JobSpec): FieldIssue[] {
  switch (backend.config.type) {
    case "slurm":
      return slurmJobIssues(spec)
    default:
      return []
  }
}
