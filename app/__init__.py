"""OnceReply: Instagram comments to DMs, each private reply sent exactly once.

The packages and how they may import each other are mapped in docs/architecture.md#layout and
docs/architecture.md#layering.
"""

__version__ = "0.1.0"
