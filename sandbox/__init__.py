"""A local stand-in for Meta's Instagram Platform (OAuth, Graph API, webhooks).

It implements the public contract in ``reference/instagram-platform.md`` on its own, without
importing anything from the product, so a misreading of the contract in the product's client
shows up as a failing test instead of being mirrored here. Start it with ``python -m sandbox``;
see ``sandbox/README.md`` for the admin, inspection and fault APIs.
"""
