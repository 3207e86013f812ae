"""The web process's routes, grouped by area; controllers stay thin and call plain functions."""
