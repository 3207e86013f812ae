"""Connected Instagram accounts: connecting and disconnecting, tokens, webhook subscriptions.

The services that use the Instagram adapter (`app.instagram`) for an account's life: OAuth
connect (`connect`), sealing and opening tokens (`tokens`), the daily token refresh and a
refresh on a 190 (`token_refresh`), re-sealing under a new key (`token_rotation`), keeping
the webhooks subscribed (`subscriptions`), and the account cards the dashboard shows
(`cards`). They sit above the adapter and below the delivery engine, which uses `tokens` and
`token_refresh` (docs/architecture.md#layering).
"""
