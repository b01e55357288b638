/** The merge patch an update of a swarm's deployment sends: only what changed, Lepton's own defaults left alone. */
import { describe, expect, test } from "vitest"
import { mergePatchOf } from "./serving"

describe("mergePatchOf", () => {
  const current = {
    container: { image: "echo:1", command: ["serve"], ports: [{ container_port: 8000 }] },
    resource_requirement: { resource_shape: "cpu.small", min_replicas: 1, max_replicas: 1, replicas: 1 },
    envs: [{ name: "MODEL", value: "echo" }],
    // A field Lepton filled in that swarmplane never sets.
    health: { liveness: { initial_delay_seconds: 600 } },
  }

  test("a new replica count patches only the range", () => {
    const wanted = {
      container: { image: "echo:1", command: ["serve"], ports: [{ container_port: 8000 }] },
      resource_requirement: { resource_shape: "cpu.small", min_replicas: 3, max_replicas: 3 },
      envs: [{ name: "MODEL", value: "echo" }],
    }
    expect(mergePatchOf(current, wanted)).toEqual({
      resource_requirement: { min_replicas: 3, max_replicas: 3 },
    })
  })

  test("nothing changed: no patch", () => {
    const { health: _, ...same } = current
    expect(mergePatchOf(current, same)).toBeUndefined()
  })

  test("a list that changed is sent whole (a merge patch replaces lists)", () => {
    const wanted = {
      envs: [
        { name: "MODEL", value: "echo" },
        { name: "X", value: "1" },
      ],
    }
    expect(mergePatchOf(current, wanted)).toEqual(wanted)
  })

  test("a field Lepton lacks is sent", () => {
    expect(mergePatchOf(current, { api_tokens: [] })).toEqual({ api_tokens: [] })
  })
})
