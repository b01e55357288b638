/**
 * SSH to a cluster's login node through ssh2. One connection per login (host, port, user, pinned host
 * key, private key) is shared by every backend instance of the process and kept while the process
 * lives (keep-alives; closed after it has been idle a while; reconnected when it drops), so a reconcile
 * pass costs one exec, not a handshake. Exec channels on it carry the scripts on stdin, so nothing is
 * copied to the login node; Nagle is off (commands answer in milliseconds instead of ~45 ms).
 *
 * No fault of the login node may crash the process or hang a caller: every ssh2 event is handled,
 * connect (TCP + handshake), channel open and command each have a deadline, and each failure becomes
 * a `BackendError` that says what happened (refused, no SSH handshake, changed host key, timed out).
 * An idle connection does not keep the process alive (its socket is unref'd between commands).
 * ssh2 is loaded only here, lazily.
 */
import { createHash } from "node:crypto"
import { type Socket, connect as tcpConnect } from "node:net"
import { BackendError, VisibleError } from "../../util/errors"

export interface SshTarget {
  host: string
  port: number
  user: string
  privateKey: string
  /** Pinned host key: a known_hosts style line (`ssh-ed25519 AAAA...`) or its `SHA256:` fingerprint. */
  hostKey: string
  connectTimeoutS: number
  commandTimeoutS: number
}

export interface ExecResult {
  code: number
  stdout: string
  stderr: string
}

/** The SHA256 fingerprint of a host key blob, as OpenSSH prints it. */
export function fingerprint(blob: Buffer): string {
  return `SHA256:${createHash("sha256").update(blob).digest("base64").replace(/=+$/, "")}`
}

/** Whether the key the server presents is the pinned one. */
export function hostKeyMatches(pinned: string, presented: Buffer): boolean {
  const want = pinned.trim()
  if (want.startsWith("SHA256:")) return want.replace(/=+$/, "") === fingerprint(presented)
  // `[host]:port ssh-ed25519 AAAA... comment` or `ssh-ed25519 AAAA...`: the base64 blob is the field after the type.
  const fields = want.split(/\s+/)
  const at = fields.findIndex((f) => /^(ssh-|ecdsa-|sk-)/.test(f))
  const blob = at >= 0 ? fields[at + 1] : undefined
  return blob !== undefined && Buffer.from(blob, "base64").equals(presented)
}

type Ssh2Client = import("ssh2").Client

/** Channels open at once on one connection (OpenSSH's MaxSessions defaults to 10). */
const MaxChannels = 8
/** After a failed connect, calls fail at once with the same error for this long. */
export const FailFastMs = 10_000

export class SshSession {
  /** Commands run by every session of this process (what the benchmark counts). */
  static totalCommands = 0
  /** SSH handshakes made by every session of this process. */
  static totalConnects = 0
  /** Commands run on this session. */
  commands = 0
  private client: Ssh2Client | undefined
  private socket: Socket | undefined
  private connecting: Promise<Ssh2Client> | undefined
  private active = 0
  private failed: { at: number; error: unknown } | undefined
  private readonly queue: (() => void)[] = []

  constructor(private readonly target: SshTarget) {}

  private where(): string {
    return `${this.target.user}@${this.target.host}:${this.target.port}`
  }

  /** TCP connect, then the SSH handshake, within `connectTimeoutS` in all. */
  private async connect(): Promise<Ssh2Client> {
    // ssh2 is CommonJS: its named exports come through `default` under some loaders.
    const loaded = await import("ssh2")
    const ssh2 = (loaded as unknown as { default?: typeof loaded }).default ?? loaded
    const t = this.target
    const parsed = ssh2.utils.parseKey(t.privateKey)
    if (parsed instanceof Error)
      throw new VisibleError(
        "backend.ssh_key_invalid",
        `the SSH key for ${t.user}@${t.host} is not a private key ssh2 can read (${parsed.message}); check the backend's sshKeySecret`,
      )
    const deadline = Date.now() + t.connectTimeoutS * 1000
    const socket = await new Promise<Socket>((resolve, reject) => {
      const sock = tcpConnect({ host: t.host, port: t.port })
      const timer = setTimeout(() => {
        sock.destroy()
        reject(
          new BackendError(`ssh to ${this.where()}: no TCP connection within ${t.connectTimeoutS}s`, true),
        )
      }, t.connectTimeoutS * 1000)
      sock.once("connect", () => {
        clearTimeout(timer)
        sock.removeAllListeners("error")
        resolve(sock)
      })
      sock.once("error", (error: NodeJS.ErrnoException) => {
        clearTimeout(timer)
        sock.destroy()
        const why =
          error.code === "ECONNREFUSED"
            ? "connection refused (is sshd running on that port?)"
            : error.code === "ENOTFOUND" || error.code === "EAI_AGAIN"
              ? `unknown host ${t.host}`
              : error.message
        reject(new BackendError(`ssh to ${this.where()}: ${why}`, true, { cause: error }))
      })
    })
    socket.setNoDelay(true)
    socket.setKeepAlive(true, 10_000)
    // Errors after the connect are the client's to report; this one only keeps the socket from throwing.
    socket.on("error", () => undefined)
    SshSession.totalConnects++
    const client = new ssh2.Client()
    let presented: string | undefined
    let ready = false
    // Every error the client emits, at any time, lands here: never an unhandled 'error' event.
    let failConnect: (error: Error) => void = () => undefined
    client.on("error", (error: Error) => {
      if (!ready) failConnect(error)
      this.drop(client)
    })
    client.on("close", () => this.drop(client))
    client.on("end", () => this.drop(client))
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => {
          failConnect(new Error(`no SSH handshake within ${t.connectTimeoutS}s`))
        },
        Math.max(1, deadline - Date.now()),
      )
      failConnect = (error: Error) => {
        clearTimeout(timer)
        failConnect = () => undefined
        // The socket is ours (ssh2 was given it): close it, or a hung peer keeps it open for ever.
        socket.destroy()
        if (presented)
          reject(
            new VisibleError(
              "backend.host_key_changed",
              `the host key of ${t.host}:${t.port} is ${presented}, not the pinned one; if the change is expected, update the backend's hostKey`,
              409,
            ),
          )
        else
          reject(
            new BackendError(
              /handshake|Connection lost/i.test(error.message)
                ? `ssh to ${this.where()}: the port accepts connections but did not complete an SSH handshake within ${t.connectTimeoutS}s`
                : /authentication/i.test(error.message)
                  ? `ssh to ${this.where()}: the login node refused the key (${error.message}); check the backend's user and sshKeySecret`
                  : `ssh to ${this.where()} failed: ${error.message}`,
              !/authentication/i.test(error.message),
              { cause: error },
            ),
          )
      }
      client.once("ready", () => {
        clearTimeout(timer)
        ready = true
        failConnect = () => undefined
        resolve()
      })
      client.connect({
        sock: socket,
        username: t.user,
        privateKey: t.privateKey,
        // Our own timer bounds the handshake; ssh2's would emit a second error after ours.
        readyTimeout: 0,
        keepaliveInterval: 10_000,
        keepaliveCountMax: 3,
        hostVerifier: (key: Buffer) => {
          if (hostKeyMatches(t.hostKey, key)) return true
          presented = fingerprint(key)
          return false
        },
      })
    })
    this.socket = socket
    return client
  }

  /** Forget a client that failed or closed; the next command reconnects. */
  private drop(client: Ssh2Client): void {
    if (this.client === client) {
      this.client = undefined
      this.socket?.destroy()
      this.socket = undefined
    }
    try {
      client.destroy()
    } catch {}
  }

  private async ensure(): Promise<Ssh2Client> {
    if (this.client) return this.client
    // A login node that just failed to connect fails the same way for a while: answer at once rather
    // than wait out another connect timeout (a hung port would cost every call of a pass 15 s).
    if (this.failed && Date.now() - this.failed.at < FailFastMs) throw this.failed.error
    this.connecting ??= this.connect()
      .then(
        (client) => {
          this.failed = undefined
          return client
        },
        (error: unknown) => {
          this.failed = { at: Date.now(), error }
          throw error
        },
      )
      .finally(() => (this.connecting = undefined))
    const client = await this.connecting
    this.client ??= client
    return this.client
  }

  /** Wait for a free channel slot; the socket keeps the process alive only while commands run. */
  private async slot(): Promise<() => void> {
    if (this.active >= MaxChannels) await new Promise<void>((resolve) => this.queue.push(resolve))
    this.active++
    this.socket?.ref()
    return () => {
      this.active--
      this.queue.shift()?.()
      if (this.active === 0) this.socket?.unref()
    }
  }

  /**
   * Run one command (with `stdin` if given). A connection that dropped (or died while idle) is
   * reconnected once; commands sent here must be safe to run again for that reason (submits adopt).
   */
  async exec(command: string, stdin?: string): Promise<ExecResult> {
    const release = await this.slot()
    try {
      for (let attempt = 0; ; attempt++) {
        const client = await this.ensure()
        this.socket?.ref()
        try {
          const result = await this.run(client, command, stdin)
          this.commands++
          SshSession.totalCommands++
          return result
        } catch (error) {
          if (attempt > 0 || !(error instanceof SshCommandError) || !error.reconnect) throw error
          this.drop(client)
        }
      }
    } finally {
      release()
    }
  }

  private run(client: Ssh2Client, command: string, stdin?: string): Promise<ExecResult> {
    const t = this.target
    return new Promise((resolve, reject) => {
      let settled = false
      let channel: import("ssh2").ClientChannel | undefined
      const finish = (fn: () => void) => {
        if (settled) return
        settled = true
        clearTimeout(openTimer)
        clearTimeout(runTimer)
        fn()
      }
      // Opening a channel is one round trip: a connection that cannot do it in the connect timeout is
      // hung (or died while idle). The command was not sent, so it is safe to reconnect and send it.
      const openTimer = setTimeout(() => {
        finish(() =>
          reject(
            new SshCommandError(
              `${t.host} did not open a command channel within ${t.connectTimeoutS}s`,
              true,
            ),
          ),
        )
        this.drop(client)
      }, t.connectTimeoutS * 1000)
      let runTimer: ReturnType<typeof setTimeout> | undefined
      try {
        client.exec(command, (error, opened) => {
          clearTimeout(openTimer)
          if (error)
            return finish(() =>
              reject(new SshCommandError(`ssh exec on ${t.host} failed: ${error.message}`, true, error)),
            )
          channel = opened
          if (settled) return void opened.close()
          let stdout = ""
          let stderr = ""
          opened.on("error", () => undefined)
          opened.stderr.on("error", () => undefined)
          opened.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
          opened.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
          opened.once("close", (code: number | null | undefined) => {
            if (typeof code === "number") finish(() => resolve({ code, stdout, stderr }))
            // No exit status: the connection went away under the command; it may or may not have run.
            else
              finish(() =>
                reject(new SshCommandError(`the connection to ${t.host} closed during a command`, false)),
              )
          })
          runTimer = setTimeout(() => {
            finish(() =>
              reject(
                new SshCommandError(
                  `a command on ${t.host} timed out after ${t.commandTimeoutS}s: ${command.slice(0, 80)}`,
                  false,
                ),
              ),
            )
            channel?.close()
          }, t.commandTimeoutS * 1000)
          if (stdin !== undefined) opened.end(stdin)
          else opened.end()
        })
      } catch (error) {
        // ssh2 throws synchronously when the connection is no longer usable ("Not connected").
        finish(() =>
          reject(new SshCommandError(`ssh to ${t.host}: ${(error as Error).message}`, true, error)),
        )
      }
    })
  }

  close(): void {
    const client = this.client
    const socket = this.socket
    this.client = undefined
    this.socket = undefined
    try {
      client?.end()
    } catch {}
    // A peer that does not answer the goodbye must not keep the socket open.
    if (socket) setTimeout(() => socket.destroy(), 1000).unref()
  }
}

/**
 * A failure of one command. `reconnect`: the command was never sent (no channel could be opened), so
 * it is safe to reconnect and send it once more.
 */
export class SshCommandError extends BackendError {
  constructor(
    message: string,
    readonly reconnect: boolean,
    cause?: unknown,
  ) {
    super(message, true, { cause })
    this.name = "SshCommandError"
  }
}
