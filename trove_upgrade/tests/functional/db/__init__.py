"""Functional tests of the database layer on SQLite, MariaDB, PostgreSQL."""
