/**
 * `Idempotency-Key` on every POST, scoped to the API key that sent it (another caller's request with
 * the same header is a different request): the same key with the same request returns the first response
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

/** Plain-text bytes kept; sealed (base64, +33%) this stays well inside a 400 KB item. */
const MaxStoredBytes = 200 * 1024

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
    const caller = c.get("caller")
    const scope = { project: caller.project, apiKeyId: caller.keyId, key }
    const body = await c.req.text()
    const fingerprint = createHash("sha256").update(`${c.req.method} ${c.req.path}\n${body}`).digest("hex")
    const reservation = await deps.repos.idempotency.reserve(scope, fingerprint)
    switch (reservation.kind) {
      case "replay":
        if (reservation.body === undefined)
          throw new VisibleError(
            "idempotency.replay_unavailable",
            `the first request with this Idempotency-Key succeeded (${reservation.status}) but its response was too large to keep; read the object with GET instead`,
            409,
          )
        return new Response(open(deps.pepper, key, reservation.body), {
          status: reservation.status,
          headers: {
            ...reservation.headers,
            "Content-Type": "application/json",
            "Idempotent-Replayed": "true",
          },
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
    if (status >= 200 && status < 300) {
      // Never forget a success: a retry must not do the work twice, even if the body cannot be kept.
      const text = await c.res.clone().text()
      const headers = Object.fromEntries(
        [...c.res.headers].filter(([name]) => name.toLowerCase().startsWith("swarmplane-")),
      )
      const keep = Buffer.byteLength(text) <= MaxStoredBytes
      await deps.repos.idempotency.complete(scope, {
        status,
        headers,
        ...(keep ? { body: seal(deps.pepper, key, text) } : {}),
      })
    } else if (status >= 500) await deps.repos.idempotency.abandon(scope)
    else await deps.repos.idempotency.release(scope)
  }
}
