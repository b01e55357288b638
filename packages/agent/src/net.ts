/** Small network helpers: a free TCP port, and the host a server binds for a given advertised host. */
import { createServer } from "node:net"

/**
 * Ask the kernel for a port that is free right now. Another process may take it before the caller
 * binds it; the window is small and a replica that fails to bind exits and is reported FAILED.
 */
export function freePort(host = "127.0.0.1"): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.unref()
    server.once("error", reject)
    server.listen(0, host, () => {
      const address = server.address()
      const port = typeof address === "object" && address ? address.port : 0
      server.close(() => (port ? resolve(port) : reject(new Error("no port assigned"))))
    })
  })
}

/** True for hosts that only this machine can reach. */
export function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || host === "[::1]" || host.startsWith("127.")
}

/**
 * Where servers the agent starts should listen: loopback when the agent advertises a loopback address
 * (a laptop, CI), every interface otherwise, so the advertised endpoint is reachable from other hosts.
 */
export function bindHostFor(advertiseHost: string): string {
  return isLoopback(advertiseHost) ? "127.0.0.1" : "0.0.0.0"
}

/** `http://host:port`, with brackets around an IPv6 literal. */
export function httpUrl(host: string, port: number): string {
  const h = host.includes(":") && !host.startsWith("[") ? `[${host}]` : host
  return `http://${h}:${port}`
}
