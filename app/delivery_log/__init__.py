"""The delivery log as a creator reads it: filters, keyset pages, live updates, timelines,
misses, CSV export, the overview's numbers and the log's buttons (retry, check again).

Plain functions over an `AsyncSession` (or the engine, for streams); the web controllers in
`app/web/log/` and `app/web/overview.py` stay thin. Every query is scoped by workspace.
"""
