/** The deployment and job bodies sent to Lepton, checked field by field against the contract's shapes. */
import { describe, expect, test } from "vitest"
import { LeptonBackendConfig } from "../../model/backend"
import { JobRequest, JobSpec, specOf } from "../../model/job"
import { type Swarm, SwarmSpec } from "../../model/swarm"
import {
  DefaultJobImage,
  deploymentBody,
  deploymentName,
  jobBody,
  jobName,
  type LeptonConfig,
  MaxNameLength,
} from "./spec"

const config = LeptonBackendConfig.parse({
  type: "lepton",
  workspaceId: "ws123",
  tokenSecret: "lepton/token",
  nodeGroup: "ng-abc123",
  resourceShape: "gpu.8xh100-80gb",
  priorityClass: "high-7000",
  canBePreempted: true,
  mounts: [{ path: "/shared/models", from: "node-nfs:shared", mountPath: "/models", readOnly: true }],
  imagePullSecrets: ["ngc"],
  envSecrets: { HF_TOKEN: "hf-token" },
  endpointTokenSecret: "llm-endpoint-token",
}) as LeptonConfig

function swarm(fields: Record<string, unknown> = {}): Swarm {
  return {
    ...SwarmSpec.parse({
      name: "llama-70b",
      model: "meta-llama/Llama-3.1-70B",
      replicas: 2,
      env: { A: "1" },
      ...fields,
    }),
    project: "team-a",
    phase: "PENDING",
    desired: "running",
    generation: 1,
    observedGeneration: 0,
    replicaStatus: { ready: 0, total: 2, items: [] },
    createdAt: "2026-01-01T00:00:00.000Z",
    updatedAt: "2026-01-01T00:00:00.000Z",
  }
}

const envOf = (envs: { name: string }[]) => Object.fromEntries(envs.map((e) => [e.name, e]))

describe("names", () => {
  test("are deterministic, Lepton-safe and bounded", () => {
    const s = swarm()
    expect(deploymentName("team-a", s)).toBe(deploymentName("team-a", swarm()))
    expect(jobName("a-01kb2x9q3v0000d4m8n0")).toBe(jobName("a-01kb2x9q3v0000d4m8n0"))
    const long = "x".repeat(63)
    for (const name of [
      deploymentName("team-a", s),
      deploymentName("p", swarm({ name: long })),
      jobName("a-01kb2x9q3v0000d4m8n0"),
      jobName("A_weird/UID--with..dots"),
      jobName(""),
    ]) {
      expect(name.length, name).toBeLessThanOrEqual(MaxNameLength)
      expect(name, name).toMatch(/^[a-z]([a-z0-9-]*[a-z0-9])?$/)
      expect(name, name).not.toContain("--")
    }
    expect(jobName("a-01kb2x9q3v0000d4m8n0")).toMatch(/^sp-a-01kb2x9q3v0000d4m8n0-[0-9a-f]{8}$/)
  })

  test("differ where the objects differ: project, swarm incarnation, attempt, names cut alike", () => {
    const s = swarm()
    const names = new Set([
      deploymentName("team-a", s),
      deploymentName("team-b", s),
      deploymentName("team-a", { ...s, createdAt: "2026-02-01T00:00:00.000Z" }),
      deploymentName("a-b", swarm({ name: "c" })),
      deploymentName("a", swarm({ name: "b-c" })),
      deploymentName("p", swarm({ name: `${"x".repeat(40)}1` })),
      deploymentName("p", swarm({ name: `${"x".repeat(40)}2` })),
    ])
    expect(names.size).toBe(7)
    expect(jobName("a-1")).not.toBe(jobName("a-2"))
  })
})

describe("the deployment of a swarm", () => {
  test("carries the swarm's container, replicas, placement, queue, mounts and env, and no secret value", () => {
    const s = swarm({ serving: { lepton: { resourceShape: "gpu.1xh100-80gb" } } })
    const body = deploymentBody({ project: "team-a", swarm: s, config, nodeGroupId: "ng-resolved" })
    const name = deploymentName("team-a", s)
    expect(body.metadata).toMatchObject({ id: name, name })
    expect(body.spec.container).toEqual({
      image: "vllm/vllm-openai:latest",
      command: ["sh", "-c", 'exec vllm serve "$MODEL" --host 0.0.0.0 --port "$PORT" "$@"', "vllm"],
      ports: [{ name: "http", container_port: 8000, protocol: "TCP", expose_strategies: ["IngressProxy"] }],
    })
    expect(body.spec.resource_requirement).toEqual({
      resource_shape: "gpu.1xh100-80gb",
      min_replicas: 2,
      max_replicas: 2,
      affinity: { allowed_dedicated_node_groups: ["ng-resolved"] },
    })
    expect(body.spec.auto_scaler).toBeUndefined()
    expect(body.spec.api_tokens).toEqual([{ value_from: { token_name_ref: "llm-endpoint-token" } }])
    expect(body.spec.queue_config).toEqual({
      priority_class: "high-7000",
      can_be_preempted: true,
      can_preempt: false,
    })
    expect(body.spec.mounts).toEqual([
      {
        path: "/shared/models",
        from: "node-nfs:shared",
        mount_path: "/models",
        mount_options: { read_only: true },
      },
    ])
    expect(body.spec.image_pull_secrets).toEqual(["ngc"])
    expect(envOf(body.spec.envs)).toEqual({
      A: { name: "A", value: "1" },
      HF_TOKEN: { name: "HF_TOKEN", value_from: { secret_name_ref: "hf-token" } },
      MODEL: { name: "MODEL", value: "meta-llama/Llama-3.1-70B" },
      PORT: { name: "PORT", value: "8000" },
    })
  })

  test("an autoscaled swarm gives Lepton its range; a backend without an endpoint token serves in public", () => {
    const s = swarm({ autoscaling: { minReplicas: 1, maxReplicas: 4, scaleDownDelayS: 600 } })
    const open = { ...config, endpointTokenSecret: undefined }
    const body = deploymentBody({ project: "team-a", swarm: s, config: open })
    expect(body.spec.resource_requirement).toMatchObject({
      resource_shape: "gpu.8xh100-80gb",
      min_replicas: 1,
      max_replicas: 4,
      affinity: { allowed_dedicated_node_groups: ["ng-abc123"] },
    })
    expect(body.spec.auto_scaler).toEqual({ scale_down: { no_traffic_timeout: 600 } })
    expect(body.spec.api_tokens).toEqual([])
  })

  test("the swarm's own command and image, and the echo server, are used as they are", () => {
    const own = deploymentBody({
      project: "p",
      swarm: swarm({ image: "ghcr.io/me/server:1", command: ["serve"], args: ["--fast"] }),
      config,
    })
    expect(own.spec.container.image).toBe("ghcr.io/me/server:1")
    expect(own.spec.container.command).toEqual(["serve", "--fast"])
    const echo = deploymentBody({ project: "p", swarm: swarm({ model: "echo" }), config })
    expect(echo.spec.container.command).toEqual(["swarmplane-agent", "echo-server"])
  })
})

describe("the job of a task attempt", () => {
  const spec = JobSpec.parse({ command: ["python", "infer.py"], tasks: 4, env: { MODE: "fast" } })
  const job = { id: "job-01kb", project: "team-a", spec }

  test("runs the command once, with the shard, attempt and swarm env, in the node group and queue", () => {
    const body = jobBody({
      job,
      taskIndex: 2,
      attemptUid: "a-01kb2x9q3v0000d4m8n0",
      config,
      swarmUrl: "https://ws123-llm.xenon.lepton.run",
    })
    expect(body.metadata).toMatchObject({
      id: jobName("a-01kb2x9q3v0000d4m8n0"),
      name: jobName("a-01kb2x9q3v0000d4m8n0"),
    })
    expect(body.metadata.labels).toEqual({
      "swarmplane-project": "team-a",
      "swarmplane-job": "job-01kb",
      "swarmplane-attempt": "a-01kb2x9q3v0000d4m8n0",
    })
    expect(body.spec).toMatchObject({
      resource_shape: "gpu.8xh100-80gb",
      affinity: { allowed_dedicated_node_groups: ["ng-abc123"] },
      container: { image: DefaultJobImage, command: ["python", "infer.py"] },
      completions: 1,
      parallelism: 1,
      image_pull_secrets: ["ngc"],
      queue_config: { priority_class: "high-7000", can_be_preempted: true, can_preempt: false },
      max_failure_retry: 0,
    })
    expect(body.spec.mounts).toEqual([
      {
        path: "/shared/models",
        from: "node-nfs:shared",
        mount_path: "/models",
        mount_options: { read_only: true },
      },
    ])
    expect(envOf(body.spec.envs)).toEqual({
      MODE: { name: "MODE", value: "fast" },
      HF_TOKEN: { name: "HF_TOKEN", value_from: { secret_name_ref: "hf-token" } },
      SHARD_ID: { name: "SHARD_ID", value: "2" },
      NSHARDS: { name: "NSHARDS", value: "4" },
      ATTEMPT_UID: { name: "ATTEMPT_UID", value: "a-01kb2x9q3v0000d4m8n0" },
      SWARM_ENDPOINT: { name: "SWARM_ENDPOINT", value: "https://ws123-llm.xenon.lepton.run" },
    })
  })

  test("swarmplane's own variables win over the user's, and no SWARM_ENDPOINT without a URL", () => {
    const clash = { ...job, spec: { ...spec, env: { SHARD_ID: "99" } } }
    const body = jobBody({ job: clash, taskIndex: 0, attemptUid: "a-1", config })
    const env = envOf(body.spec.envs)
    expect(env.SHARD_ID).toEqual({ name: "SHARD_ID", value: "0" })
    expect(env.SWARM_ENDPOINT).toBeUndefined()
    expect(body.spec.envs.filter((e) => e.name === "SHARD_ID")).toHaveLength(1)
  })

  test("the backend's plain env reaches every job and deployment; the job's or swarm's own wins on a clash", () => {
    const withEnv = { ...config, env: { HF_HOME: "/models/hf", A: "backend" } } as LeptonConfig
    const clash = { ...job, spec: { ...spec, env: { A: "job" } } }
    const jobEnv = envOf(jobBody({ job: clash, taskIndex: 0, attemptUid: "a-1", config: withEnv }).spec.envs)
    expect(jobEnv.HF_HOME).toEqual({ name: "HF_HOME", value: "/models/hf" })
    expect(jobEnv.A).toEqual({ name: "A", value: "job" })
    const deployEnv = envOf(
      deploymentBody({ project: "team-a", swarm: swarm({ env: {} }), config: withEnv }).spec.envs,
    )
    expect(deployEnv.HF_HOME).toEqual({ name: "HF_HOME", value: "/models/hf" })
    expect(deployEnv.A).toEqual({ name: "A", value: "backend" })
    expect(envOf(deploymentBody({ project: "team-a", swarm: swarm(), config: withEnv }).spec.envs).A).toEqual(
      { name: "A", value: "1" },
    )
  })

  test("a batch shard runs the agent's batch runner the way the backend's image runs the agent", () => {
    const batch = {
      id: "job-batch",
      project: "team-a",
      spec: specOf(
        JobRequest.parse({
          swarm: "llm",
          tasks: 4,
          batch: { input: "/data/rows.jsonl", output: "/data/out" },
        }),
      ),
    }
    const agentCommand = ["node", "/shared/swarmplane-agent.mjs"]
    const own = { ...config, agentCommand }
    const command =
      jobBody({ job: batch, taskIndex: 1, attemptUid: "a-2", config: own }).spec.container.command ?? []
    expect(command.slice(0, 3)).toEqual(["node", "/shared/swarmplane-agent.mjs", "run-batch"])
    expect(command.slice(2)).toEqual(batch.spec.command.slice(1))
    // By default the image is expected to have the agent on its PATH.
    expect(config.agentCommand).toEqual(["swarmplane-agent"])
    expect(jobBody({ job: batch, taskIndex: 1, attemptUid: "a-2", config }).spec.container.command).toEqual(
      batch.spec.command,
    )
    // Its runner prints progress lines for the backend to read in its log; a plain job is not told to.
    expect(envOf(jobBody({ job: batch, taskIndex: 1, attemptUid: "a-2", config }).spec.envs)).toMatchObject({
      SWARMPLANE_PROGRESS_STDOUT: { name: "SWARMPLANE_PROGRESS_STDOUT", value: "1" },
    })
    expect(
      envOf(jobBody({ job, taskIndex: 0, attemptUid: "a-1", config }).spec.envs).SWARMPLANE_PROGRESS_STDOUT,
    ).toBeUndefined()
    // Only a leading `swarmplane-agent` is the agent: a user's command that mentions it later is theirs.
    const mention = { ...job, spec: { ...spec, command: ["echo", "swarmplane-agent"] } }
    expect(
      jobBody({ job: mention, taskIndex: 0, attemptUid: "a-3", config: own }).spec.container.command,
    ).toEqual(["echo", "swarmplane-agent"])
  })
})
