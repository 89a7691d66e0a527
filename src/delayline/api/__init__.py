"""The REST API and the admin page it serves: FastAPI routes over the catalog and the client."""
