"""Campaigns: which comments trigger which messages (`matching`), and loading them (`rules`)."""
