"""Tracked links: the short link a DM carries, the redirect's visitor, the click spool.

A link button (or `{link}`) goes out as `PUBLIC_BASE_URL/go/<token>`: the token is signed and
carries the delivery, the button and the destination (`tokens`), so the redirect answers
without asking PostgreSQL or Redis anything. Each visit is appended to a local spool file
before the answer (`spool`) and copied into `link_clicks` in the background (`recorder`),
once per request id. `visitors` tells a person's click from a link-preview fetch.
"""
