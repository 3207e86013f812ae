"""The web process's controllers (Litestar): one screen per module, thin, calling plain
functions of the packages below.

Screens: `overview`, `accounts`, `auth` (sign-up, sign-in, sign-out), `invite_link`, `health`,
and the packages `campaigns/`, `log/` and `team/` with one module per screen. `webhooks` is
Meta's endpoint, a plain ASGI route for speed. Shared by the screens: `deps` (the process
resources and one database session per request), `guards` (`editors_only`), `htmx`
(`wants_partial`, the one reader of htmx's request headers, and redirects), `idempotency`
(the one-time key on every state-changing form), `signup` (making an account and signing in),
`errors`, `templating`, and `reads` (`get_or_head`, the decorator of every GET route, which
answers HEAD too). Templates follow the same split: `templates/<screen>/` with the
screen's htmx partials beside its pages as `_*.html`, and `templates/partials/` for the ones
every screen shares.
"""
