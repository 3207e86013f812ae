"""The Meta adapter: talking to Instagram's platform, and nothing else.

The Graph API client (`graph`), Instagram Login as an OAuth client (`oauth`), webhook
signatures (`signature`), the parsing of webhook and Graph payloads (`webhook_payload`,
`payload_fields`) and what an answer to a send means (`classify`). It imports nothing of the
app but `app.db` (for the enums it speaks in) and `app.settings`; the services that use it
live above it, in `app.accounts` and `app.delivery` (docs/architecture.md#layering).
"""
