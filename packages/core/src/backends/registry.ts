/**
 * Backend registry: each implemented config `type` → its factory, one line per type. A type of the
 * config union without a line here is not available in this release: registering one is refused
 * (`backend.not_available`), and one stored by an earlier release is reported in its backend's status
 * by every pass instead of being looked after. Each backend's module is loaded on first use (and its
 * platform SDKs inside it), so a function that never touches Slurm never loads its code or ssh2, and a
 * cold start pays for no backend it does not use. Job spec checks are small and stay at hand.
 */

import type { Backend, BackendConfigOf } from "../model/backend"
import type { JobSpec } from "../model/job"
import type { BackendType } from "../model/states"
import { type FieldIssue, VisibleError } from "../util/errors"
import { eksJobIssues } from "./eks/spec"
import type { BackendDeps, BackendFactory, TaskBackend } from "./protocol"
import { slurmJobIssues } from "./slurm/validate"

interface Entry<T extends BackendType> {
  /** The backend's factory, from its module loaded on first use. */
  load: () => Promise<BackendFactory<BackendConfigOf<T>>>
  /** What a job spec asks that this type cannot take (each with its field path), checked at the API. */
  jobSpecIssues?: (spec: JobSpec) => FieldIssue[]
}

const implemented: { [T in BackendType]?: Entry<T> } = {
  workers: { load: async () => (await import("./workers/backend")).WorkersBackend },
  slurm: { load: async () => (await import("./slurm/backend")).SlurmBackend, jobSpecIssues: slurmJobIssues },
  lepton: { load: async () => (await import("./lepton/backend")).LeptonBackend },
  eks: { load: async () => (await import("./eks/backend")).EksBackend, jobSpecIssues: eksJobIssues },
}

/** The types this release implements, e.g. for an error message. */
export const availableTypes = (Object.keys(implemented) as BackendType[]).sort()

/** A backend of a type this release has no implementation of. */
export class BackendNotAvailableError extends VisibleError {
  constructor(type: string) {
    super(
      "backend.not_available",
      `the ${type} backend is not available in this release; available types: ${availableTypes.join(", ")}`,
      422,
      { type, available: availableTypes },
    )
    this.name = "BackendNotAvailableError"
  }
}

function entryOf(type: BackendType): Entry<BackendType> {
  // The map ties each type to its own factory; a lookup by a type known only at run time cannot say so.
  const entry = implemented[type] as Entry<BackendType> | undefined
  if (!entry) throw new BackendNotAvailableError(type)
  return entry
}

/** Refuse a type this release does not implement (before anything is written). */
export function assertAvailable(type: BackendType): void {
  entryOf(type)
}

/** Build the backend for one invocation; the caller closes it. Throws `backend.not_available` for a type with no factory. */
export async function createBackend(backend: Backend, runtime: BackendDeps): Promise<TaskBackend> {
  const create = await entryOf(backend.config.type).load()
  return create(backend, runtime)
}

/**
 * Use a backend for one request and close it after (a Slurm backend holds an SSH connection, kept
 * alive by keepalives, until it is closed).
 */
export async function withBackend<T>(
  backend: Backend,
  runtime: BackendDeps,
  use: (instance: TaskBackend) => Promise<T>,
): Promise<T> {
  const instance = await createBackend(backend, runtime)
  try {
    return await use(instance)
  } finally {
    await instance.close()
  }
}

/** What a job spec asks that this backend's type cannot take (each with its field path); none: fine. */
export function jobSpecIssues(backend: Backend, spec: JobSpec): FieldIssue[] {
  return implemented[backend.config.type]?.jobSpecIssues?.(spec) ?? []
}
