"""trove-upgrade's management API as an extension of Trove's own API.

Installed beside ``trove-api``, trove-upgrade registers
``extension:TroveUpgradeExtension`` in Trove's ``trove.api.extensions``
entry-point group, as Trove registers its own ``mgmt`` extension. It
serves nothing until ``[trove_upgrade] enabled = true`` in trove.conf; it
then serves the mgmt ``upgrades``, ``agents`` and ``rollouts`` resources
and upstream Trove's ``instances/{instance_id}/upgrade`` route on Trove's
endpoint, behind Trove's authentication and context middleware, through
the standalone API's own router and handlers.

This package imports nothing of Trove or of ``trove_upgrade.conf`` at
import time, so the option listing of ``opts`` works anywhere.
"""
