import { generateKeyPairSync } from "node:crypto"
import { expect, test } from "vitest"
import { fingerprint, hostKeyMatches } from "./ssh"

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
