"""A local stand-in for Meta's Instagram Platform (OAuth, Graph API, webhooks).

It implements the platform's public behaviour on its own, without importing anything from
the product, so a misreading of the platform in the product's client shows up as a failing
test instead of being mirrored here (docs/architecture.md#sandbox). Start it with
``python -m sandbox``; see ``sandbox/README.md`` for the admin, inspection and fault APIs.
"""
