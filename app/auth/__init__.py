"""Authentication: password hashing, sessions, login throttling and access guards."""
