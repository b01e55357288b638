/** domyn-swarm's Lepton backend fields against a registered backend: accepted when it has them, else refused. */
import { describe, expect, test } from "vitest"
import { type BackendCheck, checkBackendFields } from "./backend-fields"
import type { Backend } from "./client"

const lepton = (config: Record<string, unknown> = {}): Backend =>
  ({
    id: "lep",
    project: "default",
    kind: "delegated",
    config: {
      type: "lepton",
      workspaceId: "ws1",
      tokenSecret: "lepton-token",
      nodeGroup: "h200-group",
      resourceShape: "gpu.4xh200",
      mounts: [{ path: "/", from: "node-nfs:shared", mountPath: "/mnt/shared", readOnly: false }],
      imagePullSecrets: ["registry"],
      endpointTokenSecret: "endpoint-token",
      ...config,
    },
    status: {},
    createdAt: "2026-01-01T00:00:00Z",
    updatedAt: "2026-01-01T00:00:00Z",
  }) as Backend

const check = (field: BackendCheck["field"], value: unknown): BackendCheck => ({
  path: ["backend", field],
  field,
  value,
})

const cases: Record<string, { check: BackendCheck; backend?: Backend; refused?: RegExp }> = {
  "the same workspace": { check: check("workspaceId", "ws1") },
  "another workspace": {
    check: check("workspaceId", "ws2"),
    refused:
      /backend "lep" has workspaceId "ws1", but this asks for "ws2": .*keeps `workspaceId` on the registered backend/,
  },
  "a node group list that holds the backend's group": {
    check: check("nodeGroup", ["other", "h200-group"]),
  },
  "a node group list without it": {
    check: check("nodeGroup", ["other"]),
    refused: /has nodeGroup "h200-group", but this asks for one of "other"/,
  },
  "a mount the backend has (domyn's snake_case)": {
    check: check("mounts", [{ path: "/", from: "node-nfs:shared", mount_path: "/mnt/shared" }]),
  },
  "a mount read-only where the backend's is not": {
    check: check("mounts", [
      { path: "/", from: "node-nfs:shared", mount_path: "/mnt/shared", mount_options: { read_only: true } },
    ]),
    refused:
      /has 1 mount .* but this asks for \{ path: \/, from: node-nfs:shared, mountPath: \/mnt\/shared, readOnly: true \}/,
  },
  "pull secrets the backend has": { check: check("imagePullSecrets", ["registry"]) },
  "a pull secret it lacks": {
    check: check("imagePullSecrets", ["registry", "other"]),
    refused: /but this asks for "other"/,
  },
  "the endpoint token secret it has": { check: check("endpointTokenSecret", "endpoint-token") },
  "an endpoint token on a backend whose endpoints are public": {
    check: check("endpointTokenSecret", "endpoint-token"),
    backend: lepton({ endpointTokenSecret: undefined }),
    refused: /has no endpointTokenSecret, but this asks for "endpoint-token"/,
  },
}

describe("a file's Lepton backend fields against the backend it runs on", () => {
  for (const [name, tc] of Object.entries(cases))
    test(name, () => {
      const issues = checkBackendFields([tc.check], tc.backend ?? lepton())
      if (!tc.refused) expect(issues).toEqual([])
      else expect(issues).toEqual([{ path: tc.check.path, message: expect.stringMatching(tc.refused) }])
    })

  test("a node group named by its id matches a backend that names it by its name", () => {
    const byId = check("nodeGroup", ["ng-0001"])
    expect(checkBackendFields([byId], lepton(), { id: "ng-0001", name: "h200-group" })).toEqual([])
    expect(checkBackendFields([byId], lepton(), { id: "ng-0002", name: "h200-group" })).toHaveLength(1)
  })
})
