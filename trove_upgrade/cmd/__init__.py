"""Console entry points.

The threading backend of oslo.service is selected here, before any entry point
imports oslo.service or oslo.messaging: this project never uses eventlet.
"""

from oslo_service import backend

backend.init_backend(backend.BackendType.THREADING)
