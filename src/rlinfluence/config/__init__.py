"""The config: its schema, its validation, and where the package's files are."""
