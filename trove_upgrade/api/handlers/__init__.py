"""One module per resource; each handler is a small WSGI application."""
