/** The header a worker proves its identity with: the credential its registration returned. No zod here. */
export const WorkerCredentialHeader = "Swarmplane-Worker-Credential"
