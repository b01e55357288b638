import { generateKeyPairSync } from "node:crypto"
import { type AddressInfo, createServer, type Socket } from "node:net"
import { describe, expect, test } from "vitest"
import { fingerprint, hostKeyMatches, SshSession } from "./ssh"

// An ed25519 public key blob in SSH wire format: string "ssh-ed25519", string <32 bytes>.
function blob(): Buffer {
  const { publicKey } = generateKeyPairSync("ed25519")
  const raw = publicKey.export({ format: "der", type: "spki" }).subarray(-32)
  const field = (b: Buffer) => Buffer.concat([Buffer.from([0, 0, 0, b.length]), b])
  return Buffer.concat([field(Buffer.from("ssh-ed25519")), field(raw)])
}

test("a pinned key matches the same key, by line or by fingerprint, and nothing else", () => {
  const key = blob()
  const other = blob()
  const line = `ssh-ed25519 ${key.toString("base64")} root@login`
  expect(hostKeyMatches(line, key)).toBe(true)
  expect(hostKeyMatches(`[127.0.0.1]:2222 ${line}`, key)).toBe(true)
  expect(hostKeyMatches(fingerprint(key), key)).toBe(true)
  expect(hostKeyMatches(line, other)).toBe(false)
  expect(hostKeyMatches(fingerprint(other), key)).toBe(false)
  expect(hostKeyMatches("not a key", key)).toBe(false)
  expect(fingerprint(key)).toMatch(/^SHA256:[A-Za-z0-9+/]{43}$/)
})

describe("a login node that does not answer", () => {
  const key = generateKeyPairSync("rsa", { modulusLength: 2048 })
    .privateKey.export({ format: "pem", type: "pkcs1" })
    .toString()
  const target = (port: number) => ({
    host: "127.0.0.1",
    port,
    user: "svc",
    privateKey: key,
    hostKey: "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
    connectTimeoutS: 1,
    commandTimeoutS: 5,
  })

  test("a port that accepts but never speaks SSH: the call fails in the connect timeout, and nothing is left to throw later", async () => {
    const sockets: Socket[] = []
    const server = createServer((socket) => {
      sockets.push(socket)
      socket.resume()
    })
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const session = new SshSession(target((server.address() as AddressInfo).port))
    // The handshake timer ended the call (its words), not the command's longer timeout.
    await expect(session.exec("true")).rejects.toThrow(/did not complete an SSH handshake within 1s/)
    // Within the fail-fast window the same failure comes back at once, without another connection.
    await expect(session.exec("true")).rejects.toThrow(/handshake/)
    expect(sockets).toHaveLength(1)
    // ssh2 used to emit a second 'error' when the socket closed: an unhandled one fails this run.
    await until(() => sockets[0]!.destroyed)
    await new Promise<void>((resolve) => server.close(() => resolve()))
  })

  test("a refused port says so", async () => {
    const server = createServer()
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const port = (server.address() as AddressInfo).port
    await new Promise<void>((resolve) => server.close(() => resolve()))
    await expect(new SshSession(target(port)).exec("true")).rejects.toThrow(/connection refused/)
  })
})

/** Wait for a condition the event loop brings about (no fixed sleep). */
async function until(ok: () => boolean): Promise<void> {
  while (!ok()) await new Promise((resolve) => setImmediate(resolve))
}
