"""Tests run on the threading backend of oslo.service, like the services.

``trove_upgrade.cmd`` selects it, and silences the warning eventlet gives
when futurist imports it, before anything else loads oslo.service.
"""

import trove_upgrade.cmd  # noqa: F401
