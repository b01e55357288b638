/**
 * domyn-swarm's Lepton config, as its README shows it (`backend: { type: lepton, workspace_id, endpoint:
 * { image, allowed_dedicated_node_groups, resource_shape, env }, job: { ... } }`), through the real
 * `swarmplane` binary (a child process) to a local control plane and a fake DGX Cloud Lepton workspace:
 * the swarm comes up RUNNING as one Lepton deployment holding what the file asked for, and answers a
 * chat completion at its URL; a file asking for what swarmplane or its backend cannot give is refused,
 * naming the field, with nothing created.
 */
import { spawn } from "node:child_process"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, test } from "vitest"
import { type LeptonPlane, leptonPlane } from "./support/lepton-plane"
import { root } from "./support/local"

const bin = join(root, "packages/cli/bin/swarmplane.mjs")
const scratch = mkdtempSync(join(tmpdir(), "swarmplane-domyn-lepton-"))
/** The node group of domyn-swarm's README, by its id; the backend names it by its name. */
const group = { id: "nv-domyn-nebius-h200-01-lznuhuob", name: "h200-nodes", shapes: ["gpu.4xh200"] }
const shared = { path: "/", from: "node-nfs:lepton-shared-fs", mountPath: "/mnt/lepton-shared-fs" }

let l: LeptonPlane

beforeAll(async () => {
  l = await leptonPlane({ nodeGroups: [group] })
  await l.register("lep", {
    nodeGroup: group.name,
    resourceShape: "gpu.4xh200",
    mounts: [shared],
    imagePullSecrets: ["registry-cred"],
  })
}, 60_000)

afterAll(async () => {
  await l?.stop()
})

interface Result {
  code: number | null
  stdout: string
  stderr: string
}

/** The CLI as a user runs it, pointed at this plane with its admin key (nothing from the outer env). */
function swarmplane(args: string[]): Promise<Result> {
  const { SWARMPLANE_API: _api, SWARMPLANE_KEY: _key, SWARMPLANE_PROFILE: _profile, ...outer } = process.env
  const child = spawn(process.execPath, [bin, ...args], {
    cwd: scratch,
    env: {
      ...outer,
      SWARMPLANE_CONFIG_DIR: join(scratch, "config"),
      SWARMPLANE_API: l.p.plane.url,
      SWARMPLANE_KEY: l.p.plane.adminKey,
      NO_COLOR: "1",
    },
    stdio: ["ignore", "pipe", "pipe"],
  })
  let stdout = ""
  let stderr = ""
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
  return new Promise((resolve) => child.once("close", (code) => resolve({ code, stdout, stderr })))
}

/** A domyn-swarm config with the README's Lepton backend section; `endpoint` extra fields over it. */
function domynFile(name: string, options: { workspace?: string; endpoint?: string } = {}): string {
  const path = join(scratch, `${name}.yaml`)
  writeFileSync(
    path,
    `# a domyn-swarm config, as domyn-swarm's README writes its Lepton backend
name: ${name}
model: echo
replicas: 2
env:
  LOG_LEVEL: info
backend:
  type: lepton
  workspace_id: ${options.workspace ?? l.fake.workspaceId}
  endpoint:
    image: vllm/vllm-openai
    allowed_dedicated_node_groups:
      - ${group.id}
    resource_shape: gpu.4xh200
    env:
      HF_HOME: /mnt/lepton-shared-fs/hf_home/
    mounts:
      - path: /
        from: node-nfs:lepton-shared-fs
        mount_path: /mnt/lepton-shared-fs
    image_pull_secrets:
      - registry-cred
${options.endpoint ?? ""}  job:
    allowed_dedicated_node_groups:
      - ${group.id}
    image: igeniusai/domyn-swarm:latest
`,
  )
  return path
}

// biome-ignore lint/suspicious/noExplicitAny: the fake's deployments as Lepton answers them
const deployments = async (): Promise<any[]> => (await l.lepton("GET", "/deployments")).body

describe("a domyn-swarm Lepton file through the swarmplane CLI", () => {
  test("comes up RUNNING on Lepton as one deployment with the file's shape, env, replicas and image, and answers at its URL", {
    timeout: 150_000,
  }, async () => {
    const up = await swarmplane([
      "up",
      "-f",
      domynFile("domyn-llm"),
      "--wait",
      "--timeout",
      "120",
      "-o",
      "json",
    ])
    expect(up.code, up.stderr).toBe(0)
    const swarm = JSON.parse(up.stdout)
    expect(swarm).toMatchObject({
      name: "domyn-llm",
      phase: "RUNNING",
      backendId: "lep",
      backendType: "lepton",
    })
    // The job section is not the swarm's: each field says where it goes, and nothing else warns.
    expect(up.stderr).toMatch(/backend\.job\.image: .*swarmplane job submit --image IMAGE/)
    expect(up.stderr).toMatch(/backend\.job\.allowed_dedicated_node_groups: .*its `nodeGroup`/)
    expect(up.stderr).not.toMatch(/error/i)

    const [deployment, ...others] = await deployments()
    expect(others).toEqual([])
    expect(deployment.metadata.id).toBe(swarm.handle.meta.deployment)
    expect(deployment.spec.container.image).toBe("vllm/vllm-openai")
    expect(deployment.spec.resource_requirement).toMatchObject({
      resource_shape: "gpu.4xh200",
      min_replicas: 2,
      max_replicas: 2,
      affinity: { allowed_dedicated_node_groups: [group.id] },
    })
    const envs = Object.fromEntries(
      deployment.spec.envs.map((e: { name: string; value?: string }) => [e.name, e.value]),
    )
    expect(envs).toMatchObject({ LOG_LEVEL: "info", HF_HOME: "/mnt/lepton-shared-fs/hf_home/" })
    expect(deployment.spec.mounts).toEqual([
      { path: "/", from: shared.from, mount_path: shared.mountPath, mount_options: { read_only: false } },
    ])
    expect(deployment.spec.image_pull_secrets).toEqual(["registry-cred"])

    const reply = await fetch(`${swarm.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ model: "echo", messages: [{ role: "user", content: "from domyn" }] }),
    }).then((r) => r.json())
    expect(reply.choices[0].message.content).toBe("echo: from domyn")
  })

  const refusals: Record<string, { file: () => string; field: RegExp; code: number }> = {
    "replicas pinned to nodes, which swarmplane cannot honour": {
      file: () => domynFile("domyn-pinned", { endpoint: "    allowed_nodes:\n      - node-7\n" }),
      field:
        /domyn-pinned\.yaml:\d+:\d+: backend\.endpoint\.allowed_nodes: swarmplane cannot pin replicas to nodes/,
      code: 5,
    },
    "another workspace than the backend's": {
      file: () => domynFile("domyn-elsewhere", { workspace: "ws-elsewhere" }),
      field:
        /domyn-elsewhere\.yaml:\d+:\d+: backend\.workspace_id: backend "lep" has workspaceId "[^"]+", but this asks for "ws-elsewhere"/,
      code: 5,
    },
  }
  for (const [name, tc] of Object.entries(refusals))
    test(`a file asking for ${name} is refused with the field's name, and nothing is created`, {
      timeout: 60_000,
    }, async () => {
      const before = (await deployments()).length
      const file = tc.file()
      const swarmName = file.replace(/^.*\//, "").replace(/\.yaml$/, "")
      const up = await swarmplane(["up", "-f", file])
      expect(up.code, up.stderr).toBe(tc.code)
      expect(up.stderr).toMatch(tc.field)
      expect((await l.p.call("GET", `/v1/swarms/${swarmName}`)).status).toBe(404)
      expect(await deployments()).toHaveLength(before)
      expect(l.fake.requests.filter((r) => r.method === "POST" && r.path === "/deployments")).toHaveLength(1)
    })
})
