"""The database: models, the engine and sessions, and plain psycopg for hot paths.

`models` holds the declarative models (every schema change is a model change plus an Alembic
revision); `engine` the engine, the session factory and `autocommit` connections for the
one-statement delivery code; `raw` psycopg connections for the ingest path's bulk writes.
When each way fits: docs/architecture.md#database-access.
"""
