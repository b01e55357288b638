/**
 * One SSH connection per login (host, port, user, pinned host key, private key), shared by every
 * backend instance of the process and kept while it is used: a reconcile pass costs one exec, not a
 * handshake. A connection nobody has used for `IdleCloseMs` is closed; its socket never keeps the
 * process alive while idle (ssh.ts). A rotated key or a changed config is another login, so it gets a
 * connection of its own.
 */
import { createHash } from "node:crypto"
import { SshSession, type SshTarget } from "./ssh"

/** A shared connection unused this long is closed. */
export const IdleCloseMs = 120_000

interface PoolEntry {
  session: SshSession
  users: number
  idle?: ReturnType<typeof setTimeout>
}

const pool = new Map<string, PoolEntry>()

function poolKey(t: SshTarget): string {
  return createHash("sha256")
    .update(
      JSON.stringify([t.host, t.port, t.user, t.hostKey, t.privateKey, t.connectTimeoutS, t.commandTimeoutS]),
    )
    .digest("hex")
}

/** A shared session for this login; `release()` when done (it stays open for the next user a while). */
export function acquireSession(target: SshTarget): { session: SshSession; release(): void } {
  const key = poolKey(target)
  let entry = pool.get(key)
  if (!entry) {
    entry = { session: new SshSession(target), users: 0 }
    pool.set(key, entry)
  }
  const e = entry
  if (e.idle) clearTimeout(e.idle)
  e.idle = undefined
  e.users++
  let released = false
  return {
    session: e.session,
    release() {
      if (released) return
      released = true
      e.users--
      if (e.users > 0) return
      e.idle = setTimeout(() => {
        if (e.users > 0) return
        pool.delete(key)
        e.session.close()
      }, IdleCloseMs)
      e.idle.unref()
    },
  }
}

/** Close every shared connection (the local control plane's shutdown, tests). */
export function closeSharedSessions(): void {
  for (const [key, entry] of pool) {
    if (entry.idle) clearTimeout(entry.idle)
    entry.session.close()
    pool.delete(key)
  }
}
