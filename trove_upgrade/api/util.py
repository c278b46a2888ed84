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

"""HTTP helpers shared by the handlers and the middleware.

Every error the API answers with, whoever raises it, has the same JSON body::

    {"errors": [{"status": 404, "title": "Not Found",
                 "detail": "Upgrade ... could not be found.",
                 "request_id": "req-..."}]}
"""

import datetime
import functools
import http
import math
import re

import jsonschema
from oslo_log import log as logging
from oslo_middleware import request_id
from oslo_serialization import jsonutils
import webob
import webob.dec
import webob.exc
import webob.request

from trove_upgrade.common import exception

LOG = logging.getLogger(__name__)

JSON_TYPE = 'application/json'
CONTEXT_KEY = 'trove_upgrade.common.context'
CONF_KEY = 'trove_upgrade.conf'
HEALTHCHECK_KEY = 'trove_upgrade.healthcheck'

# Headers of a webob HTTP error that the JSON error keeps.
_KEPT_ERROR_HEADERS = frozenset(['allow', 'location', 'retry-after',
                                 'www-authenticate'])


MAX_ERROR_DETAIL = 1024


def bounded(detail):
    """``detail`` with its middle cut when it is long.

    Details quote the request (an id of megabytes); the head and the end,
    which says where in the body the error is, are kept.
    """
    if len(detail) <= MAX_ERROR_DETAIL:
        return detail
    note = ' ... (%d characters cut) ... ' % (len(detail) - MAX_ERROR_DETAIL)
    keep = (MAX_ERROR_DETAIL - len(note)) // 2
    return detail[:keep] + note + detail[-keep:]


def error_response(status, detail, environ, headers=None):
    """The JSON error response for ``status`` with a specific ``detail``."""
    body = {'errors': [{
        'status': status,
        'title': http.HTTPStatus(status).phrase,
        'detail': bounded(str(detail)),
        'request_id': environ.get(request_id.ENV_REQUEST_ID),
    }]}
    return json_response(body, status=status, headers=headers)


def json_response(body, status=200, headers=None):
    resp = webob.Response(status=status, content_type=JSON_TYPE,
                          charset=None,
                          body=jsonutils.dump_as_bytes(body))
    for name, value in headers or ():
        resp.headers.add(name, value)
    return resp


def _error_response_of(req, err):
    """The JSON error for ``err``, a webob HTTP error or one of ours."""
    if isinstance(err, webob.exc.HTTPException):
        headers = [(name, value) for name, value in err.headerlist
                   if name.lower() in _KEPT_ERROR_HEADERS]
        return error_response(err.code, err.detail or err.explanation,
                              req.environ, headers=headers)
    if err.code >= 500:
        LOG.error('%(method)s %(path)s failed: %(error)s',
                  {'method': req.method, 'path': req.path,
                   'error': err.message})
    return error_response(err.code, err.message, req.environ)


class wsgify(webob.dec.wsgify):
    """webob's ``wsgify``, answering every error in the API's JSON format.

    Handlers raise webob HTTP errors or control-plane exceptions; both
    become the JSON error with their status, and so does a body that ends
    before its Content-Length (webob's DisconnectionError, whatever the
    server): a malformed request, not the API's 500. Anything else goes up
    to the fault wrapper.
    """

    def call_func(self, req, *args, **kwargs):
        try:
            return super().call_func(req, *args, **kwargs)
        except (webob.exc.HTTPException,
                exception.TroveUpgradeError) as err:
            return _error_response_of(req, err)
        except webob.request.DisconnectionError:
            return _error_response_of(req, webob.exc.HTTPBadRequest(
                'The request body ended before the %s bytes its '
                'Content-Length says.' % req.content_length))


def passing_on(check):
    """A middleware's WSGI ``__call__`` made of ``check(self, req)``.

    ``check`` returns the WSGI application that takes the request on, or
    raises what ``wsgify`` answers with the JSON error. ``wsgify`` builds
    a copy of itself, a Request and a Response in every layer, for every
    request, only to pass it on: the API's four layers of it cost an
    accepted POST 140 of its 3,000 Python calls. Here the application
    returned is called with the WSGI arguments as they came.
    """
    @functools.wraps(check)
    def __call__(self, environ, start_response):
        req = webob.Request(environ)
        try:
            application = check(self, req)
        except (webob.exc.HTTPException,
                exception.TroveUpgradeError) as err:
            application = _error_response_of(req, err)
        return application(environ, start_response)
    return __call__


def bodiless_action(authorize, act, render):
    """A handler for an action that takes no body (pause, resume, abort).

    ``authorize(context)`` checks policy, ``act(context, req)`` does the
    action and returns the object, ``render(req, obj)`` gives the body.
    """
    @wsgify
    def handler(req):
        context = req.environ[CONTEXT_KEY]
        authorize(context)
        if req.body:
            raise webob.exc.HTTPBadRequest(
                'This action takes no request body.')
        return json_response(render(req, act(context, req)))
    return handler


def require_json(req):
    """Refuse a body that does not say it is JSON, in UTF-8, with 415.

    JSON is UTF-8 (RFC 8259) and the body is decoded so: a body that says
    it is in another charset would be read as what it did not mean.
    """
    if req.content_type.lower() != JSON_TYPE:
        raise webob.exc.HTTPUnsupportedMediaType(
            'The request body must have Content-Type %s, not %r.'
            % (JSON_TYPE, req.content_type or None))
    # webob's charset is UTF-8 when the header names none.
    if req.charset.lower().replace('-', '') != 'utf8':
        raise webob.exc.HTTPUnsupportedMediaType(
            'A JSON request body is in UTF-8, not %r.' % req.charset)


def _object(pairs):
    """A JSON object as a dict, refusing a name given twice in it.

    Python's parser keeps the last value and other parsers the first: a
    proxy or policy that read the body before the API would have read
    another request.
    """
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen = set()
        for name, _value in pairs:
            if name in seen:
                raise ValueError('the name %r is given twice in one object'
                                 % name)
            seen.add(name)
    return obj


def _refuse_constant(name):
    raise ValueError('%s is not a JSON number' % name)


def _finite_float(text):
    value = float(text)
    if not math.isfinite(value):
        raise ValueError('%s is out of the range of a JSON number' % text)
    return value


# An escaped UTF-16 surrogate: a string with one may hold a lone one.
_SURROGATE_ESCAPE = re.compile(r'\\u[dD][89a-fA-F]')


def _check_unicode(text, data):
    """Refuse strings with a lone surrogate, which no database can store.

    JSON lets ``"\\ud800"`` through; only a body that escapes a surrogate
    can hold one, so only those are encoded to check.
    """
    if _SURROGATE_ESCAPE.search(text) is None:
        return
    try:
        jsonutils.dumps(data, ensure_ascii=False).encode('utf-8')
    except UnicodeEncodeError:
        raise webob.exc.HTTPBadRequest(
            'Malformed JSON: a string holds a lone UTF-16 surrogate, which '
            'is not a character.')


def extract_json(body, schema):
    """Parse ``body`` as JSON and validate it against ``schema``.

    Raises 400 naming what is malformed or which field breaks which rule.
    JSON that no standard parser reads back (NaN, Infinity, a number out
    of range, a lone surrogate), an object that gives a name twice and
    nesting deeper than Python's parser goes are malformed too.
    """
    try:
        text = body.decode('utf-8')
        data = jsonutils.loads(text, parse_constant=_refuse_constant,
                               parse_float=_finite_float,
                               object_pairs_hook=_object)
        _check_unicode(text, data)
    except ValueError as exc:
        raise webob.exc.HTTPBadRequest('Malformed JSON: %s' % exc)
    except RecursionError:
        raise webob.exc.HTTPBadRequest(
            'Malformed JSON: nested too deeply.')
    validate(data, schema, 'JSON body')
    return data


@functools.lru_cache(maxsize=None)
def _end_anchored(pattern):
    """``pattern`` compiled with a final ``$`` that means the very end.

    JSON Schema's patterns are ECMA-262's, whose ``$`` matches only at the
    end of the string; Python's also matches before a final newline, which
    let ``"name\\n"`` through every anchored pattern. The schemas use
    ``$`` only at the end of a pattern (a unit test checks it).
    """
    if pattern.endswith('$') and not pattern.endswith('\\$'):
        pattern = pattern[:-1] + '\\Z'
    return re.compile(pattern)


def _pattern(validator, pattern, instance, schema):
    if (validator.is_type(instance, 'string')
            and not _end_anchored(pattern).search(instance)):
        yield jsonschema.exceptions.ValidationError(
            '%r does not match %r' % (instance, pattern))


# Each schema's validator, built once: building one for every request cost
# more than the validation. Keyed by the schema's id, which the schema
# itself, kept beside it, holds for the life of the process.
_VALIDATORS = {}


def _validator(schema):
    try:
        return _VALIDATORS[id(schema)][1]
    except KeyError:
        validator_cls = jsonschema.validators.extend(
            jsonschema.validators.validator_for(schema),
            {'pattern': _pattern})
        validator = validator_cls(
            schema, format_checker=validator_cls.FORMAT_CHECKER)
        _VALIDATORS[id(schema)] = (schema, validator)
        return validator


def validate(data, schema, what):
    error = jsonschema.exceptions.best_match(
        _validator(schema).iter_errors(data))
    if error is not None:
        raise webob.exc.HTTPBadRequest(
            'Invalid %s: %s (at %s)' % (what, error.message, error.json_path))


def check_package_reference(values):
    """An upgrade or a rollout names a ``package``, or where it is.

    Without ``package`` both ``strategy`` and ``location`` are required;
    with it, neither may be given.
    """
    if 'package' not in values:
        missing = [k for k in ('strategy', 'location') if k not in values]
        if missing:
            raise webob.exc.HTTPBadRequest(
                'Invalid JSON body: give either package, or strategy and '
                'location (%s missing).' % ' and '.join(missing))
        return
    given = [k for k in ('strategy', 'location') if k in values]
    if given:
        raise webob.exc.HTTPBadRequest(
            'Invalid JSON body: package names where the version is; do not '
            'also give %s.' % ' and '.join(given))


def query_params(req, schema):
    """The query string as a dict, each parameter given at most once.

    A NUL is refused here: the filters reach SQL, and PostgreSQL cannot
    hold a NUL in a string (it failed the query: 500).
    """
    params = {}
    try:
        items = req.GET.items()
    except UnicodeDecodeError:
        raise webob.exc.HTTPBadRequest(
            'The query string is not UTF-8 once percent-decoded.')
    for name, value in items:
        if name in params:
            raise webob.exc.HTTPBadRequest(
                'Query parameter %r may be given only once.' % name)
        if '\x00' in name or '\x00' in value:
            raise webob.exc.HTTPBadRequest(
                'Query parameter %r holds a NUL character.' % name)
        params[name] = value
    validate(params, schema, 'query string')
    return params


def canonical_id(value):
    """A UUID of a path or marker as the ids are stored: in lower case.

    SQLite compares strings case-sensitively and MariaDB does not: an id
    in upper case was found on one and not on the other.
    """
    return value.lower()


def get_marker(params):
    """The ``marker`` parameter, an id (the schema checks it), or None."""
    marker = params.get('marker')
    return None if marker is None else canonical_id(marker)


def content_length(text, limit):
    """``text``, a Content-Length, as a number; None when it is none.

    A number of ASCII digits only: ``str.isdigit`` also takes "²",
    which ``int`` refuses, and ``int`` refuses more than 4300 digits, so
    one past ``limit`` stands for any larger one.
    """
    if not (text.isascii() and text.isdigit()):
        return None
    digits = text.lstrip('0') or '0'
    if len(digits) > len(str(limit)):
        return limit + 1
    return min(int(digits), limit + 1)


def get_limit(params, max_limit):
    """The page size asked for, capped at ``[api] max_limit``."""
    limit = params.get('limit')
    if limit is None:
        return max_limit
    digits = limit.lstrip('0')
    if not (limit.isascii() and limit.isdigit()) or not digits:
        raise webob.exc.HTTPBadRequest(
            'limit must be a positive integer, not %r.' % limit)
    # More digits than max_limit has is more than it, without an int()
    # of thousands of digits (which Python refuses).
    if len(digits) > len(str(max_limit)):
        return max_limit
    return min(int(digits), max_limit)


def isotime(value):
    """Render a datetime as ISO 8601 in UTC; naive datetimes are UTC."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.timezone.utc)
    value = value.astimezone(datetime.timezone.utc)
    return value.isoformat().replace('+00:00', 'Z')
