"""Labels, chat and call actions, and message templates (functions/catalog, plus conversation label routes)."""
