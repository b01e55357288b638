import { readFileSync } from "node:fs"
import { describe, expect, test } from "vitest"
import { BackendError } from "../../util/errors"
import {
  expandArrayTasks,
  gpuCount,
  latestSacctRecords,
  mapSlurmState,
  normaliseSlurmState,
  parseExitCode,
  parseMemoryMiB,
  parseQueueDepth,
  parseSacctCompletion,
  parseScontrolJobs,
  parseSinfo,
  parseSlurmDuration,
  parseSqueue,
  parseVersion,
  type SlurmOutcome,
  SlurmStateCodes,
  type SqueueRow,
  submissionIdOf,
  toOutcome,
} from "./parse"

/** Recorded stdout/stderr from the dev cluster (fixtures/README.md). */
const fixture = (name: string) => readFileSync(new URL(`./fixtures/${name}`, import.meta.url), "utf8")
const byId = (rows: SqueueRow[]) => new Map(rows.map((row) => [row.jobId, row]))

describe("parseSqueue", () => {
  test("array rows: finished, running and the pending remainder expanded", () => {
    const rows = byId(parseSqueue(fixture("squeue-array-mixed.txt")))
    expect([...rows.keys()].sort()).toEqual(["82_0", "82_1", "82_2", "82_3", "82_[4-5%2]"])
    expect(rows.get("82_1")).toMatchObject({
      arrayJobId: "82",
      arrayTaskId: 1,
      arrayTaskIds: [1],
      state: "FAILED",
    })
    expect(rows.get("82_1")?.reason).toBe("NonZeroExitCode")
    const pending = rows.get("82_[4-5%2]")
    expect(pending).toMatchObject({ arrayJobId: "82", arrayTaskIds: [4, 5], arrayThrottle: 2 })
    expect(pending?.arrayTaskId).toBeUndefined()
    expect(pending).toMatchObject({ state: "PENDING", reason: "JobArrayTaskLimit", nodes: undefined })
  })

  test("a whole row of a swarmplane task, field by field", () => {
    const row = byId(parseSqueue(fixture("squeue-gpu.txt"))).get("95_0")
    expect(row).toEqual({
      jobId: "95_0",
      arrayJobId: "95",
      arrayTaskId: 0,
      arrayTaskIds: [0],
      arrayThrottle: undefined,
      name: "sp-s-01kbgx3r9m0003g9j5tb",
      submissionId: "s-01kbgx3r9m0003g9j5tb",
      state: "RUNNING",
      reason: "None",
      elapsedS: 4,
      timeLimitS: 600,
      partition: "gpu",
      nodes: "vm",
      nodeCount: 1,
      cpus: 1,
      memoryMiB: 1024,
      gres: "gpu:1",
      gpus: 1,
    })
  })

  test("plain jobs are not arrays and carry no submission id", () => {
    const rows = byId(parseSqueue(fixture("squeue-finished.txt")))
    const oom = rows.get("81")
    expect(oom).toMatchObject({
      name: "oom",
      state: "OUT_OF_MEMORY",
      memoryMiB: 64,
      gres: undefined,
      gpus: 0,
    })
    expect(oom?.arrayJobId).toBeUndefined()
    expect(oom?.submissionId).toBeUndefined()
    expect(rows.get("83")).toMatchObject({
      state: "TIMEOUT",
      reason: "TimeLimit",
      elapsedS: 72,
      timeLimitS: 60,
    })
    expect(rows.get("84")).toMatchObject({ state: "DEADLINE", nodes: undefined })
  })

  const expectations: Record<string, { rows: number; states: Record<string, string> }> = {
    "squeue-all-states.txt": {
      rows: 24,
      states: {
        "92": "COMPLETING",
        "93": "SUSPENDED",
        "94": "STOPPED",
        "89": "SPECIAL_EXIT",
        "87": "CANCELLED",
      },
    },
    "squeue-pending-reasons.txt": {
      rows: 9,
      states: {
        "96": "JobHeldUser",
        "97": "JobHeldAdmin",
        "98": "BeginTime",
        "99": "Dependency",
        "101": "Resources",
      },
    },
    "squeue-just-submitted.txt": { rows: 2, states: { "101": "None", "102": "Priority" } },
    "squeue-partition-down.txt": { rows: 3, states: { "103": "PartitionDown" } },
    "squeue-node-fail.txt": { rows: 6, states: { "104": "NodeDown", "95_0": "BeginTime" } },
    "squeue-completing.txt": { rows: 2, states: { "92": "None" } },
    "squeue-suspended-stopped.txt": { rows: 4, states: { "88": "job requeued in held state" } },
  }
  for (const [file, tc] of Object.entries(expectations)) {
    test(`${file}: ${tc.rows} rows`, () => {
      const rows = byId(parseSqueue(fixture(file)))
      expect(rows.size).toBe(tc.rows)
      for (const [id, want] of Object.entries(tc.states)) {
        const row = rows.get(id)
        expect([row?.state, row?.reason], id).toContain(want)
      }
    })
  }

  test("a requeued array merges back into one pending row with a comma-joined reason", () => {
    const row = byId(parseSqueue(fixture("squeue-node-fail.txt"))).get("82_[2-5]")
    expect(row?.arrayTaskIds).toEqual([2, 3, 4, 5])
    expect(row?.reason).toMatch(/partitions,BeginTime$/)
  })

  test("a name holding '|' keeps its fields aligned; a short line throws", () => {
    const [row] = parseSqueue("7|7|N/A|a|b|RUNNING|None|0:01|5:00|debug|vm|1|2|1G|N/A\n")
    expect(row).toMatchObject({ name: "a|b", state: "RUNNING", cpus: 2 })
    expect(() => parseSqueue("7|7|N/A|x|RUNNING\n")).toThrow(BackendError)
    expect(parseSqueue("")).toEqual([])
  })
})

describe("parseScontrolJobs", () => {
  const finished = parseScontrolJobs(fixture("scontrol-finished.txt"))
  const cases: Record<string, { state: string; exitCode: number; signal: number; reason: string }> = {
    "79": { state: "COMPLETED", exitCode: 0, signal: 0, reason: "None" },
    "80": { state: "FAILED", exitCode: 3, signal: 0, reason: "NonZeroExitCode" },
    "81": { state: "OUT_OF_MEMORY", exitCode: 0, signal: 125, reason: "OutOfMemory" },
    "87": { state: "CANCELLED", exitCode: 0, signal: 15, reason: "None" },
    "92": { state: "CANCELLED", exitCode: 0, signal: 9, reason: "None" },
    "83": { state: "TIMEOUT", exitCode: 0, signal: 15, reason: "TimeLimit" },
    "84": { state: "DEADLINE", exitCode: 0, signal: 1, reason: "DeadLine" },
  }
  for (const [id, want] of Object.entries(cases)) {
    test(`finished job ${id}: ${want.state} ${want.exitCode}:${want.signal}`, () => {
      expect(finished.get(id)).toMatchObject(want)
    })
  }

  test("array ids, expanded output path, times", () => {
    expect(finished.size).toBe(7)
    expect(finished.get("80")).toMatchObject({
      arrayJobId: "80",
      arrayTaskId: 2,
      name: "sp-s-01kbgx3r9m0002f6h1wn",
      stdOut: "/home/slurmuser/sp-s-01kbgx3r9m0002f6h1wn_2.out",
      timeLimitS: 300,
      partition: "debug",
      nodes: "vm",
      restarts: 0,
    })
    expect(finished.get("83")).toMatchObject({ runTimeS: 72, timeLimitS: 60 })
    expect(finished.get("81")?.arrayJobId).toBeUndefined()
    expect(finished.get("81")?.fields.TRES).toBe("cpu=1,mem=64M,node=1,billing=1")
  })

  test("every record of an array: started tasks by their own JobId, the pending rest by the master's", () => {
    const jobs = parseScontrolJobs(fixture("scontrol-array.txt"))
    const tasks = [...jobs.values()].map((j) => [
      j.jobId,
      j.arrayTaskId ?? j.arrayTaskIds,
      j.state,
      j.exitCode,
    ])
    expect(tasks).toEqual([
      ["82", [4, 5], "PENDING", 0],
      ["91", 3, "RUNNING", 0],
      ["90", 2, "RUNNING", 0],
      ["86", 1, "FAILED", 3],
      ["85", 0, "COMPLETED", 0],
    ])
    expect(new Set([...jobs.values()].map((j) => j.arrayJobId))).toEqual(new Set(["82"]))
  })

  test("pending, running, suspended and failed-node records", () => {
    const pending = parseScontrolJobs(fixture("scontrol-pending.txt"))
    expect(pending.get("88")).toMatchObject({ reason: "job_requeued_in_held_state", restarts: 1 })
    expect(pending.get("100")?.fields.Dependency).toBe("afterok:80_*(failed)")
    expect(pending.get("102")?.timeLimitS).toBeUndefined()
    const running = parseScontrolJobs(fixture("scontrol-running-gpu.txt"))
    expect([...running.values()].map((j) => j.state)).toEqual(["RUNNING", "SUSPENDED", "STOPPED"])
    expect(running.get("95")?.fields.TresPerNode).toBe("gres:gpu:1")
    expect(parseScontrolJobs(fixture("scontrol-node-fail.txt")).get("104")).toMatchObject({
      state: "NODE_FAIL",
      reason: "NodeDown",
      fields: expect.objectContaining({ Requeue: "0" }),
    })
  })

  test("no jobs, and garbage", () => {
    expect(parseScontrolJobs("No jobs in the system\n").size).toBe(0)
    expect(() => parseScontrolJobs("slurm_load_jobs error: Invalid job id specified\n")).toThrow(BackendError)
  })
})

describe("parseSacctCompletion", () => {
  const records = parseSacctCompletion(fixture("sacct-completion.txt"))

  test("one record per run, in completion order", () => {
    expect(records).toHaveLength(18)
    expect(records[0]).toEqual({
      jobId: "80",
      name: "sp-s-01kbgx3r9m0002f6h1wn",
      state: "FAILED",
      exitCode: 3,
      signal: 0,
      end: "2026-11-29T16:44:29",
    })
    const latest = latestSacctRecords(records)
    expect(latest.get("81")).toMatchObject({ state: "OUT_OF_MEMORY", exitCode: 0, signal: 125 })
    expect(latest.get("83")?.state).toBe("TIMEOUT")
    expect(latest.get("104")?.state).toBe("NODE_FAIL")
    expect(records.filter((r) => r.jobId === "88").map((r) => r.state)).toEqual(["PENDING"])
  })

  test("stderr noise merged in is skipped", () => {
    const merged = `${fixture("sacct-completion.stderr.txt")}${fixture("sacct-completion.txt")}`
    expect(parseSacctCompletion(merged)).toEqual(records)
  })

  test("slurmdbd sacct: array ids, CANCELLED by uid, truncated states, steps skipped, no header", () => {
    const text = [
      "JobID|JobName|State|ExitCode|End",
      "82_1|sp-s-x|FAILED|3:0|2026-11-29T16:44:29",
      "82_[4-5%2]|sp-s-x|PENDING|0:0|Unknown",
      "87|c|CANCELLED by 1001|0:15|2026-11-29T16:44:32",
      "87.batch|batch|CANCELLED|0:15|2026-11-29T16:44:32",
      "88|long|CANCELLED+|0:0|Unknown",
    ].join("\n")
    expect(parseSacctCompletion(text)).toEqual([
      {
        jobId: "82_1",
        arrayJobId: "82",
        arrayTaskId: 1,
        name: "sp-s-x",
        state: "FAILED",
        exitCode: 3,
        signal: 0,
        end: "2026-11-29T16:44:29",
      },
      {
        jobId: "87",
        name: "c",
        state: "CANCELLED",
        cancelledBy: "1001",
        exitCode: 0,
        signal: 15,
        end: "2026-11-29T16:44:32",
      },
      { jobId: "88", name: "long", state: "CANCELLED", exitCode: 0, signal: 0, end: undefined },
    ])
    expect(parseSacctCompletion("9|n|COMPLETED|0:0|2026-11-29T16:44:29\n")[0]).toMatchObject({
      jobId: "9",
      state: "COMPLETED",
    })
    expect(() => parseSacctCompletion("JobID|JobName\nnot-a-job|x\n")).toThrow(BackendError)
  })
})

describe("parseSinfo", () => {
  const cpus = (allocated: number, idle: number, other: number, total: number) => ({
    allocated,
    idle,
    other,
    total,
  })
  const cases: Record<string, { available: [string, string]; state: string; cpus: ReturnType<typeof cpus> }> =
    {
      "sinfo-idle.txt": { available: ["up", "up"], state: "idle", cpus: cpus(0, 8, 0, 8) },
      "sinfo-busy.txt": { available: ["up", "up"], state: "comp", cpus: cpus(5, 3, 0, 8) },
      "sinfo-partition-down.txt": { available: ["up", "down"], state: "mix", cpus: cpus(5, 3, 0, 8) },
      "sinfo-node-draining.txt": { available: ["up", "up"], state: "drng", cpus: cpus(6, 0, 2, 8) },
      "sinfo-node-drained.txt": { available: ["up", "up"], state: "drain", cpus: cpus(0, 0, 8, 8) },
    }
  for (const [file, tc] of Object.entries(cases)) {
    test(file, () => {
      const [debug, gpu] = parseSinfo(fixture(file))
      expect(debug).toEqual({
        name: "debug",
        isDefault: true,
        available: tc.available[0],
        nodes: 1,
        nodesByState: { [tc.state]: 1 },
        cpus: tc.cpus,
        gres: ["gpu:fake:2"],
        gpus: 2,
        maxTimeS: undefined,
      })
      expect(gpu).toMatchObject({ name: "gpu", isDefault: false, available: tc.available[1], cpus: tc.cpus })
    })
  }

  test("a partition over several lines (node states) is summed; flags dropped", () => {
    const text =
      "batch|up|3|idle*|0/48/0/48|gpu:a100:4(S:0-1)|1-00:00:00\nbatch|up|2|mix|40/24/0/64|(null)|1-00:00:00\n"
    expect(parseSinfo(text)).toEqual([
      {
        name: "batch",
        isDefault: false,
        available: "up",
        nodes: 5,
        nodesByState: { idle: 3, mix: 2 },
        cpus: cpus(40, 72, 0, 112),
        gres: ["gpu:a100:4(S:0-1)"],
        gpus: 12,
        maxTimeS: 86_400,
      },
    ])
    expect(() => parseSinfo("debug|up|x|idle|0/8/0/8|(null)|infinite\n")).toThrow(BackendError)
  })
})

describe("parseQueueDepth and parseVersion", () => {
  test("queue depth per state, and per partition and reason", () => {
    expect(parseQueueDepth(fixture("queue-depth.txt"))).toEqual([
      { count: 1, state: "COMPLETING" },
      { count: 9, state: "PENDING" },
      { count: 4, state: "RUNNING" },
      { count: 1, state: "SPECIAL_EXIT" },
      { count: 1, state: "STOPPED" },
      { count: 1, state: "SUSPENDED" },
    ])
    const byPartition = parseQueueDepth(fixture("queue-depth-by-partition.txt"))
    expect(byPartition).toHaveLength(15)
    expect(byPartition).toContainEqual({ count: 1, partition: "gpu", state: "PENDING", reason: "Resources" })
    expect(byPartition).toContainEqual({ count: 3, partition: "debug", state: "RUNNING", reason: "None" })
    expect(() => parseQueueDepth("three PENDING\n")).toThrow(BackendError)
  })

  test("versions", () => {
    expect(parseVersion(fixture("version-squeue.txt"))).toEqual({ major: 22, minor: 5, patch: 8 })
    expect(parseVersion(fixture("version-sinfo.txt"))).toEqual({ major: 22, minor: 5, patch: 8 })
    expect(parseVersion("slurm 23.11.4\n")).toEqual({ major: 23, minor: 11, patch: 4 })
    expect(() => parseVersion("sinfo: error: resolve_ctls_from_dns_srv: res_nsearch error\n")).toThrow(
      BackendError,
    )
  })
})

describe("field decoders", () => {
  test("durations", () => {
    const cases: Record<string, number | undefined> = {
      "0:00": 0,
      "1:12": 72,
      "5:00": 300,
      "00:01:11": 71,
      "1:02:03": 3723,
      "2-03:04:05": 183_845,
      "1-00:00:00": 86_400,
      "2-03": 183_600,
      "30": 1800,
      UNLIMITED: undefined,
      infinite: undefined,
      "N/A": undefined,
    }
    for (const [text, want] of Object.entries(cases)) expect(parseSlurmDuration(text), text).toBe(want)
    expect(() => parseSlurmDuration("soon")).toThrow(BackendError)
  })

  test("exit codes, memory, array ranges, GPUs, submission ids", () => {
    expect(parseExitCode("3:0")).toEqual({ exitCode: 3, signal: 0 })
    expect(parseExitCode("")).toBeUndefined()
    expect(() => parseExitCode("3")).toThrow(BackendError)
    expect([
      parseMemoryMiB("1G"),
      parseMemoryMiB("64M"),
      parseMemoryMiB("512K"),
      parseMemoryMiB("2000n"),
    ]).toEqual([1024, 64, 1, 2000])
    expect(expandArrayTasks("[1,3,5-7]")).toEqual({ ids: [1, 3, 5, 6, 7] })
    expect(expandArrayTasks("0-15:4%2")).toEqual({ ids: [0, 4, 8, 12], throttle: 2 })
    expect(() => expandArrayTasks("0-999999999")).toThrow(BackendError)
    expect(() => expandArrayTasks("5-1")).toThrow(BackendError)
    expect([
      gpuCount("gres:gpu:2"),
      gpuCount("gpu:a100:4(S:0-1),mps:100"),
      gpuCount("cpu=1,gres/gpu=3"),
      gpuCount("N/A"),
    ]).toEqual([2, 4, 3, 0])
    expect(submissionIdOf("sp-s-01abc")).toBe("s-01abc")
    expect(submissionIdOf("wrap")).toBeUndefined()
    expect(submissionIdOf("sp-")).toBeUndefined()
  })
})

describe("mapSlurmState", () => {
  // Every state code of backend-contracts.md Part E, long and short, with what it means for the task.
  const partE: [string, string, SlurmOutcome["kind"], string?][] = [
    ["PENDING", "PD", "pending"],
    ["CONFIGURING", "CF", "pending"],
    ["RUNNING", "R", "running"],
    ["COMPLETING", "CG", "running"],
    ["COMPLETED", "CD", "succeeded"],
    ["CANCELLED", "CA", "killed", "cancelled"],
    ["FAILED", "F", "failed", "exit_code"],
    ["TIMEOUT", "TO", "failed", "timeout"],
    ["NODE_FAIL", "NF", "worker_failed", "node_fail"],
    ["PREEMPTED", "PR", "preempted", "preempted"],
    ["OUT_OF_MEMORY", "OOM", "failed", "oom"],
    ["BOOT_FAIL", "BF", "worker_failed", "boot_fail"],
    ["DEADLINE", "DL", "failed", "timeout"],
    ["SUSPENDED", "S", "running"],
    ["STOPPED", "ST", "running"],
    ["REQUEUED", "RQ", "pending"],
    ["REQUEUE_HOLD", "RH", "pending"],
    ["REQUEUE_FED", "RF", "pending"],
    ["RESV_DEL_HOLD", "RD", "pending"],
    ["RESIZING", "RS", "running"],
    ["REVOKED", "RV", "worker_failed", "revoked"],
    ["SIGNALING", "SI", "running"],
    ["SPECIAL_EXIT", "SE", "pending"],
    ["STAGE_OUT", "SO", "running"],
  ]
  test("the table covers every state code the module knows", () => {
    expect(partE.map(([long, short]) => [long, short])).toEqual(Object.entries(SlurmStateCodes))
  })
  for (const [long, short, kind, reason] of partE) {
    test(`${long} (${short}) → ${kind}${reason ? ` ${reason}` : ""}`, () => {
      for (const state of [long, short, short.toLowerCase()]) {
        const outcome = mapSlurmState(state, "None", "1:0")
        expect(outcome.kind, state).toBe(kind)
        expect(outcome.state).toBe(long)
        if (reason) expect(outcome).toMatchObject({ reason })
        if (kind === "pending" || kind === "failed" || kind === "killed")
          expect(outcome).toHaveProperty("message")
      }
    })
  }

  test("details: exit codes, suspension, who cancelled, unknown", () => {
    expect(mapSlurmState("COMPLETED", "None", "0:0")).toEqual({
      kind: "succeeded",
      state: "COMPLETED",
      exitCode: 0,
    })
    expect(mapSlurmState("FAILED", "NonZeroExitCode", "3:0")).toMatchObject({
      exitCode: 3,
      message: "exited with code 3",
    })
    expect(mapSlurmState("FAILED", "None", "0:9")).toMatchObject({ reason: "signal", signal: 9 })
    expect(mapSlurmState("FAILED", "JobLaunchFailure", "0:9")).toMatchObject({ reason: "launch_failed" })
    expect(mapSlurmState("SUSPENDED")).toMatchObject({ kind: "running", suspended: true })
    expect(mapSlurmState("RUNNING")).toMatchObject({ kind: "running", suspended: false })
    expect(mapSlurmState("CANCELLED by 1001")).toMatchObject({
      kind: "killed",
      message: "cancelled by uid 1001",
    })
    expect(mapSlurmState("CANCELLED+").kind).toBe("killed")
    expect(mapSlurmState("LAUNCH_FAILED", "Prolog")).toEqual({
      kind: "unknown",
      state: "LAUNCH_FAILED",
      message: 'unknown Slurm job state "LAUNCH_FAILED" (reason Prolog)',
    })
    expect(normaliseSlurmState("toString")).toBeUndefined()
  })

  const reasons: Record<string, [RegExp, boolean]> = {
    None: [/not looked at it yet/, false],
    Resources: [/^waiting for resources$/, false],
    Priority: [/higher-priority jobs/, false],
    Dependency: [/job it depends on/, false],
    DependencyNeverSatisfied: [/can never start/, true],
    JobHeldUser: [/held by its user/, true],
    JobHeldAdmin: [/administrator/, true],
    BeginTime: [/start time/, false],
    ReqNodeNotAvail: [/not available/, false],
    PartitionDown: [/partition is down/, true],
    JobArrayTaskLimit: [/running at once/, false],
    QOSMaxJobsPerUserLimit: [/^waiting on a QOS limit: max jobs per user \(QOSMaxJobsPerUserLimit\)$/, false],
    AssocGrpCPURunMinutesLimit: [
      /^waiting on an account limit: group CPU run minutes \(AssocGrpCPURunMinutesLimit\)$/,
      false,
    ],
    "job requeued in held state": [/requeued and held/, true],
    job_requeued_in_held_state: [/requeued and held/, true],
    "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions,BeginTime": [
      /^the nodes it needs are down, drained or reserved for higher-priority partitions; waiting for its start time/,
      false,
    ],
    SomethingNew: [/^waiting: SomethingNew$/, false],
  }
  for (const [reason, [message, blocked]] of Object.entries(reasons)) {
    test(`PENDING ${reason}`, () => {
      expect(mapSlurmState("PENDING", reason)).toMatchObject({
        kind: "pending",
        reason,
        message: expect.stringMatching(message),
        blocked,
      })
    })
  }

  test("every recorded row maps to the outcome its job had", () => {
    const rows = parseSqueue(fixture("squeue-all-states.txt"))
    const exits = parseScontrolJobs(fixture("scontrol-finished.txt"))
    const kinds = Object.fromEntries(
      rows.map((row) => {
        const exit = exits.get(row.arrayJobId ?? row.jobId)
        return [
          row.jobId,
          mapSlurmState(
            row.state,
            row.reason,
            exit && { exitCode: exit.exitCode ?? 0, signal: exit.signal ?? 0 },
          ).kind,
        ]
      }),
    )
    expect(kinds).toMatchObject({
      "79_0": "succeeded",
      "80_2": "failed",
      "81": "failed",
      "87": "killed",
      "92": "running",
      "93": "running",
      "89": "pending",
      "96": "pending",
      "95_0": "running",
      "82_[4-5%2]": "pending",
    })
    expect(Object.values(kinds)).not.toContain("unknown")
  })
})

describe("toOutcome", () => {
  test("terminal and running kinds carry the attempt; pending and unknown give none", () => {
    expect(toOutcome(mapSlurmState("OUT_OF_MEMORY", "OutOfMemory", "0:125"), "a-1")).toEqual({
      kind: "failed",
      attemptUid: "a-1",
      exitCode: 0,
      reason: "oom",
      message: "ran out of memory (over its --mem)",
    })
    expect(toOutcome(mapSlurmState("RUNNING"), "a-1")).toEqual({ kind: "running", attemptUid: "a-1" })
    expect(toOutcome(mapSlurmState("COMPLETED", "None", "0:0"), "a-1")).toEqual({
      kind: "succeeded",
      attemptUid: "a-1",
      exitCode: 0,
    })
    expect(toOutcome(mapSlurmState("CANCELLED"), "a-1")).toEqual({
      kind: "killed",
      reason: "cancelled",
      message: "cancelled",
    })
    expect(toOutcome(mapSlurmState("NODE_FAIL"), "a-1")).toMatchObject({
      kind: "worker_failed",
      attemptUid: "a-1",
    })
    expect(toOutcome(mapSlurmState("PREEMPTED"), "a-1")).toMatchObject({
      kind: "preempted",
      attemptUid: "a-1",
    })
    expect(toOutcome(mapSlurmState("PENDING", "Resources"), "a-1")).toBeUndefined()
    expect(toOutcome(mapSlurmState("WEIRD"), "a-1")).toBeUndefined()
  })
})
