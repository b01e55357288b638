/** The SSM adapter with its client given as a factory: built on the first read, once, and rebuilt only after a failed build. */
import type { SSMClient } from "@aws-sdk/client-ssm"
import { expect, test } from "vitest"
import { SsmSecrets } from "./ssm"

/** A client that answers every GetParameter with the path it was asked for. */
function fakeClient(): SSMClient & { asked: string[] } {
  const asked: string[] = []
  return {
    asked,
    send: async (command: { input: { Name: string } }) => {
      asked.push(command.input.Name)
      return { Parameter: { Value: `value of ${command.input.Name}` } }
    },
  } as unknown as SSMClient & { asked: string[] }
}

test("a factory client is built on the first read, not before, and once for every later read", async () => {
  const client = fakeClient()
  let built = 0
  const secrets = SsmSecrets({
    client: async () => {
      built++
      return client
    },
    prefix: "/swarmplane/dev/secrets/",
  })
  expect(built).toBe(0)
  const [a, b] = await Promise.all([secrets.get("p", "ssh-key"), secrets.get("p", "token")])
  expect(a).toBe("value of /swarmplane/dev/secrets/p/ssh-key")
  expect(b).toBe("value of /swarmplane/dev/secrets/p/token")
  await secrets.get("q", "token")
  expect(built).toBe(1)
  expect(client.asked).toEqual([
    "/swarmplane/dev/secrets/p/ssh-key",
    "/swarmplane/dev/secrets/p/token",
    "/swarmplane/dev/secrets/q/token",
  ])
})

test("a factory that fails is tried again on the next read", async () => {
  const client = fakeClient()
  let calls = 0
  const secrets = SsmSecrets({
    client: async () => {
      calls++
      if (calls === 1) throw new Error("chunk failed to load")
      return client
    },
    prefix: "/s",
  })
  await expect(secrets.get("p", "key")).rejects.toThrow(/reading secret "key" failed/)
  expect(await secrets.get("p", "key")).toBe("value of /s/p/key")
  expect(calls).toBe(2)
})
