"""A DuckLake store: attaching the catalog and data path, data on an object store, upkeep."""
