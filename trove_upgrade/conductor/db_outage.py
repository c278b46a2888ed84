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

"""The conductor while its database is away: one line per failure.

A database that is down fails every agent message and every part of every
periodic pass the same way until it is back; a traceback each would bury
the log, and tells nothing the first line does not.
"""

import functools

from oslo_log import log as logging

from trove_upgrade.common import exception
from trove_upgrade.common import exception as package_exc
from trove_upgrade.db import exception as db_errors

LOG = logging.getLogger(__name__)


def attempt(what, func, *args):
    """``func(*args)``, one part of a periodic pass; the next tries again."""
    try:
        func(*args)
    except db_errors.UNAVAILABLE_ERRORS as e:
        LOG.warning('%(what)s failed, the database is unavailable; the '
                    'next pass tries again: %(error)s',
                    {'what': what, 'error': db_errors.first_line(e)})
    except Exception:
        LOG.exception('%s failed; the next pass tries again.', what)


def endpoint(func):
    """An RPC endpoint answering an outage with DatabaseUnavailableError.

    The endpoint marks that exception expected, so oslo.messaging sends it
    back as itself, at once, to a caller that waits, and logs no traceback
    of it. The agents try again: registrations and claims on their next
    round, reports from their outbox, which keeps every report until a
    call's answer confirms it, cast or not.
    """
    @functools.wraps(func)
    def serve(self, context, *args, **kwargs):
        try:
            return func(self, context, *args, **kwargs)
        except db_errors.UNAVAILABLE_ERRORS as e:
            error = db_errors.first_line(e)
        instance_id = kwargs.get('instance_id', args[0] if args else None)
        # Out of the except: oslo.log would repeat the exception.
        LOG.warning('The %(method)s message of instance %(instance)s '
                    'failed, the database is unavailable: %(error)s',
                    {'method': func.__name__,
                     'instance': package_exc.bounded(instance_id, 64),
                     'error': error})
        raise exception.DatabaseUnavailableError(method=func.__name__)
    return serve
