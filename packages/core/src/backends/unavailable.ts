/**
 * A backend type whose implementation is not part of this release. It registers (its config is
 * validated and stored) and answers every call with a typed `backend.not_supported` error, so a
 * tick reports it in the backend's status instead of silently doing nothing.
 */
import { type Backend, kindOfType } from "../model/backend"
import { NotSupportedError } from "../util/errors"
import type { ServingBackend, TaskBackend } from "./protocol"

export function UnavailableBackend(backend: Backend): TaskBackend & ServingBackend {
  const type = backend.config.type
  const no = (capability: string) => async (): Promise<never> => {
    throw new NotSupportedError(type, `${capability} (the ${type} backend is not available in this release)`)
  }
  return {
    descriptor: {
      backendId: backend.id,
      kind: kindOfType[type],
      advertisedAttributes: Object.fromEntries(
        Object.entries(backend.config.attributes ?? {}).map(([k, v]) => [k, [v]]),
      ),
      scaleGroups: [],
      displayName: backend.config.displayName ?? backend.id,
    },
    bindRuntime() {},
    schedule: no("schedule"),
    launch: no("launch"),
    reconcile: no("reconcile"),
    autoscale: no("autoscale"),
    status: no("status"),
    autoscalerStatus: no("autoscalerStatus"),
    resourceCapacity: no("resourceCapacity"),
    runtimeImage: () => undefined,
    getProcessStatus: no("getProcessStatus"),
    profileTask: no("profileTask"),
    execInContainer: no("execInContainer"),
    fetchLogs: no("fetchLogs"),
    seedLiveness: no("seedLiveness"),
    runTeardown: no("runTeardown"),
    teardown: no("teardown"),
    pruneDeadWorkers: no("pruneDeadWorkers"),
    close: async () => {},
    createOrUpdate: no("createOrUpdate"),
    servingStatus: no("servingStatus"),
    delete: no("delete"),
  }
}
