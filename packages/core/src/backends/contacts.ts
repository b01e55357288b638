/**
 * What one invocation's contacts with a delegated backend's service came to, as the backend's health
 * (`ReportsHealth`): healthy once a call succeeds, unless one already failed; a failure (or a finding
 * such as a paused workspace) is the health with its message. Shared by the lepton and eks backends.
 */
export interface ContactHealth {
  /** Run one call; its success or failure is recorded. */
  record<T>(call: () => Promise<T>): Promise<T>
  /** Record a finding that makes the backend unhealthy, though the call succeeded. */
  unhealthy(message: string): void
  health(): { healthy: boolean; message?: string } | undefined
}

export function contactHealth(): ContactHealth {
  let contact: { healthy: boolean; message?: string } | undefined
  return {
    async record(call) {
      try {
        const result = await call()
        if (!contact || contact.healthy) contact = { healthy: true }
        return result
      } catch (error) {
        contact = { healthy: false, message: error instanceof Error ? error.message : String(error) }
        throw error
      }
    },
    unhealthy(message) {
      contact = { healthy: false, message }
    },
    health: () => contact,
  }
}
