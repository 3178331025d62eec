"""Organization settings: integrations (configured third-party services, secrets write-only) and notification
preferences (which e-mails each member gets)."""
