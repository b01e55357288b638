import { availableParallelism, hostname, tmpdir } from "node:os"
import { resolve } from "node:path"
import { describe, expect, it } from "vitest"
import { parseEchoServer, parseRouter, parseWorker, UsageError } from "./cli"

const env = { SWARMPLANE_TOKEN: "sk-test" }
const minimal = ["--api", "http://127.0.0.1:8787", "--backend", "local-workers"]

describe("worker flags", () => {
  it("fills machine defaults and takes the token from the environment", () => {
    const config = parseWorker(minimal, env)
    if (config === "help") throw new Error("unexpected help")
    expect(config.token).toBe("sk-test")
    expect(config.advertiseHost).toBe("127.0.0.1")
    expect(config.registration).toMatchObject({
      backendId: "local-workers",
      name: hostname(),
      address: "127.0.0.1",
      resources: { cpu: availableParallelism(), gpu: 0 },
      attributes: {},
    })
    expect(config.registration.resources.memoryMiB).toBeGreaterThan(0)
  })

  it("takes every option", () => {
    const config = parseWorker(
      [
        ...["--api", "https://api.example.com", "--backend", "gpu-pool", "--group", "g1", "--name", "n1"],
        ...[
          "--instance-id",
          "i-1",
          "--cpu",
          "1.5",
          "--memory-mib",
          "2048",
          "--gpu",
          "8",
          "--gpu-type",
          "h100",
        ],
        ...["--attr", "zone=a", "--attr", "rack=r=1", "--advertise-host", "10.0.0.12", "--token", "sk-flag"],
      ],
      {},
    )
    if (config === "help") throw new Error("unexpected help")
    expect(config).toMatchObject({
      api: "https://api.example.com",
      token: "sk-flag",
      advertiseHost: "10.0.0.12",
    })
    expect(config.registration).toMatchObject({
      backendId: "gpu-pool",
      scaleGroup: "g1",
      name: "n1",
      instanceId: "i-1",
      address: "10.0.0.12",
      resources: { cpu: 1.5, memoryMiB: 2048, gpu: 8, gpuType: "h100" },
      attributes: { zone: "a", rack: "r=1" },
    })
  })

  it("answers --help", () => {
    expect(parseWorker(["--help"], {})).toBe("help")
  })

  it("sets up tasks: isolation auto, the state folder under XDG_STATE_HOME, working folders in the temp folder", () => {
    const config = parseWorker(minimal, { ...env, XDG_STATE_HOME: "/var/state" })
    if (config === "help") throw new Error("unexpected help")
    expect(config).toMatchObject({
      tokenFrom: "environment",
      isolation: "auto",
      hide: [],
      stateDir: "/var/state/swarmplane-agent",
      workRoot: tmpdir(),
      keepWorkDirs: false,
      passEnv: [],
    })
  })

  it("takes the token from --token-file instead of the environment, and every task option", () => {
    const config = parseWorker(
      [
        ...minimal,
        ...["--token-file", "-", "--isolation", "namespaces", "--hide", "/srv/plane", "--hide", "rel/dir"],
        ...["--state-dir", "/var/lib/agent", "--work-dir", "/scratch", "--keep-work-dirs"],
        ...["--pass-env", "HF_HOME", "--pass-env", "NCCL_*"],
      ],
      env,
    )
    if (config === "help") throw new Error("unexpected help")
    expect(config.token).toBeUndefined()
    expect(config).toMatchObject({
      tokenFile: "-",
      tokenFrom: "file",
      isolation: "namespaces",
      hide: ["/srv/plane", resolve("rel/dir")],
      stateDir: "/var/lib/agent",
      workRoot: "/scratch",
      keepWorkDirs: true,
      passEnv: ["HF_HOME", "NCCL_*"],
    })
  })

  const errors: Record<string, { args: string[]; env?: Record<string, string>; says: string }> = {
    "no --api": { args: ["--backend", "b"], says: "--api is required" },
    "a bad --api": { args: ["--api", "nope", "--backend", "b"], says: '--api: "nope" is not a URL' },
    "plain http to another host": {
      args: ["--api", "http://10.0.0.1", "--backend", "b"],
      says: "--allow-http",
    },
    "no token": { args: minimal, env: {}, says: "SWARMPLANE_TOKEN" },
    "no --backend": { args: ["--api", "https://x.example"], says: "--backend is required" },
    "an unknown flag": { args: [...minimal, "--gpus", "2"], says: "unknown option --gpus" },
    "a stray argument": { args: [...minimal, "extra"], says: 'unexpected argument "extra"' },
    "a flag without its value": { args: [...minimal, "--cpu"], says: "--cpu" },
    "a bad number": { args: [...minimal, "--gpu", "1.5"], says: '--gpu: "1.5" must be a whole number' },
    "a bad attribute": {
      args: [...minimal, "--attr", "novalue"],
      says: '--attr: "novalue" must be key=value',
    },
    "both --token and --token-file": {
      args: [...minimal, "--token", "sk-x", "--token-file", "/run/token"],
      says: "--token and --token-file: give one of them",
    },
    "an unknown --isolation": {
      args: [...minimal, "--isolation", "chroot"],
      says: '--isolation: "chroot" must be one of auto, namespaces, none',
    },
    "passing the agent's own variables": {
      args: [...minimal, "--pass-env", "SWARMPLANE_*"],
      says: '--pass-env: "SWARMPLANE_*" would pass the agent\'s own SWARMPLANE_ variables',
    },
    "passing a prefix of them": {
      args: [...minimal, "--pass-env", "SW*"],
      says: "would pass the agent's own SWARMPLANE_ variables",
    },
    "passing everything": {
      args: [...minimal, "--pass-env", "*"],
      says: '--pass-env: "*" must be a variable name',
    },
  }
  for (const [name, tc] of Object.entries(errors))
    it(`refuses ${name} with a one-line message naming the fix`, () => {
      let error: unknown
      try {
        parseWorker(tc.args, tc.env ?? env)
      } catch (e) {
        error = e
      }
      expect(error).toBeInstanceOf(UsageError)
      expect((error as Error).message).toContain(tc.says)
      expect((error as Error).message).not.toContain("\n")
    })
})

describe("server flags", () => {
  it("reads the echo server's port from --port or PORT, 0 by default", () => {
    expect(parseEchoServer([], {})).toEqual({ port: 0, host: "127.0.0.1" })
    expect(parseEchoServer([], { PORT: "8000", HOST: "0.0.0.0" })).toEqual({ port: 8000, host: "0.0.0.0" })
    expect(parseEchoServer(["--port", "9000"], { PORT: "8000" })).toMatchObject({ port: 9000 })
    expect(() => parseEchoServer([], { PORT: "http" })).toThrow('PORT: "http" must be a port number')
  })

  it("needs at least one valid upstream for the router", () => {
    expect(
      parseRouter(["--port", "9000", "--upstream", "http://a:1", "--upstream", "http://b:2"], {}),
    ).toEqual({
      port: 9000,
      host: "0.0.0.0",
      upstreams: [{ url: "http://a:1" }, { url: "http://b:2" }],
      reloadMs: 1000,
    })
    expect(() => parseRouter(["--upstream", "a:1"], {})).toThrow('"a:1" is not an http(s) URL')
  })

  it("takes --upstream-file alone, and keeps the order of --upstream and --upstream-file", () => {
    expect(parseRouter(["--upstream-file", "/shared/r_0.addr"], {})).toEqual({
      port: 0,
      host: "0.0.0.0",
      upstreams: [{ file: "/shared/r_0.addr" }],
      reloadMs: 1000,
    })
    expect(
      parseRouter(
        [
          ...["--upstream-file", "r_1.addr", "--upstream", "http://a:1", "--reload-ms", "250"],
          ...["--upstream-file=r_0.addr", "--upstream=http://b:2"],
        ],
        {},
      ),
    ).toMatchObject({
      upstreams: [{ file: "r_1.addr" }, { url: "http://a:1" }, { file: "r_0.addr" }, { url: "http://b:2" }],
      reloadMs: 250,
    })
    expect(parseRouter(["--upstream-file", "r.addr", "--help"], {})).toBe("help")
  })

  const routerErrors: Record<string, { args: string[]; says: string }> = {
    "neither --upstream nor --upstream-file": {
      args: ["--port", "9000"],
      says: "--upstream, --upstream-file or --upstream-list: give at least one replica",
    },
    "a --reload-ms that is not a number": {
      args: ["--upstream-file", "r.addr", "--reload-ms", "often"],
      says: '--reload-ms: "often" must be a whole number of at least 100',
    },
    "a --reload-ms below 100": {
      args: ["--upstream-file", "r.addr", "--reload-ms", "50"],
      says: '--reload-ms: "50" must be a whole number of at least 100',
    },
    "a fractional --reload-ms": {
      args: ["--upstream-file", "r.addr", "--reload-ms", "150.5"],
      says: "--reload-ms",
    },
    "an empty --upstream-file": { args: ["--upstream-file", ""], says: "--upstream-file: give the path" },
    "--upstream-file without its value": { args: ["--upstream-file"], says: "--upstream-file" },
  }
  for (const [name, tc] of Object.entries(routerErrors))
    it(`refuses ${name} in the router with a one-line message`, () => {
      let error: unknown
      try {
        parseRouter(tc.args, {})
      } catch (e) {
        error = e
      }
      expect(error).toBeInstanceOf(UsageError)
      expect((error as Error).message).toContain(tc.says)
      expect((error as Error).message).not.toContain("\n")
    })
})
