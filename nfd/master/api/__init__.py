"""The master's HTTP API: its routers, and the FastAPI app that mounts them (``app.py``)."""
