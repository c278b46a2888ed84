#    Licensed under the Apache License, Version 2.0 (the "License"); you may
#    not use this file except in compliance with the License. You may obtain
#    a copy of the License at
#
#         http://www.apache.org/licenses/LICENSE-2.0
#
#    Unless required by applicable law or agreed to in writing, software
#    distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
#    WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
#    License for the specific language governing permissions and limitations
#    under the License.

"""What the callers of the database API may catch, by kind of failure.

It imports no configuration: the fault wrapper, which the API extension
hosted in Trove's process loads too, catches these before trove-upgrade's
options are registered anywhere.
"""

from oslo_db import exception as db_exc
import sqlalchemy as sa

# What a database that is down, refuses connections or dropped one
# mid-transaction raises: oslo.db wraps the errors it recognises, and lets
# others through as SQLAlchemy's (PostgreSQL's "database is not currently
# accepting connections" at connect, for one). A later transaction may
# well succeed.
UNAVAILABLE_ERRORS = (db_exc.DBConnectionError, sa.exc.OperationalError)


def first_line(error, limit=300):
    """The gist of ``error`` in one bounded line, without its SQL.

    oslo.db keeps the driver's error in ``inner_exception``, SQLAlchemy in
    ``orig``; their first line names the problem, the lines after it are
    the statement and its parameters.
    """
    inner = (getattr(error, 'inner_exception', None)
             or getattr(error, 'orig', None) or error)
    text = str(inner).strip().splitlines()
    text = text[0] if text else type(inner).__name__
    return text if len(text) <= limit else text[:limit] + '...'
