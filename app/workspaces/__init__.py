"""Users, workspaces and membership."""
