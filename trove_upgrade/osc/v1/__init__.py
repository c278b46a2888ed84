"""Commands for version 1 of the guest-upgrade management API."""
