"""HTTP routers of the master."""
