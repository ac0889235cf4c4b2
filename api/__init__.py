"""FastAPI application: pages, REST API and static files on one port. Imports explorer, never the reverse."""
