/** Spec files: every validation error with its path and line:column, the kinds, and good files of each kind. */
import { describe, expect, test } from "vitest"
import { detectKind, formatIssue, parseSpec } from "./files"

const lines = (text: string, kind?: "swarm" | "job" | "backend") => {
  const spec = parseSpec(text, "f.yaml", kind)
  return {
    spec,
    errors: spec.errors.map((e) => formatIssue("f.yaml", e)),
    warnings: spec.warnings.map((e) => formatIssue("f.yaml", e)),
  }
}

describe("validation errors name the path and the position, in the API's words", () => {
  test("every error of a broken swarm file, in file order", () => {
    const { errors } = lines(
      [
        "name: Demo_X",
        "model: echo",
        "replicas: 5000",
        "gpus_per_replica: 100",
        "colour: blue",
        "serving: { slurm: { partition: p, bogus: 1 } }",
      ].join("\n"),
    )
    expect(errors).toEqual([
      expect.stringMatching(/^f\.yaml:1:7: name: must be a DNS label/),
      "f.yaml:3:11: replicas: must be at most 1024",
      "f.yaml:4:19: gpus_per_replica: must be at most 64",
      'f.yaml:5:1: unknown field "colour": remove it (the fields are listed at /docs)',
      'f.yaml:6:35: serving.slurm: unknown field "bogus": remove it (the fields are listed at /docs)',
    ])
  })

  test("a job file: snake_case accepted, nested paths and array indices", () => {
    const { spec, errors } = lines(
      [
        "command: [python, infer.py]",
        "tasks: 0",
        "resources: { memory_mib: 512, gpu: 1.5 }",
        "max_retries_failure: 2",
        "constraints:",
        "  - { key: zone, op: eq }",
      ].join("\n"),
    )
    expect(spec.kind).toBe("job")
    expect(errors).toEqual([
      "f.yaml:2:8: tasks: must be at least 1",
      "f.yaml:3:36: resources.gpu: must be an int, not a number",
      'f.yaml:6:5: constraints.0.value: op "eq" needs a value, e.g. { "value": "h100" }',
    ])
    expect(spec.body).toMatchObject({ resources: { memoryMiB: 512 }, maxRetriesFailure: 2 })
  })

  test("a missing required field points at the file", () => {
    expect(lines("name: x\nreplicas: 1", "swarm").errors).toEqual([
      "f.yaml:1:1: model: is required: send a string",
    ])
  })

  test("YAML syntax errors carry line and column", () => {
    const { errors, spec } = lines("name: x\nmodel: [unclosed\n")
    expect(spec.kind).toBeUndefined()
    expect(errors[0]).toMatch(/^f\.yaml:\d+:\d+: not valid YAML: /)
    expect(lines("name: x\nname: y\n").errors).toEqual([
      "f.yaml:2:1: not valid YAML: Map keys must be unique",
    ])
  })

  test("a file that is not one object", () => {
    expect(lines("- a\n- b\n").errors).toEqual(["f.yaml:1:1: must hold one object (a map of fields)"])
  })

  test("an unknown domyn-swarm field is named with its line", () => {
    const { errors, warnings } = lines(
      ["model: m", "name: n", "gpus_per_node: 4", "backend:", "  type: slurm", "  partitoin: gpu"].join("\n"),
    )
    expect(errors).toEqual([
      'f.yaml:6:3: backend: unknown field "partitoin" for a slurm backend: remove it (docs/cli.md lists the domyn-swarm fields swarmplane reads)',
    ])
    // gpus_per_node is domyn's sizing, checked and mapped (no warning): only the typo is reported.
    expect(warnings).toEqual([])
  })
})

describe("good files", () => {
  test("a swarm in swarmplane's own fields", () => {
    const { spec } = lines("name: demo\nmodel: echo\nreplicas: 2\nmemoryMiBPerReplica: 256\n")
    expect(spec).toMatchObject({ kind: "swarm", name: "demo", errors: [], warnings: [] })
    expect(spec.body).toEqual({ name: "demo", model: "echo", replicas: 2, memoryMiBPerReplica: 256 })
  })

  test("a domyn-swarm config", () => {
    const { spec } = lines(
      [
        "model: meta-llama/Llama-3.1-8B-Instruct",
        "name: llama",
        "replicas: 2",
        "gpus_per_replica: 4",
        "cpus_per_task: 8",
        "args: --max-model-len 8192",
        "backend:",
        "  type: slurm",
        "  partition: gpu",
        "  time_limit: '04:00:00'",
      ].join("\n"),
    )
    expect(spec.errors).toEqual([])
    expect(spec.body).toMatchObject({
      gpusPerReplica: 4,
      cpusPerReplica: 8,
      args: ["--max-model-len", "8192"],
      serving: { slurm: { partition: "gpu", timeLimit: "04:00:00" } },
    })
  })

  test("a backend as { id, config } and as id + config fields", () => {
    const nested = lines("id: local-2\nconfig: { type: workers, heartbeat_interval_s: 2 }\n").spec
    const flat = lines("id: local-2\ntype: workers\nheartbeat_interval_s: 2\n").spec
    for (const spec of [nested, flat]) {
      expect(spec).toMatchObject({ kind: "backend", name: "local-2", errors: [] })
      expect(spec.body).toEqual({ id: "local-2", config: { type: "workers", heartbeatIntervalS: 2 } })
    }
    expect(lines("id: hpc\ntype: slurm\nport: 99999\n").errors).toContain(
      "f.yaml:3:7: port: must be at most 65535",
    )
  })

  test("JSON is YAML too", () => {
    expect(lines('{"command": ["true"], "tasks": 2}').spec).toMatchObject({ kind: "job", errors: [] })
  })
})

describe("kinds", () => {
  test.each([
    [{ model: "m" }, "swarm"],
    [{ command: ["x"] }, "job"],
    [{ id: "b", config: {} }, "backend"],
    [{ id: "b", type: "lepton" }, "backend"],
    [{ name: "x" }, undefined],
  ])("%j is a %s file", (fields, kind) => {
    expect(detectKind(fields)).toBe(kind)
  })

  test("an explicit kind: field is honoured and removed", () => {
    expect(lines("kind: job\ncommand: [x]\n").spec).toMatchObject({
      kind: "job",
      errors: [],
      body: { command: ["x"] },
    })
  })

  test("an unrecognisable file asks for --kind", () => {
    expect(lines("name: x\n").errors).toEqual([expect.stringContaining("pass --kind swarm|job|backend")])
  })
})

test("a domyn Lepton file's backend fields are left for up to check, each at its line and column", () => {
  const { spec, errors } = lines(
    "name: x\nmodel: m\nbackend:\n  type: lepton\n  workspace_id: ws1\n  endpoint:\n    allowed_dedicated_node_groups: [ng-1]\n",
  )
  expect(errors).toEqual([])
  expect(spec.backendChecks).toEqual([
    { path: ["backend", "workspace_id"], field: "workspaceId", value: "ws1", line: 5, col: 3 },
    {
      path: ["backend", "endpoint", "allowed_dedicated_node_groups"],
      field: "nodeGroup",
      value: ["ng-1"],
      line: 7,
      col: 5,
    },
  ])
})
