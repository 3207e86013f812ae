"""Workspaces and their teams.

`roles` holds who may do what and the refusal every team change answers with; `members` the
member statements (change a role, remove, leave) and which workspaces a user has; `invites`
making, revoking and using invites; `service` a new user's first workspace. Users themselves
are `app.auth.users`: this package imports auth, never the reverse
(docs/architecture.md#layering).
"""
