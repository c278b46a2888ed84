"""The conductor: where agents register, heartbeat and report upgrades."""
