/** Projects (tenants) and their API keys. Keys are shown once at creation and stored only as a hash. */
import { z } from "@hono/zod-openapi"
import { Name, Text, Timestamp } from "./common"
import { Role } from "./states"

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
      "`read` may list and get; `write` may also create, update, cancel; `admin` may also manage backends and keys.",
    ),
    prefix: z.string().describe("First characters of the key, to recognise it."),
    createdAt: Timestamp.describe("When the key was created."),
  })
  .openapi("ApiKeyInfo")
export type ApiKeyInfo = z.infer<typeof ApiKeyInfo>

export const CreateKeyRequest = z
  .object({
    role: Role.default("write").describe("Role of the new key: `read`, `write` or `admin`. Default `write`."),
    name: Text.optional().describe("What the key is for, e.g. `ci`."),
  })
  .strict()
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
