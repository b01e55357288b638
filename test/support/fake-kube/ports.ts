/** Loopback ports for pods: a free one to remap a container port to, and a TCP readiness check. */
import { createServer, Socket } from "node:net"

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address ? address.port : 0
      server.close(() => resolve(port))
    })
  })
}

export function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket()
    socket.once("connect", () => {
      socket.destroy()
      resolve(true)
    })
    socket.once("error", () => resolve(false))
    socket.connect(port, "127.0.0.1")
  })
}
