"""Talking to Meta's Instagram Platform: the Graph client, webhook signatures and payloads."""
