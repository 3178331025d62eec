"""Customer-data platform (CDP) domain: custom fields, lifecycle stages, events, object types, segments, templates."""
