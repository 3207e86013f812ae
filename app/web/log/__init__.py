"""The delivery log screens under `/log`, one module each: the table and its live updates
(`table`), one delivery's timeline (`entry`), the misses (`misses`), the CSV export
(`export`), and the buttons (`actions`: retry, bulk retry, check the conversation again).

One URL serves the full page or, for htmx, only its results (`paging`), so filters and pages
are ordinary links pushed to the history. The queries and actions live in
`app.delivery_log`; these handlers stay thin.
"""

from __future__ import annotations

from litestar import Router

from app.web.log import actions, entry, export, misses, table

log_router = Router(
    path="/log",
    route_handlers=[
        table.log_table,
        table.updates,
        export.export,
        misses.misses,
        entry.entry,
        actions.retry,
        actions.bulk_retry,
        actions.check,
    ],
)
