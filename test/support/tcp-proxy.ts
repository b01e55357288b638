/**
 * Test support: a TCP proxy in front of a real server (the dev cluster's sshd) that a test switches
 * between behaving and failing the way login nodes fail: `forward` (a working login node), `hang`
 * (accepts connections and never says a word: a hung sshd or a black-holing firewall), `refuse`
 * (nothing listens: connection refused). `drop()` cuts the connections already open, as a network
 * outage does, so a kept-alive SSH connection must notice and reconnect.
 */
import { connect, createServer, type Server, type Socket } from "node:net"

export type ProxyMode = "forward" | "hang" | "refuse"

export interface TcpProxy {
  port: number
  mode(): ProxyMode
  /** Switch the behaviour of new connections (`refuse` closes the listener; the others reopen it). */
  set(mode: ProxyMode): Promise<void>
  /** Cut every open connection. */
  drop(): void
  /** Connections accepted so far. */
  accepted(): number
  close(): Promise<void>
}

export async function tcpProxy(
  target: { host: string; port: number },
  initial: ProxyMode,
): Promise<TcpProxy> {
  let current = initial
  let accepted = 0
  const open = new Set<Socket>()
  const track = (socket: Socket) => {
    open.add(socket)
    socket.on("close", () => open.delete(socket))
    socket.on("error", () => socket.destroy())
  }
  const handle = (client: Socket) => {
    accepted++
    track(client)
    // hang: hold it open, read and drop what the client says, never answer.
    if (current !== "forward") return void client.resume()
    const upstream = connect(target.port, target.host)
    track(upstream)
    client.pipe(upstream)
    upstream.pipe(client)
    client.on("close", () => upstream.destroy())
    upstream.on("close", () => client.destroy())
  }
  let server: Server | undefined
  let port = 0
  const listen = () =>
    new Promise<void>((resolve, reject) => {
      const s = createServer(handle)
      s.once("error", reject)
      s.listen(port, "127.0.0.1", () => {
        port = (s.address() as { port: number }).port
        server = s
        resolve()
      })
    })
  const unlisten = () =>
    new Promise<void>((resolve) => {
      const s = server
      server = undefined
      if (!s) return resolve()
      s.close(() => resolve())
    })
  await listen()
  if (initial === "refuse") await unlisten()
  return {
    get port() {
      return port
    },
    mode: () => current,
    async set(mode) {
      current = mode
      if (mode === "refuse") {
        // Nothing listens any more, and what was connected is gone with it.
        for (const socket of open) socket.destroy()
        await unlisten()
      } else if (!server) await listen()
    },
    drop() {
      for (const socket of open) socket.destroy()
    },
    accepted: () => accepted,
    async close() {
      for (const socket of open) socket.destroy()
      await unlisten()
    },
  }
}
