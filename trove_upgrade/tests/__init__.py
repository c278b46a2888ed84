"""Tests run on the threading backend of oslo.service, like the services."""

from oslo_service import backend

backend.init_backend(backend.BackendType.THREADING)
