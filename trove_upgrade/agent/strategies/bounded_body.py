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

"""Response bodies read whole, bounded while they are read.

python-swiftclient reads the whole body of a non-2xx answer
(``resp.read()``) before it raises, and requests reads the whole body of
keystoneauth's token request (``Response.content``): a server answering
with hundreds of MiB put them all in memory, once per attempt.
:class:`BoundedBodyAdapter` is a requests transport, given to a session
through its public ``mount``, whose responses stop a read of the whole
body (``read()`` without a size, ``stream()``, which ``content`` uses)
with :class:`BodyTooLargeError` one chunk past :data:`MAX_WHOLE_BODY`, before
the rest is read. A read of a given size (a download streamed to disk) is
the caller's to bound, as the strategies do with their cap.
"""

from requests import adapters
from requests import exceptions as requests_exc

from trove_upgrade.common import exception

# A token with its catalog, an error page: far less than this.
MAX_WHOLE_BODY = 1024 * 1024
_CHUNK = 65536


class BodyTooLargeError(requests_exc.RequestException,
                        exception.TroveUpgradeError):
    """A body read whole is longer than the bytes allowed for it."""


class _BoundedBody:
    """A urllib3 response whose reads of the whole body are bounded."""

    def __init__(self, raw, limit, what):
        self._raw = raw
        self._limit = limit
        self._what = what

    def __getattr__(self, name):
        return getattr(self._raw, name)

    def _too_large(self):
        self._raw.close()
        return BodyTooLargeError(
            'the answer to %s is longer than the %d bytes '
            'read of it' % (self._what, self._limit))

    def read(self, amt=None, *args, **kwargs):
        if amt is not None:
            return self._raw.read(amt, *args, **kwargs)
        parts = []
        size = 0
        while True:
            chunk = self._raw.read(_CHUNK, *args, **kwargs)
            if not chunk:
                return b''.join(parts)
            size += len(chunk)
            if size > self._limit:
                raise self._too_large()
            parts.append(chunk)

    def stream(self, amt=_CHUNK, decode_content=None):
        size = 0
        for chunk in self._raw.stream(amt, decode_content=decode_content):
            size += len(chunk)
            if size > self._limit:
                raise self._too_large()
            yield chunk


class BoundedBodyAdapter(adapters.HTTPAdapter):
    """A requests transport whose bodies read whole are bounded."""

    max_whole_body = MAX_WHOLE_BODY

    def build_response(self, req, resp):
        response = super().build_response(req, resp)
        what = '%s %s (HTTP %d)' % (req.method, _without_query(req.url),
                                    response.status_code)
        response.raw = _BoundedBody(response.raw, self.max_whole_body, what)
        return response


def _without_query(url):
    return url.split('?', 1)[0][:200]


def too_large(exc):
    """The :class:`BodyTooLargeError` behind ``exc`` (a library's wrap).

    keystoneauth raises its own error while handling requests' one.
    """
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, BodyTooLargeError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None
