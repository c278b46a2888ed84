"""The control plane's database: every SQL statement lives in this package."""
