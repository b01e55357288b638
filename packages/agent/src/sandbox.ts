/**
 * Where an attempt runs. With `unshare` (Linux, util-linux) each attempt gets private mount and pid
 * namespaces: an empty read-only folder over each hidden path (the control plane's data, the CLI's
 * config, the agent's state), its own /proc (so it cannot see, signal or read the agent or any other
 * attempt), and no capability left to undo that. Without it, the attempt runs as the agent's user with
 * what that user can read. Either way the attempt waits at a gate (a line on its stdin) until the agent
 * has recorded its process group, so nothing runs that a restarted agent could not find and reap.
 */
import { spawnSync } from "node:child_process"
import { userInfo } from "node:os"
import { isAbsolute, relative, resolve } from "node:path"
import type { TaskUser } from "./task-user"

/** What the agent reports as its worker attribute `isolation`. */
export type Isolation = "namespaces" | "none"

/** `--isolation`: use namespaces when they work (`auto`), insist on them, or never use them. */
export const IsolationModes = ["auto", "namespaces", "none"] as const
export type IsolationMode = (typeof IsolationModes)[number]

/** The word the agent writes on an attempt's stdin once its group is recorded: then it runs. */
export const GateWord = "run"

/** The exit code of an attempt that never ran: the gate stayed shut, or a hidden path could not be hidden. */
export const NotRunExitCode = 125

export interface Sandbox {
  readonly isolation: Isolation
  /** Paths attempts see as empty (nothing when `isolation` is none). */
  readonly hidden: readonly string[]
  /** One line for the agent's log: which isolation is in effect. */
  readonly summary: string
  /** The argv that runs `argv` (already resolved) this way, once `GateWord` arrives on stdin. */
  wrap(argv: readonly string[]): string[]
}

const gate = `read -r go && [ "$go" = ${GateWord} ] || exit ${NotRunExitCode}`

/**
 * The namespace's first process (pid 1): hide each path, mount /proc, then run the attempt as a child
 * and exit with its status. Not `exec`: pid 1 ignores signals it has no handler for, so the attempt
 * must not be pid 1, or SIGTERM (a stop) would not reach it. When pid 1 exits, the kernel kills what
 * is left in the namespace.
 */
const setup = [
  gate,
  'n=$1; shift; while [ "$n" -gt 0 ]; do',
  '  if [ -d "$1" ]; then mount -t tmpfs -o ro,nosuid,nodev,noexec,size=4k,mode=0555 swarmplane-hidden "$1"',
  '  elif [ -e "$1" ]; then mount --bind /dev/null "$1"',
  `  fi || { echo "swarmplane-agent: could not hide $1 from the attempt; it did not run" >&2; exit ${NotRunExitCode}; }`,
  "  n=$((n-1)); shift",
  "done",
  `mount -t proc -o nosuid,nodev,noexec proc /proc || { echo "swarmplane-agent: could not mount /proc; the attempt did not run" >&2; exit ${NotRunExitCode}; }`,
  '"$@" </dev/null',
  "exit $?",
].join("\n")

/**
 * The namespaces, as `unshare` makes them: a user namespace where the agent maps itself to root (so an
 * unprivileged agent may mount), or, for an agent that is root, none. `--kill-child`: the namespace
 * dies with its `unshare`, which the attempt's group (and so its watcher) includes.
 */
const outers = {
  user: [
    "unshare",
    "--user",
    "--map-root-user",
    "--mount",
    "--pid",
    "--fork",
    "--kill-child",
    "--propagation",
    "private",
    "--",
  ],
  root: ["unshare", "--mount", "--pid", "--fork", "--kill-child", "--propagation", "private", "--"],
} as const

/**
 * How the attempt gives up the power to undo the mounts: a nested user namespace that maps it back to
 * the agent's own user (it has no capability over the mounts, which belong to the outer one, and
 * programs see their real uid), or, where `unshare` cannot map a user, dropping every capability.
 */
function drops(uid: number, gid: number) {
  return {
    user: ["unshare", "--user", `--map-user=${uid}`, `--map-group=${gid}`, "--"],
    caps: ["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--"],
  } as const
}

export interface Variant {
  outer: keyof typeof outers
  drop: "user" | "caps"
}

/** The variants tried at start, best first; a root agent can do without the outer user namespace. */
export function variants(isRoot: boolean): Variant[] {
  const all: Variant[] = [
    { outer: "user", drop: "user" },
    { outer: "user", drop: "caps" },
  ]
  if (isRoot) all.push({ outer: "root", drop: "user" }, { outer: "root", drop: "caps" })
  return all
}

/** Run attempts in namespaces with `hidden` paths, the `variant` way (see `detectSandbox`). */
export function namespaceSandbox(hidden: readonly string[], variant: Variant, user?: TaskUser): Sandbox {
  const ids = user ?? { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 }
  const drop = drops(ids.uid, ids.gid)[variant.drop]
  const as = user ? ` as ${user.name}` : ""
  return {
    isolation: "namespaces",
    hidden,
    summary: `tasks run${as} in a private mount+pid namespace; hidden: ${hidden.join(", ") || "nothing"}`,
    wrap: (argv) => [
      ...outers[variant.outer],
      "sh",
      "-c",
      setup,
      "swarmplane-sandbox",
      String(hidden.length),
      ...hidden,
      ...drop,
      ...argv,
    ],
  }
}

/** Run attempts as the agent's user (or `user`), with what it can read (only the gate in front). */
export function plainSandbox(why: string, user?: TaskUser): Sandbox {
  return {
    isolation: "none",
    hidden: [],
    summary: user
      ? `${why}: tasks run as ${user.name}, with what ${user.name} may read`
      : `${why}: tasks run as ${userName()} with your files`,
    wrap: (argv) => ["sh", "-c", `${gate}\nexec "$@" </dev/null`, "swarmplane-task", ...argv],
  }
}

export interface DetectOptions {
  mode: IsolationMode
  /** Absolute paths attempts must not see (see `hiddenPathIssue`). */
  hide: readonly string[]
  /** The user attempts run as (`--task-user`), when not the agent's. */
  user?: TaskUser
  /** For tests: the variants to try (default: `variants` for this agent). */
  tryVariants?: Variant[]
}

/**
 * Find, once at start, the best isolation that works here: each variant runs a probe (as the attempts'
 * user) that checks the hidden paths look empty. `mode: "namespaces"` throws when none works, with
 * the reason.
 */
export function detectSandbox({ mode, hide, user, tryVariants }: DetectOptions): Sandbox {
  if (mode === "none") return plainSandbox("namespace isolation is off (--isolation none)", user)
  let reason = "unshare runs on Linux only"
  if (process.platform === "linux") {
    const candidates = tryVariants ?? variants((user?.uid ?? process.getuid?.()) === 0)
    for (const variant of candidates) {
      const sandbox = namespaceSandbox(hide, variant, user)
      const failure = probe(sandbox, user)
      if (failure === undefined) return sandbox
      reason = failure
      if (/ENOENT/.test(failure)) break
    }
  }
  if (mode === "namespaces")
    throw new Error(
      `--isolation namespaces: tasks cannot run in namespaces here (${reason}); allow user namespaces, run the agent as root, or use --isolation auto`,
    )
  return plainSandbox(`no namespace isolation available (${reason})`, user)
}

/** Undefined when the sandbox works (the probe ran and saw every hidden path empty), else why not. */
function probe(sandbox: Sandbox, user: TaskUser | undefined): string | undefined {
  const check =
    'for p; do if [ -d "$p" ]; then [ -z "$(ls -A "$p")" ] || exit 3; elif [ -e "$p" ]; then [ ! -s "$p" ] || exit 3; fi; done'
  const [file, ...args] = sandbox.wrap(["sh", "-c", check, "swarmplane-probe", ...sandbox.hidden])
  const result = spawnSync(file ?? "", args, {
    input: `${GateWord}\n`,
    encoding: "utf8",
    timeout: 10_000,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
    cwd: "/",
    ...(user ? { uid: user.uid, gid: user.gid } : {}),
  })
  if (result.error) return `${file}: ${(result.error as NodeJS.ErrnoException).code ?? result.error.message}`
  if (result.status === 0) return undefined
  if (result.status === 3) return "a hidden path was still visible"
  const said = result.stderr.trim().split("\n")[0]
  return said || `the probe exited with ${result.status ?? result.signal}`
}

/**
 * Why `--hide path` cannot be used, or undefined: it must be absolute and must not hold what attempts
 * need (the working folders, this Node and this agent).
 */
export function hiddenPathIssue(
  path: string,
  needed: Record<string, string>,
  flag = "--hide",
): string | undefined {
  if (!isAbsolute(path)) return `${flag}: "${path}" must be an absolute path`
  for (const [what, need] of Object.entries(needed))
    if (contains(path, need))
      return `${flag}: ${path} holds ${what} (${need}), which tasks need, and tasks do not see it; use a folder that does not`
  return undefined
}

function contains(folder: string, path: string): boolean {
  const rel = relative(resolve(folder), resolve(path))
  return rel === "" || (!rel.startsWith("..") && !isAbsolute(rel))
}

function userName(): string {
  try {
    return userInfo().username
  } catch {
    return `uid ${process.getuid?.() ?? "?"}`
  }
}
