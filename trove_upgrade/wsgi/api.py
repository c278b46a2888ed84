"""The API as a module-level WSGI ``application`` for any WSGI server.

For example: ``gunicorn trove_upgrade.wsgi.api:application`` or
``uwsgi --module trove_upgrade.wsgi.api:application``.
"""

from trove_upgrade import wsgi

application = wsgi.init_application()
