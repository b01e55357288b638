/** The domyn-swarm mapping, table by table (docs/cli.md has the same table), sizes and argument splitting. */
import { describe, expect, test } from "vitest"
import type { Issue } from "./normalize"
import { normaliseSwarm, sizeMiB, splitArgs } from "./swarm-file"

const base = { name: "llama", model: "meta-llama/Llama-3.1-8B-Instruct" }

/** domyn-swarm field(s) → the swarmplane fields they become (docs/cli.md has the same table). */
const mapping: Record<string, { domyn: Record<string, unknown>; swarmplane: Record<string, unknown> }> = {
  "replicas and gpus_per_replica": {
    domyn: { replicas: 4, gpus_per_replica: 2 },
    swarmplane: { replicas: 4, gpusPerReplica: 2 },
  },
  "cpus_per_task → cpusPerReplica": { domyn: { cpus_per_task: 8 }, swarmplane: { cpusPerReplica: 8 } },
  "cpus_per_replica (snake_case of swarmplane's own field)": {
    domyn: { cpus_per_replica: 2 },
    swarmplane: { cpusPerReplica: 2 },
  },
  "mem_per_replica as a size": {
    domyn: { mem_per_replica: "16G" },
    swarmplane: { memoryMiBPerReplica: 16384 },
  },
  "mem_per_replica in MiB": { domyn: { mem_per_replica: 2048 }, swarmplane: { memoryMiBPerReplica: 2048 } },
  memory_mib_per_replica: {
    domyn: { memory_mib_per_replica: 512 },
    swarmplane: { memoryMiBPerReplica: 512 },
  },
  "mem_per_cpu × cpus_per_task": {
    domyn: { cpus_per_task: 4, mem_per_cpu: "8GB" },
    swarmplane: { cpusPerReplica: 4, memoryMiBPerReplica: 32768 },
  },
  "args as a string, split like a shell": {
    domyn: { args: "--max-model-len 8192 --served-model-name 'llama 8b'" },
    swarmplane: { args: ["--max-model-len", "8192", "--served-model-name", "llama 8b"] },
  },
  "args as a list": { domyn: { args: ["--enforce-eager"] }, swarmplane: { args: ["--enforce-eager"] } },
  "revision → --revision in args": {
    domyn: { args: "--enforce-eager", revision: "v2" },
    swarmplane: { args: ["--enforce-eager", "--revision", "v2"] },
  },
  "image, port, env (keys kept as written)": {
    domyn: { image: "vllm/vllm-openai:v0.6", port: 8080, env: { HF_HOME: "/hf", vllm_flag: "1" } },
    swarmplane: { image: "vllm/vllm-openai:v0.6", port: 8080, env: { HF_HOME: "/hf", vllm_flag: "1" } },
  },
  "health_path and labels": {
    domyn: { health_path: "/v1/models", labels: { team_name: "ml" } },
    swarmplane: { healthPath: "/v1/models", labels: { team_name: "ml" } },
  },
  "backend slurm: partition, time_limit, endpoint.port, id": {
    domyn: {
      backend: {
        type: "slurm",
        id: "hpc-a",
        partition: "gpu",
        time_limit: "04:00:00",
        endpoint: { port: 9000 },
      },
    },
    swarmplane: {
      backendId: "hpc-a",
      backendType: "slurm",
      serving: { slurm: { partition: "gpu", timeLimit: "04:00:00", routerPort: 9000 } },
    },
  },
  "backend lepton: resource shape, endpoint image and env": {
    domyn: {
      env: { A: "1" },
      backend: {
        type: "lepton",
        resource_shape: "gpu.8xh100-80gb",
        env: { B: "2" },
        endpoint: { image: "vllm/vllm-openai:latest", env: { C: "3" } },
      },
    },
    swarmplane: {
      backendType: "lepton",
      env: { A: "1", B: "2", C: "3" },
      image: "vllm/vllm-openai:latest",
      serving: { lepton: { resourceShape: "gpu.8xh100-80gb" } },
    },
  },
  "backend lepton: endpoint.env wins over backend.env, whichever is written first": {
    domyn: {
      env: { A: "top", B: "top" },
      backend: { type: "lepton", endpoint: { env: { A: "endpoint" } }, env: { A: "backend", B: "backend" } },
    },
    swarmplane: { backendType: "lepton", env: { A: "endpoint", B: "backend" } },
  },
  "backend lepton: empty allowed_nodes and null secrets are domyn's defaults, accepted": {
    domyn: {
      backend: {
        type: "lepton",
        endpoint: { allowed_nodes: [], image_pull_secrets: null, api_token_secret_name: null, mounts: [] },
      },
    },
    swarmplane: { backendType: "lepton" },
  },
  "backend lepton: gpus_per_replica is vLLM's --tensor-parallel-size before the args, as domyn-swarm starts it":
    {
      domyn: { gpus_per_replica: 4, args: "--max-model-len 8192", backend: { type: "lepton" } },
      swarmplane: {
        gpusPerReplica: 4,
        args: ["--tensor-parallel-size", "4", "--max-model-len", "8192"],
        backendType: "lepton",
      },
    },
  "backend lepton: a file's own --tensor-parallel-size is kept as it is": {
    domyn: { gpus_per_replica: 4, args: "--tensor-parallel-size=2", backend: { type: "lepton" } },
    swarmplane: { gpusPerReplica: 4, args: ["--tensor-parallel-size=2"], backendType: "lepton" },
  },
  "backend lepton: the swarm's own image wins over endpoint.image": {
    domyn: { image: "mine:1", backend: { type: "lepton", endpoint: { image: "theirs:2" } } },
    swarmplane: { image: "mine:1", backendType: "lepton" },
  },
  "backend workers: fields pass through to serving.workers": {
    domyn: { backend: { type: "workers", backend_id: "local", scale_group: "gpu" } },
    swarmplane: { backendId: "local", backendType: "workers", serving: { workers: { scaleGroup: "gpu" } } },
  },
  "top-level backend_id": { domyn: { backend_id: "local" }, swarmplane: { backendId: "local" } },
}

describe("domyn-swarm fields map onto swarmplane's", () => {
  for (const [name, tc] of Object.entries(mapping))
    test(name, () => {
      const { body, issues } = normaliseSwarm({ ...base, ...tc.domyn })
      expect(issues.filter((i) => !i.warning)).toEqual([])
      expect(body).toEqual({ ...base, ...tc.swarmplane })
    })
})

const problems: Record<string, { domyn: Record<string, unknown>; issues: Partial<Issue>[] }> = {
  "slurm account belongs on the backend": {
    domyn: { backend: { type: "slurm", account: "p1", qos: "normal" } },
    issues: [
      { path: ["backend", "account"], message: expect.stringContaining("set `account` in its config") },
      { path: ["backend", "qos"], message: expect.stringContaining("set `qos` in its config") },
    ],
  },
  "an unknown slurm field is named": {
    domyn: { backend: { type: "slurm", partitoin: "gpu" } },
    issues: [
      { path: ["backend"], key: "partitoin", message: expect.stringContaining('unknown field "partitoin"') },
    ],
  },
  "an unknown backend type": {
    domyn: { backend: { type: "k8s" } },
    issues: [{ path: ["backend", "type"], message: 'must be one of "slurm", "lepton", "eks", "workers"' }],
  },
  "backend options without a type": {
    domyn: { backend: { partition: "gpu" } },
    issues: [{ path: ["backend", "type"], message: expect.stringContaining("is required") }],
  },
  "two spellings of one field": {
    domyn: { cpus_per_task: 2, cpusPerReplica: 4 },
    issues: [{ message: expect.stringContaining("are the same field: keep one") }],
  },
  "a size that is not one": {
    domyn: { mem_per_replica: "lots" },
    issues: [{ path: ["mem_per_replica"], message: expect.stringContaining("must be a size") }],
  },
  "lepton endpoint.allowed_nodes: replicas cannot be pinned to nodes": {
    domyn: { backend: { type: "lepton", endpoint: { allowed_nodes: ["node-1"] } } },
    issues: [
      {
        path: ["backend", "endpoint", "allowed_nodes"],
        message: expect.stringContaining("cannot pin replicas to nodes"),
      },
    ],
  },
  "lepton node groups are a list of names": {
    domyn: { backend: { type: "lepton", endpoint: { allowed_dedicated_node_groups: "ng-1" } } },
    issues: [
      { path: ["backend", "endpoint", "allowed_dedicated_node_groups"], message: "must be a list of names" },
    ],
  },
  "lepton workspace_id is a string": {
    domyn: { backend: { type: "lepton", workspace_id: 42 } },
    issues: [{ path: ["backend", "workspace_id"], message: "must be a string" }],
  },
  "an unknown field under lepton job": {
    domyn: { backend: { type: "lepton", job: { gpus: 8 } } },
    issues: [
      { path: ["backend", "job"], key: "gpus", message: expect.stringContaining('unknown field "gpus"') },
    ],
  },
}

describe("domyn-swarm fields swarmplane does not take on a swarm are errors that say why", () => {
  for (const [name, tc] of Object.entries(problems))
    test(name, () => {
      const { issues } = normaliseSwarm({ ...base, ...tc.domyn })
      expect(issues.filter((i) => !i.warning)).toEqual(tc.issues.map((i) => expect.objectContaining(i)))
    })
})

test("fields swarmplane does itself are ignored with a warning", () => {
  const { body, issues } = normaliseSwarm({
    ...base,
    wait_endpoint_s: 600,
    backend: { type: "slurm", requires_ray: false, endpoint: { nginx_image: "/x.sif" } },
  })
  expect(body).toEqual({ ...base, backendType: "slurm" })
  expect(issues.map((i) => [i.path.join("."), i.warning])).toEqual([
    ["wait_endpoint_s", true],
    ["backend.requires_ray", true],
    ["backend.endpoint.nginx_image", true],
  ])
})

test("slurm env is honoured, mounts say where they go, a watchdog is ours", () => {
  const { body, issues } = normaliseSwarm({
    ...base,
    env: { A: "1" },
    watchdog: { enabled: true },
    backend: { type: "slurm", env: { B: "2" }, mounts: ["/data:/data"], watchdog: { restart: true } },
  })
  expect(body.env).toEqual({ A: "1", B: "2" })
  expect(issues.filter((i) => !i.warning)).toEqual([
    expect.objectContaining({
      path: ["backend", "mounts"],
      message: expect.stringContaining("`container.extraArgs` (for apptainer `--bind SRC:DST`"),
    }),
  ])
  expect(issues.filter((i) => i.warning).map((i) => i.path.join("."))).toEqual([
    "watchdog",
    "backend.watchdog",
  ])
})

describe("domyn-swarm's sizing, checked as domyn does and mapped onto Slurm placement", () => {
  const slurm = { type: "slurm" }
  const cases: Record<
    string,
    { domyn: Record<string, unknown>; slurm?: Record<string, unknown>; error?: [string, RegExp] }
  > = {
    "4 replicas of 2 GPUs on 4-GPU nodes: 2 a node, 2 nodes": {
      domyn: { replicas: 4, gpus_per_replica: 2, gpus_per_node: 4, nodes: 2, replicas_per_node: 2 },
      slurm: { replicasPerNode: 2 },
    },
    "a replica of 8 GPUs on 4-GPU nodes spans 2 nodes": {
      domyn: { replicas: 2, gpus_per_replica: 8, gpus_per_node: 4, nodes: 4 },
      slurm: { nodesPerReplica: 2 },
    },
    "6 GPUs per replica on 4-GPU nodes is refused with the arithmetic": {
      domyn: { replicas: 1, gpus_per_replica: 6, gpus_per_node: 4 },
      error: [
        "gpus_per_replica",
        /6 GPUs per replica on 4-GPU nodes: .* use a multiple of 4 \(8, 12, \.\.\.\) or at most 4/,
      ],
    },
    "3 replicas of 2 GPUs a node is more than 4 GPUs": {
      domyn: { replicas: 6, gpus_per_replica: 2, gpus_per_node: 4, replicas_per_node: 3 },
      error: ["replicas_per_node", /3 replicas × 2 GPUs = 6 GPUs, more than a node's 4: at most 2/],
    },
    "nodes that do not add up": {
      domyn: { replicas: 4, gpus_per_replica: 4, gpus_per_node: 4, nodes: 2 },
      error: ["nodes", /4 replicas at 1 per node take 4 nodes, not 2: set nodes to 4/],
    },
  }
  for (const [name, tc] of Object.entries(cases))
    test(name, () => {
      const { body, issues } = normaliseSwarm({ ...base, ...tc.domyn, backend: slurm })
      if (tc.error) {
        expect(issues.filter((i) => !i.warning)).toEqual([
          expect.objectContaining({ path: [tc.error[0]], message: expect.stringMatching(tc.error[1]) }),
        ])
        return
      }
      expect(issues).toEqual([])
      expect((body.serving as { slurm?: unknown } | undefined)?.slurm).toEqual(tc.slurm)
    })

  test("on a Lepton swarm they are checked, then ignored with a warning", () => {
    const { issues } = normaliseSwarm({
      ...base,
      gpus_per_replica: 8,
      gpus_per_node: 8,
      backend: { type: "lepton" },
    })
    expect(issues).toEqual([expect.objectContaining({ path: ["gpus_per_node"], warning: true })])
  })
})

test("origins point errors at what the user wrote", () => {
  const { origins } = normaliseSwarm({
    ...base,
    gpus_per_replica: 99,
    backend: { type: "slurm", time_limit: "x" },
  })
  expect(origins.source(["gpusPerReplica"])).toEqual(["gpus_per_replica"])
  expect(origins.source(["serving", "slurm", "timeLimit"])).toEqual(["backend", "time_limit"])
})

test.each([
  ["16G", 16384],
  ["16GB", 16384],
  ["16GiB", 16384],
  ["512M", 512],
  ["1T", 1048576],
  ["1.5G", 1536],
  ["100K", 1],
  [4096, 4096],
])("size %s is %d MiB", (value, mib) => {
  expect(sizeMiB(value, [], [])).toBe(mib)
})

test.each([
  ["--a 1 --b two", ["--a", "1", "--b", "two"]],
  ["  spaced   out  ", ["spaced", "out"]],
  [`--name 'two words' --q "a \\"b\\""`, ["--name", "two words", "--q", 'a "b"']],
  [`it\\'s ''`, ["it's", ""]],
  ["", []],
])("splitArgs(%j)", (text, argv) => {
  expect(splitArgs(text)).toEqual(argv)
})

describe("domyn-swarm's Lepton file, as its README shows it", () => {
  const readme = {
    ...base,
    backend: {
      type: "lepton",
      workspace_id: "j90afpem",
      endpoint: {
        image: "vllm/vllm-openai",
        allowed_dedicated_node_groups: ["nv-domyn-nebius-h200-01-lznuhuob"],
        resource_shape: "gpu.4xh200",
        env: { HF_HOME: "/mnt/lepton-shared-fs/hf_home/" },
        mounts: [{ path: "/", from: "node-nfs:lepton-shared-fs", mount_path: "/mnt/lepton-shared-fs" }],
        api_token_secret_name: "endpoint-token",
        image_pull_secrets: ["registry"],
      },
      job: {
        allowed_dedicated_node_groups: ["nv-domyn-nebius-h200-01-lznuhuob"],
        image: "igeniusai/domyn-swarm:latest",
      },
    },
  }

  test("maps onto the swarm, and leaves the backend's fields for up to check against the backend", () => {
    const { body, issues, checks } = normaliseSwarm(readme)
    expect(issues.filter((i) => !i.warning)).toEqual([])
    expect(body).toEqual({
      ...base,
      backendType: "lepton",
      image: "vllm/vllm-openai",
      env: { HF_HOME: "/mnt/lepton-shared-fs/hf_home/" },
      serving: { lepton: { resourceShape: "gpu.4xh200" } },
    })
    expect(checks.map((c) => [c.path.join("."), c.field])).toEqual([
      ["backend.workspace_id", "workspaceId"],
      ["backend.endpoint.allowed_dedicated_node_groups", "nodeGroup"],
      ["backend.endpoint.mounts", "mounts"],
      ["backend.endpoint.api_token_secret_name", "endpointTokenSecret"],
      ["backend.endpoint.image_pull_secrets", "imagePullSecrets"],
    ])
  })

  test("its job section is a warning per field saying where each goes", () => {
    const { issues } = normaliseSwarm(readme)
    expect(issues.filter((i) => i.warning).map((i) => [i.path.join("."), i.message])).toEqual([
      ["backend.job.allowed_dedicated_node_groups", expect.stringContaining("its `nodeGroup`")],
      ["backend.job.image", expect.stringContaining("swarmplane job submit --image IMAGE")],
    ])
  })
})

test("the tensor-parallel flag of a domyn Lepton file points at gpus_per_replica; the file's args keep their places", () => {
  const { origins } = normaliseSwarm({
    ...base,
    gpus_per_replica: 2,
    args: ["--a", "--b"],
    backend: { type: "lepton" },
  })
  expect(origins.source(["args", 0])).toEqual(["gpus_per_replica"])
  expect(origins.source(["args", 3])).toEqual(["args", 1])
})
