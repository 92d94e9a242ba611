"""The DuckDB store: connection, schema, migrations and every SQL statement."""
