import { describe, expect, test } from "vitest"
import { BackendConfig } from "../../model/backend"
import { JobRequest, JobSpec, specOf } from "../../model/job"
import {
  cpuQuantity,
  type EksConfig,
  eksJobIssues,
  gangJobObject,
  gangSubmission,
  jobName,
  jobObject,
  labelValue,
  parseSubmission,
  placementOf,
  selectorOf,
} from "./spec"

const config = (extra: Record<string, unknown> = {}) =>
  BackendConfig.parse({
    type: "eks",
    clusterName: "gpu",
    region: "us-west-2",
    namespace: "team-a",
    localQueue: "user-queue",
    ...extra,
  }) as EksConfig

const job = (spec: Record<string, unknown>) => ({ id: "j-01ABC", spec: JobSpec.parse(spec) })

describe("jobName", () => {
  test("deterministic, a DNS-1123 label of at most 63 characters, and apart for ids that differ in case", () => {
    expect(jobName("a-01HX2Y")).toBe(jobName("a-01HX2Y"))
    expect(jobName("a-01HX2Y")).not.toBe(jobName("a-01hx2y"))
    for (const uid of ["a-01HX2Y", "x".repeat(200), "--", "A_B.C"]) {
      const name = jobName(uid)
      expect(name.length).toBeLessThanOrEqual(63)
      expect(name).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/)
    }
  })
})

describe("labels", () => {
  test("a value Kubernetes would refuse becomes a digest; the selector names project and backend", () => {
    expect(labelValue("default")).toBe("default")
    expect(labelValue("x".repeat(64))).toMatch(/^h-[0-9a-f]{40}$/)
    expect(selectorOf("default", "k8s")).toBe("swarmplane.dev/project=default,swarmplane.dev/backend=k8s")
  })
})

describe("jobObject", () => {
  test("a command reaches the container as written: Kubernetes would expand $(VAR) and fold $$, so each $ is doubled", () => {
    const made = jobObject({
      project: "default",
      backendId: "k8s",
      job: job({ command: ["sh", "-c", 'echo "$HOME $$ $(MISSING)"'] }),
      taskIndex: 0,
      attemptUid: "a-1",
      config: config(),
    })
    const container = made.spec!.template.spec!.containers[0]!
    expect(container.command).toEqual(["sh", "-c", 'echo "$$HOME $$$$ $$(MISSING)"'])
  })

  test("a suspended Job for the LocalQueue, never retried by Kubernetes, with requests and limits and swarmplane's env", () => {
    const made = jobObject({
      project: "default",
      backendId: "k8s",
      job: job({
        command: ["python", "infer.py"],
        tasks: 4,
        env: { A: "1", SHARD_ID: "mine" },
        resources: { cpu: 0.5, memoryMiB: 2048, gpu: 2 },
      }),
      taskIndex: 3,
      attemptUid: "a-1",
      config: config({
        workloadPriorityClass: "high",
        gpuResourceName: "amd.com/gpu",
        serviceAccount: "runner",
      }),
      swarmUrl: "http://llm.example",
    })
    expect(made.metadata).toMatchObject({
      name: jobName("a-1"),
      namespace: "team-a",
      labels: {
        "kueue.x-k8s.io/queue-name": "user-queue",
        "kueue.x-k8s.io/priority-class": "high",
        "swarmplane.dev/project": "default",
        "swarmplane.dev/backend": "k8s",
        "swarmplane.dev/job": "j-01ABC",
        "swarmplane.dev/task": "3",
        "swarmplane.dev/attempt": "a-1",
      },
    })
    expect(made.spec).toMatchObject({ suspend: true, backoffLimit: 0, parallelism: 1, completions: 1 })
    const pod = made.spec!.template
    expect(pod.metadata?.labels?.["swarmplane.dev/attempt"]).toBe("a-1")
    expect(pod.spec).toMatchObject({ restartPolicy: "Never", serviceAccountName: "runner" })
    const [container] = pod.spec.containers
    expect(container!.command).toEqual(["python", "infer.py"])
    const want = { cpu: "500m", memory: "2048Mi", "amd.com/gpu": "2" }
    expect(container!.resources).toEqual({ requests: want, limits: want })
    expect(Object.fromEntries(container!.env!.map((e) => [e.name, e.value]))).toEqual({
      A: "1",
      SHARD_ID: "3",
      NSHARDS: "4",
      ATTEMPT_UID: "a-1",
      SWARM_ENDPOINT: "http://llm.example",
    })
  })

  test("no priority label unless configured; no GPU resource for a CPU task; a batch shard runs the configured agent", () => {
    const made = jobObject({
      project: "default",
      backendId: "k8s",
      job: job({ command: ["swarmplane-agent", "run-batch", "--input", "x"] }),
      taskIndex: 0,
      attemptUid: "a-2",
      config: config({ agentCommand: ["node", "/opt/agent.mjs"], imagePullSecrets: ["regcred"] }),
    })
    expect(made.metadata.labels).not.toHaveProperty("kueue.x-k8s.io/priority-class")
    const spec = made.spec!.template.spec
    expect(spec.containers[0]!.command).toEqual(["node", "/opt/agent.mjs", "run-batch", "--input", "x"])
    expect(Object.keys(spec.containers[0]!.resources!.requests!)).toEqual(["cpu", "memory"])
    expect((spec as { imagePullSecrets?: unknown }).imagePullSecrets).toEqual([{ name: "regcred" }])
  })

  test("a batch job's shards are told to print their progress to their log, where a pass reads it; a plain job is not", () => {
    const envOf = (spec: JobSpec) =>
      Object.fromEntries(
        jobObject({
          project: "default",
          backendId: "k8s",
          job: { id: "j-batch", spec },
          taskIndex: 1,
          attemptUid: "a-3",
          config: config(),
        }).spec!.template.spec.containers[0]!.env!.map((e) => [e.name, e.value]),
      )
    const batch = specOf(
      JobRequest.parse({ swarm: "llm", tasks: 4, batch: { input: "/data/rows.jsonl", output: "/data/out" } }),
    )
    expect(envOf(batch)).toMatchObject({ SWARMPLANE_PROGRESS_STDOUT: "1", SHARD_ID: "1", NSHARDS: "4" })
    expect(envOf(JobSpec.parse({ command: ["python", "infer.py"] }))).not.toHaveProperty(
      "SWARMPLANE_PROGRESS_STDOUT",
    )
  })
})

describe("placement", () => {
  test("eq constraints and the config's nodeSelector select nodes; other ops become required node affinity", () => {
    const placed = placementOf(
      [
        { key: "accelerator", op: "eq", value: "h100" },
        { key: "zone", op: "in", values: ["a", "b"] },
        { key: "spot", op: "not_exists" },
        { key: "gpus", op: "ge", value: "8" },
      ],
      { nodeSelector: { pool: "gpu" } },
    )
    expect(placed.nodeSelector).toEqual({ pool: "gpu", accelerator: "h100" })
    expect(placed.affinity).toEqual({
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [
            {
              matchExpressions: [
                { key: "zone", operator: "In", values: ["a", "b"] },
                { key: "spot", operator: "DoesNotExist" },
                { key: "gpus", operator: "Gt", values: ["7"] },
              ],
            },
          ],
        },
      },
    })
    expect(placementOf([], {})).toEqual({})
  })

  test("CPU quantities", () => {
    expect(cpuQuantity(2)).toBe("2")
    expect(cpuQuantity(0.25)).toBe("250m")
  })
})

describe("eksJobIssues", () => {
  test("a gang by attribute, a value no label can hold and a non-integer comparison are refused by field; plain specs pass", () => {
    expect(
      eksJobIssues(
        JobSpec.parse({ command: ["true"], constraints: [{ key: "zone", op: "eq", value: "a" }] }),
      ),
    ).toEqual([])
    const issues = eksJobIssues(
      JobSpec.parse({
        command: ["true"],
        tasks: 2,
        coscheduling: { groupBy: "rack" },
        constraints: [
          { key: "zone", op: "in", values: ["a", "b c"] },
          { key: "gpus", op: "ge", value: "1.5" },
        ],
      }),
    )
    expect(issues.map((i) => i.path)).toEqual([
      "coscheduling.groupBy",
      "constraints.0.values",
      "constraints.1.value",
    ])
  })
})

describe("gangJobObject", () => {
  const members = [
    { taskIndex: 0, attemptUid: "a-first" },
    { taskIndex: 1, attemptUid: "a-it's" },
    { taskIndex: 2, attemptUid: "a-third" },
  ]
  const gang = () =>
    gangJobObject({
      project: "p",
      backendId: "k8s",
      job: job({
        tasks: 3,
        coscheduling: {},
        command: ["sh", "-c", "echo \"$SHARD_ID/$ATTEMPT_UID\" '$(HOME)'"],
      }),
      config: config(),
      members,
    })

  test("one Indexed Job of all members, suspended and queued, named from the first member's attempt", () => {
    const object = gang()
    expect(object.metadata.name).toBe(jobName("a-first"))
    expect(object.metadata.labels).toMatchObject({
      "kueue.x-k8s.io/queue-name": "user-queue",
      "swarmplane.dev/gang": "3",
    })
    expect(object.metadata.labels).not.toHaveProperty("swarmplane.dev/attempt")
    expect(object.spec).toMatchObject({
      completionMode: "Indexed",
      parallelism: 3,
      completions: 3,
      suspend: true,
      backoffLimit: 0,
    })
    const env = object.spec!.template!.spec!.containers[0]!.env!.map((e) => e.name)
    expect(env).toContain("NSHARDS")
    expect(env).not.toContain("SHARD_ID")
    expect(parseSubmission(gangSubmission(object.metadata.name!, 2))).toEqual({
      name: object.metadata.name,
      index: 2,
    })
    expect(parseSubmission(object.metadata.name!)).toEqual({ name: object.metadata.name })
  })

  test("each completion index runs the job's command as its own member (SHARD_ID, ATTEMPT_UID), quoted", async () => {
    const { execFileSync } = await import("node:child_process")
    const command = gang().spec!.template!.spec!.containers[0]!.command!
    // Kubernetes turns `$$` back into `$` (and would expand `$(VAR)`): what the container runs.
    const argv = command.map((a) => a.replaceAll("$$", "$"))
    const run = (index: string) =>
      execFileSync(argv[0]!, argv.slice(1), {
        env: { PATH: process.env.PATH, HOME: "/h", JOB_COMPLETION_INDEX: index },
      })
        .toString()
        .trim()
    expect(run("0")).toBe("0/a-first $(HOME)")
    expect(run("1")).toBe("1/a-it's $(HOME)")
    expect(run("2")).toBe("2/a-third $(HOME)")
    expect(() => run("3")).toThrow()
  })

  test("a gang is accepted at the API; a gang by a shared attribute is refused by field", () => {
    expect(eksJobIssues(JobSpec.parse({ tasks: 2, coscheduling: {}, command: ["true"] }))).toEqual([])
    expect(
      eksJobIssues(JobSpec.parse({ tasks: 2, coscheduling: { groupBy: "rack" }, command: ["true"] })),
    ).toEqual([expect.objectContaining({ path: "coscheduling.groupBy" })])
  })
})
