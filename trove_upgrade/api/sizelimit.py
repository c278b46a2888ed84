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

"""Refuse request bodies over ``[api] max_request_body_size`` with 413.

A body announced larger than the limit is refused before it is read; a
body without a Content-Length (chunked) is cut off as soon as reading it
passes the limit, so a client cannot make the API buffer more. A
Content-Length that is not a number is a malformed request: 400. A
chunked body that the server does not say it ends (``wsgi.input_terminated``,
which gunicorn sets and eventlet, trove-api's server, does not) would be
read as empty: 411, as the built-in server answers any chunked body. A
chunked body the server fails to read (a chunk size that is no number, a
body cut short) is 400.
"""

import webob.exc

from trove_upgrade.api import util


def _too_large(limit):
    return webob.exc.HTTPRequestEntityTooLarge(
        'The request body is larger than %d bytes, the limit set by '
        '[api] max_request_body_size.' % limit)


class _LimitingReader:
    """Wrap ``wsgi.input``, raising 413 once more than ``limit`` is read."""

    def __init__(self, stream, limit):
        self._stream = stream
        self._limit = limit
        self._read = 0

    def _count(self, data):
        self._read += len(data)
        if self._read > self._limit:
            raise _too_large(self._limit)
        return data

    def _take(self, read, size):
        try:
            data = read(size)
        except Exception as e:
            # The WSGI server's error for a chunked body it cannot parse
            # (gunicorn's InvalidChunkSize, NoMoreData): the client's
            # malformed request, not the API's 500 with a traceback.
            raise webob.exc.HTTPBadRequest(
                'The request body is malformed: %s' % (e or type(e).__name__))
        return self._count(data)

    def read(self, size=-1):
        return self._take(self._stream.read, size)

    def readline(self, size=-1):
        return self._take(self._stream.readline, size)

    def __iter__(self):
        return self

    def __next__(self):
        line = self.readline()
        if not line:
            raise StopIteration
        return line


class RequestBodySizeLimit:

    def __init__(self, application, conf):
        self.application = application
        self.limit = conf.api.max_request_body_size

    @util.passing_on
    def __call__(self, req):
        length = req.environ.get('CONTENT_LENGTH')
        if length:
            value = util.content_length(length, self.limit)
            if value is None:
                raise webob.exc.HTTPBadRequest(
                    'Content-Length must be a non-negative integer, not '
                    '%r.' % length)
            if value > self.limit:
                raise _too_large(self.limit)
        elif 'wsgi.input' in req.environ:
            if (req.environ.get('HTTP_TRANSFER_ENCODING')
                    and not req.environ.get('wsgi.input_terminated')):
                raise webob.exc.HTTPLengthRequired(
                    'A request body needs a Content-Length.')
            req.environ['wsgi.input'] = _LimitingReader(
                req.environ['wsgi.input'], self.limit)
        return self.application
