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

"""Errors of the download strategies.

Every error derives from :class:`StrategyError` and its message names what
failed and why, because the agent records it verbatim as the reason of a
FAILED upgrade. :class:`TransientError` is the only one a strategy retries;
after the last attempt it becomes :class:`DownloadError` (``fetch``) or
:class:`LocationUnreachableError` (``check_location``) carrying its message.
"""

from trove_upgrade.common import exception


class StrategyError(exception.TroveUpgradeError):
    """Base of every strategy error; ``str()`` is the human-readable reason."""

    msg_fmt = 'The download strategy failed.'


class StrategyNotAllowedError(StrategyError):
    msg_fmt = ('Strategy "%(name)s" is not allowed on this agent; '
               '[agent] allowed_strategies is: %(allowed)s.')


class StrategyNotInstalledError(StrategyError):
    msg_fmt = 'Strategy "%(name)s" is not installed: %(reason)s.'


class StrategyConfigError(StrategyError):
    msg_fmt = ('The configuration of strategy "%(name)s" in %(path)s is '
               'invalid: %(reason)s.')


class InvalidLocationError(StrategyError):
    msg_fmt = ('Location "%(location)s" is not valid for strategy '
               '"%(strategy)s": %(reason)s.')


class LocationUnreachableError(StrategyError):
    msg_fmt = ('Location "%(location)s" of strategy "%(strategy)s" is not '
               'reachable: %(reason)s.')


class ObjectNotFoundError(LocationUnreachableError):
    msg_fmt = ('Location "%(location)s" of strategy "%(strategy)s" does not '
               'exist: %(reason)s.')


class AccessDeniedError(LocationUnreachableError):
    msg_fmt = ('Access to location "%(location)s" of strategy '
               '"%(strategy)s" was denied: %(reason)s.')


class RequestRejectedError(LocationUnreachableError):
    msg_fmt = ('The server of location "%(location)s" (strategy '
               '"%(strategy)s") rejected the request: %(reason)s.')


class SizeLimitExceededError(StrategyError):
    msg_fmt = ('Location "%(location)s" of strategy "%(strategy)s" holds '
               'more than the %(max_bytes)d bytes allowed: %(reason)s.')


class RangesNotServedError(StrategyError):
    msg_fmt = ('The server of location "%(location)s" (strategy '
               '"%(strategy)s") does not serve byte ranges: %(reason)s.')


class DestinationError(StrategyError):
    msg_fmt = 'Cannot write the download to %(path)s: %(reason)s.'


class DownloadError(StrategyError):
    msg_fmt = ('Downloading "%(location)s" with strategy "%(strategy)s" '
               'failed after %(attempts)d attempt(s): %(reason)s.')


class TransientError(StrategyError):
    """A failure worth another attempt: network, timeout, server error."""

    msg_fmt = '%(reason)s'
