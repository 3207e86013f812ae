"""Authentication: who someone is, and proving it.

Users and their email and password rules (`users`: creating a user lives here), password
hashing (`passwords`), server-side sessions in Redis (`sessions`), checking a sign-in
(`signin`) under the login throttle (`throttle`), and who is asking on a request, with their
workspace and role (`current`). Workspaces and teams are `app.workspaces`, one layer up:
auth never imports it. Route guards are the web's (`app.web.guards`).
"""
