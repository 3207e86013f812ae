"""Campaigns: which comment or DM gets which message, and the campaigns themselves.

`matching` decides which campaign answers a comment (pure: normalization, keyword modes,
winner selection) and `dm_matching` which one a DM keyword trigger fires; `rules` loads
campaigns as rules for them. `message_format` is the message a campaign sends and Meta's
limits on it (one `LinkButton`), used both by the editor's checks (`validation`) and by the
sender. `service` creates, edits, activates, pauses, archives and lists campaigns for the
dashboard. Below the delivery engine, which imports it; it imports only `app.db`
(docs/architecture.md#layering).
"""
