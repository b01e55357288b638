import { describe, expect, test } from "vitest"
import { holds } from "./constraints"
import { place } from "./place"
import { job, snapshot, where, worker } from "./testing"
import type { Constraint, PlaceOptions } from "./types"

describe("fits by each resource", () => {
  const cases = {
    cpu: {
      w: worker("w").cpu(4),
      fits: job("j").cpu(4),
      over: job("j").cpu(4.25),
      why: "needs 4.25 cpu, largest free is 4",
    },
    memory: {
      w: worker("w").mem(16),
      fits: job("j").mem(16),
      over: job("j").mem(17),
      why: "needs 17 GiB memory, largest free is 16 GiB",
    },
    gpu: {
      w: worker("w").gpu(4),
      fits: job("j").gpu(4),
      over: job("j").gpu(8),
      why: "needs 8 gpu, largest free is 4",
    },
    tpu: {
      w: worker("w").tpu(4),
      fits: job("j").tpu(4),
      over: job("j").tpu(5),
      why: "needs 5 tpu, largest free is 4",
    },
  }
  for (const [name, tc] of Object.entries(cases)) {
    test(`${name}: exactly enough fits`, () => {
      expect(where(place(snapshot([tc.w], [tc.fits])))).toEqual({ "j/0": "w" })
    })
    test(`${name}: one more does not, and says so`, () => {
      const p = place(snapshot([tc.w], [tc.over]))
      expect(p.assignments).toEqual([])
      expect(p.pending.get("j/0")).toBe(tc.why)
    })
  }

  test("running tasks and this pass's assignments use up free room", () => {
    const w = worker("w").cpu(8).running("old", 0, { cpu: 5 })
    const p = place(snapshot([w], [job("a").cpu(2), job("b").cpu(2)]))
    expect(where(p)).toEqual({ "a/0": "w" })
    expect(p.pending.get("b/0")).toBe("needs 2 cpu, largest free is 1")
  })
})

describe("constraint operators (validate.py semantics)", () => {
  const attrs = { zone: " US-East-1A ", cores: 32, label: "7" }
  const cases: [string, Constraint, boolean][] = [
    ["eq is trimmed and lowercased", { key: "zone", op: "eq", values: ["us-east-1a"] }, true],
    ["eq on another value", { key: "zone", op: "eq", values: ["us-east-1b"] }, false],
    ["eq number vs string never equal", { key: "label", op: "eq", values: [7] }, false],
    ["eq absent is false", { key: "rack", op: "eq", values: ["r1"] }, false],
    ["ne holds on a different value", { key: "zone", op: "ne", values: ["eu"] }, true],
    ["ne absent is false", { key: "rack", op: "ne", values: ["r1"] }, false],
    ["exists", { key: "cores", op: "exists", values: [] }, true],
    ["exists absent", { key: "rack", op: "exists", values: [] }, false],
    ["not_exists absent is true", { key: "rack", op: "not_exists", values: [] }, true],
    ["not_exists present", { key: "zone", op: "not_exists", values: [] }, false],
    ["in", { key: "zone", op: "in", values: ["eu", "US-EAST-1A"] }, true],
    ["in, no match", { key: "zone", op: "in", values: ["eu", "asia"] }, false],
    ["gt numeric", { key: "cores", op: "gt", values: [16] }, true],
    ["ge equal", { key: "cores", op: "ge", values: [32] }, true],
    ["lt numeric", { key: "cores", op: "lt", values: [32] }, false],
    ["le numeric", { key: "cores", op: "le", values: [32] }, true],
    ["gt on a string attribute is false", { key: "label", op: "gt", values: [1] }, false],
    ["gt with a string value is false", { key: "cores", op: "gt", values: ["1"] }, false],
    ["lt absent is false", { key: "rack", op: "lt", values: [1] }, false],
  ]
  for (const [name, c, expected] of cases) {
    test(`holds: ${name}`, () => expect(holds(attrs, c)).toBe(expected))
    test(`place: ${name}`, () => {
      const w = worker("w")
      for (const [k, v] of Object.entries(attrs)) w.attr(k, v)
      const j = job("j").where(c.key, c.op, ...c.values)
      expect(place(snapshot([w], [j])).assignments.length).toBe(expected ? 1 : 0)
    })
  }

  test("a prototype key is not an attribute", () => {
    expect(holds({}, { key: "constructor", op: "exists", values: [] })).toBe(false)
  })

  test("reason names the constraint no worker matches", () => {
    const p = place(
      snapshot([worker("w").attr("accelerator", "a100")], [job("j").where("accelerator", "eq", "H100")]),
    )
    expect(p.pending.get("j/0")).toBe("no worker matches constraint accelerator eq h100")
  })

  test("reason when constraints only fail together", () => {
    const ws = [worker("a").attr("zone", "a"), worker("b").attr("gpu", "yes")]
    const p = place(snapshot(ws, [job("j").where("zone", "eq", "a").where("gpu", "exists")]))
    expect(p.pending.get("j/0")).toBe("no worker matches all of: zone eq a, gpu exists")
  })
})

describe("device variant", () => {
  test("matches accelerator or device-variant, case-insensitively", () => {
    const ws = [
      worker("h").attr("accelerator", "h100"),
      worker("a1").attr("accelerator", "A100 "),
      worker("a2").attr("device-variant", "a100"),
    ]
    const p = place(snapshot(ws, [job("j").variant("a100").tasks(3)]))
    expect(where(p)).toEqual({ "j/0": "a1", "j/1": "a1", "j/2": "a1" })
  })
  test("device-variant attribute alone is enough", () => {
    const p = place(
      snapshot(
        [worker("h").attr("accelerator", "h100"), worker("a").attr("device-variant", "a100")],
        [job("j").variant("a100")],
      ),
    )
    expect(where(p)).toEqual({ "j/0": "a" })
  })
  test("no such variant: reason", () => {
    const p = place(snapshot([worker("h").attr("accelerator", "h100")], [job("j").variant("a100")]))
    expect(p.pending.get("j/0")).toBe("needs device variant a100: no such worker")
  })
})

describe("preferences", () => {
  test("higher score first, ties in worker order, weights add up", () => {
    const ws = [
      worker("w1").attr("zone", "a"),
      worker("w2").attr("zone", "b"),
      worker("w3").attr("zone", "b").attr("ssd", "yes"),
      worker("w4").attr("zone", "b").attr("ssd", "yes"),
    ]
    const j = job("j").cpu(8).tasks(4).prefer("zone", "eq", ["b"], 1).prefer("ssd", "exists", [], 2)
    expect(place(snapshot(ws, [j])).assignments.map((a) => a.workerId)).toEqual(["w3", "w4", "w2", "w1"])
  })
})

describe("gangs", () => {
  const racks = () => [
    worker("a1").gpu(8).attr("rack", "a"),
    worker("a2").gpu(8).attr("rack", "a"),
    worker("b1").gpu(8).attr("rack", "b"),
    worker("b2").gpu(8).attr("rack", "b"),
    worker("b3").gpu(8).attr("rack", "b"),
    worker("none").gpu(8),
  ]
  test("all tasks on distinct workers of one group", () => {
    const p = place(snapshot(racks(), [job("g").gpu(8).tasks(3).gang("rack")]))
    expect(where(p)).toEqual({ "g/0": "b1", "g/1": "b2", "g/2": "b3" })
    expect(p.stats).toEqual({ tasksPlaced: 3, gangsPlaced: 1, gangsUnplaced: 0 })
  })
  test("no group has enough members: none placed, with a reason", () => {
    const p = place(snapshot(racks(), [job("g").gpu(8).tasks(4).gang("rack")]))
    expect(p.assignments).toEqual([])
    expect(p.stats.gangsUnplaced).toBe(1)
    for (const t of ["g/0", "g/1", "g/2", "g/3"])
      expect(p.pending.get(t)).toBe("gang of 4 by rack: largest group has 3 matching workers")
  })
  test("members without room do not count: largest group has 2 fitting workers", () => {
    const ws = racks()
    ws[2]!.running("busy", 0, { gpu: 4 })
    const p = place(snapshot(ws, [job("g").gpu(8).tasks(3).gang("rack")]))
    expect(p.assignments).toEqual([])
    expect(p.pending.get("g/0")).toBe("gang of 3 by rack: largest group has 2 fitting workers")
  })
  test("without groupBy, any distinct workers", () => {
    const p = place(snapshot(racks(), [job("g").gpu(8).tasks(6).gang()]))
    expect(new Set(p.assignments.map((a) => a.workerId)).size).toBe(6)
  })
  test("gangs go before ordinary tasks of the same band queued ahead of them", () => {
    const ws = [worker("r1").gpu(8).attr("rack", "r"), worker("r2").gpu(8).attr("rack", "r")]
    const p = place(snapshot(ws, [job("solo").gpu(8), job("g").gpu(8).tasks(2).gang("rack")]))
    expect(where(p)).toEqual({ "g/0": "r1", "g/1": "r2" })
    expect(p.pending.get("solo/0")).toBe("needs 8 gpu, largest free is 0")
  })
})

describe("ordering and blocking", () => {
  test("band 0 before 1 before 2, stable within a band", () => {
    const jobs = [job("b2").band(2), job("b1x").band(1), job("b0").band(0), job("b1y").band(1)]
    const p = place(snapshot([worker("w").cpu(3)], jobs))
    expect(p.assignments.map((a) => a.taskId)).toEqual(["b0/0", "b1x/0", "b1y/0"])
    expect(p.pending.get("b2/0")).toBe("needs 1 cpu, largest free is 0")
  })
  test("no head-of-line blocking: a huge job queued first does not stop a small one", () => {
    const p = place(
      snapshot([worker("w").cpu(10)], [job("huge").cpu(64).band(0), job("small").cpu(2).band(2)]),
    )
    expect(where(p)).toEqual({ "small/0": "w" })
    expect(p.pending.get("huge/0")).toBe("needs 64 cpu, largest free is 8")
  })
  test("a job that stops fitting keeps its remaining tasks pending, others go on", () => {
    const p = place(snapshot([worker("w").cpu(5)], [job("a").cpu(2).tasks(3), job("b").cpu(1)]))
    expect(where(p)).toEqual({ "a/0": "w", "a/1": "w", "b/0": "w" })
    expect(p.pending.get("a/2")).toBe("needs 2 cpu, largest free is 0")
  })
  test("unknown job", () => {
    const s = snapshot([worker("w")], [])
    s.tasks.push({ id: "x/0", jobId: "x" })
    expect(place(s).pending.get("x/0")).toBe("unknown job x")
  })
})

describe("per-pass caps", () => {
  const caps: [string, PlaceOptions, number][] = [
    ["maxAssignmentsPerWorker", { maxAssignmentsPerWorker: 2 }, 2],
    ["maxBuildingPerWorker counts running building tasks", { maxBuildingPerWorker: 3 }, 2],
    ["both: the tighter wins", { maxAssignmentsPerWorker: 1, maxBuildingPerWorker: 3 }, 1],
  ]
  for (const [name, options, n] of caps)
    test(name, () => {
      const w = worker("w").cpu(64).running("old", 1, { cpu: 1 }, true)
      const p = place(snapshot([w], [job("j").tasks(5)]), options)
      expect(p.assignments.length).toBe(n)
      expect(p.pending.get("j/4")).toMatch(/^worker caps reached this pass/)
    })
  test("a capped worker is skipped, the next one is used", () => {
    const p = place(snapshot([worker("w1"), worker("w2")], [job("j").tasks(3)]), {
      maxAssignmentsPerWorker: 2,
    })
    expect(where(p)).toEqual({ "j/0": "w1", "j/1": "w1", "j/2": "w2" })
  })
})

describe("preemption", () => {
  const full = (id: string, band: 0 | 1 | 2) => worker(id).cpu(4).running(`${id}-t`, band, { cpu: 4 })
  test("off by default", () => {
    const p = place(snapshot([full("w", 2)], [job("j").cpu(4).band(0)]))
    expect(p.preemptions).toEqual([])
    expect(p.assignments).toEqual([])
  })
  test("evicts a strictly lower band to make room", () => {
    const p = place(snapshot([full("w", 2)], [job("j").cpu(4).band(1)]), { preemption: true })
    expect(p.preemptions).toEqual([{ taskId: "w-t", workerId: "w", forTaskId: "j/0" }])
    expect(where(p)).toEqual({ "j/0": "w" })
  })
  test("never evicts an equal or higher band", () => {
    const p = place(snapshot([full("w1", 1), full("w2", 0)], [job("j").cpu(4).band(1)]), { preemption: true })
    expect(p.preemptions).toEqual([])
    expect(p.pending.get("j/0")).toMatch(/preempting band 2\+ tasks would not make room$/)
  })
  test("prefers the worker needing the fewest, then the lowest-priority victims", () => {
    const two = worker("two").cpu(4).running("x", 2, { cpu: 2 }).running("y", 2, { cpu: 2 })
    const interactive = full("interactive", 1)
    const batch = full("batch", 2)
    const p = place(snapshot([two, interactive, batch], [job("j").cpu(4).band(0)]), { preemption: true })
    expect(p.preemptions).toEqual([{ taskId: "batch-t", workerId: "batch", forTaskId: "j/0" }])
  })
  test("evicts only what is needed", () => {
    const w = worker("w").cpu(4).running("small", 2, { cpu: 1 }).running("big", 2, { cpu: 3 })
    const p = place(snapshot([w], [job("j").cpu(3).band(0)]), { preemption: true })
    expect(p.preemptions.map((e) => e.taskId)).toEqual(["big"])
  })
})

test("deterministic: the same snapshot gives the same placement", () => {
  const s = () =>
    snapshot(
      [worker("a").cpu(4).attr("zone", "x"), worker("b").cpu(4).attr("zone", "y"), worker("c").cpu(2)],
      [
        job("p").cpu(1).tasks(5).prefer("zone", "eq", ["y"]),
        job("q").cpu(2).tasks(3).band(0),
        job("huge").cpu(9),
      ],
    )
  const first = place(s())
  expect(place(s())).toEqual(first)
  expect(first.assignments.length).toBe(7)
})
