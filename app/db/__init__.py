"""Database layer: declarative models, engine and session factory."""
