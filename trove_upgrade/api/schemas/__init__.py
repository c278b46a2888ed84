"""JSON schemas of request bodies and query strings, kept as data."""
