"""OnceReply: Instagram comments to DMs, each private reply sent exactly once."""

__version__ = "0.1.0"
