/**
 * `Idempotency-Key` on every POST: the same key with the same request returns the first response
 * (header `Idempotent-Replayed: true`); the same key with another request is refused (422); a repeat
 * while the first is still running gets 409. Only 2xx responses are kept. After a 4xx the key may be
 * used again for a corrected request; after a 5xx a retry resumes with the same seed, so it completes
 * the objects the failed try began instead of making new ones.
 *
 * Stored responses are encrypted (AES-256-GCM) with a key derived from the pepper and the idempotency
 * key itself, which only the client holds: a response that shows a new API key once is not readable
 * from the table.
 */
import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes } from "node:crypto"
import type { MiddlewareHandler } from "hono"
import { VisibleError } from "../util/errors"
import type { ApiDeps, ApiEnv } from "./context"

const MaxStoredBytes = 300 * 1024

function cipherKey(pepper: string, idempotencyKey: string): Buffer {
  return createHmac("sha256", pepper).update(`idempotency:${idempotencyKey}`).digest()
}

export function seal(pepper: string, idempotencyKey: string, plain: string): string {
  const iv = randomBytes(12)
  const cipher = createCipheriv("aes-256-gcm", cipherKey(pepper, idempotencyKey), iv)
  const body = Buffer.concat([cipher.update(plain, "utf8"), cipher.final()])
  return Buffer.concat([iv, cipher.getAuthTag(), body]).toString("base64")
}

export function open(pepper: string, idempotencyKey: string, sealed: string): string {
  const raw = Buffer.from(sealed, "base64")
  const decipher = createDecipheriv("aes-256-gcm", cipherKey(pepper, idempotencyKey), raw.subarray(0, 12))
  decipher.setAuthTag(raw.subarray(12, 28))
  return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString("utf8")
}

export function idempotency(deps: ApiDeps): MiddlewareHandler<ApiEnv> {
  return async (c, next) => {
    const key = c.req.header("Idempotency-Key")
    if (c.req.method !== "POST" || key === undefined) return next()
    if (!/^[\x21-\x7e]{1,255}$/.test(key))
      throw new VisibleError(
        "request.invalid_idempotency_key",
        "Idempotency-Key must be 1 to 255 printable ASCII characters without spaces, e.g. a UUID",
      )
    const project = c.get("caller").project
    const body = await c.req.text()
    const fingerprint = createHash("sha256").update(`${c.req.method} ${c.req.path}\n${body}`).digest("hex")
    const reservation = await deps.repos.idempotency.reserve(project, key, fingerprint)
    switch (reservation.kind) {
      case "replay":
        return new Response(open(deps.pepper, key, reservation.body), {
          status: reservation.status,
          headers: { "Content-Type": "application/json", "Idempotent-Replayed": "true" },
        })
      case "mismatch":
        throw new VisibleError(
          "idempotency.key_reused",
          "this Idempotency-Key was used for a different request; use a new key for a new request",
          422,
        )
      case "in_progress":
        throw new VisibleError(
          "idempotency.in_progress",
          "a request with this Idempotency-Key is still being handled; retry in a few seconds",
          409,
        )
    }
    c.set("idempotency", { seed: reservation.seed, createdAt: reservation.createdAt })
    await next()
    const status = c.res.status
    const text = status >= 200 && status < 300 ? await c.res.clone().text() : undefined
    if (text !== undefined && Buffer.byteLength(text) <= MaxStoredBytes)
      await deps.repos.idempotency.complete(project, key, { status, body: seal(deps.pepper, key, text) })
    else if (status >= 500) await deps.repos.idempotency.abandon(project, key)
    else await deps.repos.idempotency.release(project, key)
  }
}
