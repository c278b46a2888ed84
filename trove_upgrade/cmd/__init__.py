"""Console and WSGI entry points: the threading backend, and no eventlet.

The threading backend of oslo.service is selected here, before any entry
point imports oslo.service or oslo.messaging: this project never uses
eventlet. ``trove_upgrade.wsgi`` imports this package for the same reason.

eventlet is still installed (oslo.service depends on it) and futurist,
which oslo.messaging and oslo.service import, tries ``import eventlet`` to
know whether it could use green threads. eventlet 0.39+ warns on import
with a multi-line ``EventletDeprecationWarning`` that would start every
service log. The filter below, installed before that import, drops that
one warning, whoever imports eventlet, and nothing else.
"""

import warnings

# The warning's text starts with a newline; its category is eventlet's own
# (a subclass of Warning), which cannot be named before eventlet is loaded.
warnings.filterwarnings('ignore', message=r'\s*Eventlet is deprecated',
                        category=Warning)

from oslo_service import backend  # noqa: E402

backend.init_backend(backend.BackendType.THREADING)
