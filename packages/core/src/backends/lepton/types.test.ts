/**
 * The response schemas on the contract's own examples (backend-contracts.md Part A.1, A.5, A.6): every
 * example parses, unknown fields are kept, and what swarmplane reads comes out.
 */
import { describe, expect, test } from "vitest"
import { ErrorBody, JobPage, LeptonDeployment, LeptonJob, Readiness, Replica, WorkspaceInfo } from "./types"

const workspace = {
  build_time: "2026-07-01T00:00:00Z",
  git_commit: "1.2.3",
  workspace_name: "my-ws",
  workspace_tier: "enterprise",
  workspace_state: "normal",
  supported_shapes: {
    "gpu.8xh100-80gb": {
      description: "8 x H100",
      cpu: 128,
      memory: 1000000,
      accelerator_type: "NVIDIA-H100-80GB",
      accelerator_num: 8,
    },
  },
  workspace_disk_usage_bytes: 0,
  workloads: { num_deployments: 1, num_jobs: 2, num_pods: 0, num_secrets: 0, num_image_pull_secrets: 0 },
  resource_quota: {
    limit: { cpu: 512, memory: 4000000, accelerator_num: 32 },
    used: { cpu: 0, memory: 0, accelerator_num: 0 },
  },
}

const deployment = {
  metadata: {
    id: "llm-a",
    name: "llm-a",
    created_at: 1720000000000,
    version: 3,
    created_by: "a@b.c",
    labels: { k: "v" },
    visibility: "private",
    replica_version: "abc",
  },
  spec: { container: { image: "nvcr.io/nim/meta/llama3:latest" } },
  status: {
    state: "Ready",
    endpoint: {
      internal_endpoint: "http://...",
      external_endpoint: "https://ws123-my-ep.xenon.lepton.run",
      custom_external_endpoint: [],
    },
    container_port_status: [
      { name: "http", container_port: 8080, host_port: null, external_endpoint: null, protocol: "TCP" },
    ],
    autoscaler_status: {
      desired_replicas: 1,
      last_transition_time: 1720000000,
      conditions: [{ type: "...", status: "True", last_transition_time: 1720000000, message: "" }],
    },
    is_system: false,
  },
}

const job = {
  metadata: { id: "my-job-xyz", name: "my-job" },
  spec: { resource_shape: "gpu.8xh100-80gb", completions: 2, parallelism: 2, stopped: null },
  status: {
    job_name: "my-job-xyz",
    state: "Running",
    ready: 2,
    active: 2,
    failed: 0,
    succeeded: 0,
    creation_time: 1720000000,
    completion_time: null,
    job_history: [
      {
        job_name: "my-job-xyz",
        state: "Failed",
        ready: 0,
        active: 0,
        failed: 2,
        succeeded: 0,
        creation_time: 1,
        completion_time: 2,
      },
    ],
  },
}

describe("the contract's examples", () => {
  test("workspace info: its name, state, shapes and quota", () => {
    const info = WorkspaceInfo.parse(workspace)
    expect(info.workspace_state).toBe("normal")
    expect(info.supported_shapes?.["gpu.8xh100-80gb"]?.accelerator_num).toBe(8)
    expect(info.resource_quota?.limit?.accelerator_num).toBe(32)
    expect((info as Record<string, unknown>).workloads).toEqual(workspace.workloads)
  })

  test("a deployment: state, endpoint and desired replicas, with its other fields kept", () => {
    const got = LeptonDeployment.parse(deployment)
    expect(got.status?.state).toBe("Ready")
    expect(got.status?.endpoint?.external_endpoint).toBe("https://ws123-my-ep.xenon.lepton.run")
    expect(got.status?.autoscaler_status?.desired_replicas).toBe(1)
    expect((got.status as Record<string, unknown>).is_system).toBe(false)
  })

  test('"Not Ready" (with its space) and "" are read as they are', () => {
    for (const state of ["Not Ready", ""])
      expect(
        LeptonDeployment.parse({ ...deployment, status: { ...deployment.status, state } }).status?.state,
      ).toBe(state)
  })

  test("a job: counts and history; a page as an object or a bare array", () => {
    const got = LeptonJob.parse(job)
    expect([got.status?.state, got.status?.ready, got.status?.active]).toEqual(["Running", 2, 2])
    expect(got.status?.job_history?.[0]?.failed).toBe(2)
    expect(JobPage.parse({ jobs: [job], total: 1 })).toMatchObject({
      jobs: [{ metadata: { id: "my-job-xyz" } }],
    })
    expect(JobPage.parse([job])).toHaveLength(1)
  })

  test("readiness, replicas and the error body", () => {
    const readiness = Readiness.parse({
      "llm-a-7f9c-xyz": [
        { reason: "NoCapacity", message: "no node", creationTimestamp: "2026-07-01T00:00:00Z" },
      ],
    })
    expect(readiness["llm-a-7f9c-xyz"]?.[0]?.reason).toBe("NoCapacity")
    const replica = Replica.parse({
      metadata: { id: "llm-a-7f9c-xyz" },
      id: "llm-a-7f9c-xyz",
      status: { public_ip: "1.2.3.4", node: { name: "node-1", id: "node-1" }, domains: [{ name: "x" }] },
    })
    expect(replica.status?.node?.name).toBe("node-1")
    expect(ErrorBody.parse({ code: "InvalidRequest", message: "no valid field to update" }).code).toBe(
      "InvalidRequest",
    )
  })

  test("a deployment without metadata.id is refused: swarmplane cannot tell which it is", () => {
    expect(LeptonDeployment.safeParse({ ...deployment, metadata: { name: "x" } }).success).toBe(false)
  })
})
