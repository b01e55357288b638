/**
 * Backend registry: each implemented config `type` → its factory, one line per type. A type of the
 * config union without a line here is not available in this release: registering one is refused
 * (`backend.not_available`), and one stored by an earlier release is reported in its backend's status
 * by every pass instead of being looked after. Platform SDKs are loaded inside their backend modules,
 * so a function that never touches Slurm never loads ssh2.
 */

import type { Backend, BackendConfigOf } from "../model/backend"
import type { JobSpec } from "../model/job"
import type { BackendType } from "../model/states"
import { type FieldIssue, VisibleError } from "../util/errors"
import { EksBackend } from "./eks/backend"
import { eksJobIssues } from "./eks/spec"
import { LeptonBackend } from "./lepton/backend"
import type { BackendDeps, BackendFactory, TaskBackend } from "./protocol"
import { SlurmBackend } from "./slurm/backend"
import { slurmJobIssues } from "./slurm/validate"
import { WorkersBackend } from "./workers/backend"

interface Entry<T extends BackendType> {
  create: BackendFactory<BackendConfigOf<T>>
  /** What a job spec asks that this type cannot take (each with its field path), checked at the API. */
  jobSpecIssues?: (spec: JobSpec) => FieldIssue[]
}

const implemented: { [T in BackendType]?: Entry<T> } = {
  workers: { create: WorkersBackend },
  slurm: { create: SlurmBackend, jobSpecIssues: slurmJobIssues },
  lepton: { create: LeptonBackend },
  eks: { create: EksBackend, jobSpecIssues: eksJobIssues },
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
export function createBackend(backend: Backend, runtime: BackendDeps): TaskBackend {
  return entryOf(backend.config.type).create(backend, runtime)
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
  const instance = createBackend(backend, runtime)
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
