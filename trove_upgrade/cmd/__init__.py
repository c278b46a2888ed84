"""Console entry points.

The threading backend of oslo.service is selected here, before any entry point
imports oslo.service or oslo.messaging: this project never uses eventlet.
futurist still imports eventlet when it is installed (oslo.service depends
on it) and eventlet warns on import; nothing here runs on it, so that warning
is silenced rather than printed by every command.
"""

import warnings

warnings.filterwarnings('ignore', message=r'\s*Eventlet is deprecated',
                        module='futurist')

from oslo_service import backend  # noqa: E402

backend.init_backend(backend.BackendType.THREADING)
