/** Projects (tenants) and their API keys. Keys are shown once at creation and stored only as a hash. */

import { Name, Text, Timestamp } from "./common"
import { Role } from "./states"
import { z } from "./zod"

export const Project = z
  .object({
    name: Name.describe("Project name, unique; a DNS label."),
    displayName: Text.optional().describe("Human-friendly name."),
    createdAt: Timestamp.describe("When the project was created."),
  })
  .openapi("Project")
export type Project = z.infer<typeof Project>

export const CreateProjectRequest = z
  .object({
    name: Name.describe("Project name, unique; a DNS label such as `ml-research`."),
    displayName: Text.optional().describe("Human-friendly name."),
  })
  .strict()
  .openapi("CreateProjectRequest")

export const ApiKeyInfo = z
  .object({
    id: z.string().describe("Key id, for listing and revoking; not the secret."),
    project: Name.describe("Project the key belongs to."),
    name: Text.optional().describe("What the key is for."),
    role: Role.describe(
      "`read` may list and get; `write` may also create, update, cancel; `admin` may also manage backends and keys. `worker` is apart: it may only register worker agents and report for them (give it to agents).",
    ),
    prefix: z.string().describe("First characters of the key, to recognise it."),
    createdAt: Timestamp.describe("When the key was created."),
    expiresAt: Timestamp.optional().describe("When the key stops working; absent: it does not expire."),
    revokedAt: Timestamp.optional().describe(
      "When the key was revoked; it has not worked since. Revoked keys stay listed, for the record.",
    ),
  })
  .openapi("ApiKeyInfo")
export type ApiKeyInfo = z.infer<typeof ApiKeyInfo>

/** The longest life a key may be given: ten years. */
export const MaxKeyDays = 3650

export const CreateKeyRequest = z
  .object({
    role: Role.default("write").describe(
      "Role of the new key: `read`, `write`, `admin`, or `worker` (for worker agents only). Default `write`.",
    ),
    name: Text.optional().describe("What the key is for, e.g. `ci`."),
    expiresInDays: z
      .number()
      .int()
      .min(1)
      .max(MaxKeyDays)
      .optional()
      .describe(
        `Days until the key stops working, 1 to ${MaxKeyDays}. Absent (and no \`expiresAt\`): it does not expire.`,
      ),
    expiresAt: z.iso
      .datetime({ offset: true, message: "must be an ISO-8601 time such as 2027-01-31T00:00:00Z" })
      .optional()
      .describe(
        "When the key stops working, an ISO-8601 time in the future. Give this or `expiresInDays`, not both.",
      ),
  })
  .strict()
  .refine((v) => v.expiresInDays === undefined || v.expiresAt === undefined, {
    path: ["expiresAt"],
    message: "give expiresInDays or expiresAt, not both",
  })
  .openapi("CreateKeyRequest")

export const CreatedKey = ApiKeyInfo.extend({
  key: z.string().describe("The secret key. Shown only in this response: store it now."),
}).openapi("CreatedKey")

export const CreateProjectResponse = z
  .object({
    project: Project.describe("The new project."),
    adminKey: CreatedKey.describe("An admin key for the new project, shown only once."),
  })
  .openapi("CreateProjectResponse")

/** Who is calling: the project and role of the key used. */
export const Caller = z
  .object({
    project: Name.describe("Project of the key used."),
    role: Role.describe("Role of the key used."),
    keyId: z.string().describe("Id of the key used."),
    operator: z
      .boolean()
      .describe("True when the key is an admin key of the operator project, which may create projects."),
  })
  .openapi("Caller")
export type Caller = z.infer<typeof Caller>
