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

"""Canonical JSON: one byte sequence per document, so signatures are stable.

Signatures cover bytes, not data structures, so the signer and every verifier
must agree on the bytes. The encoding is the one TUF-style systems use: keys
sorted, no insignificant white space, UTF-8, integers only (floats have no
single spelling). Decoding is strict for the same reason: a document with a
duplicate key or a non-canonical spelling could mean one thing to the verifier
and another to a different parser, so :func:`loads` accepts only bytes that
:func:`dumps` would produce.
"""

import json

from trove_upgrade.common import exception as exceptions

# Sizes fit in 20 digits; longer numbers are refused before int() sees them.
MAX_INT_DIGITS = 20


def _check(value, floats=False):
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, int):
        return
    if isinstance(value, float):
        if floats:
            return
        raise TypeError('floats are not allowed in canonical JSON')
    if isinstance(value, (list, tuple)):
        for item in value:
            _check(item, floats)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError('object keys must be strings')
            _check(item, floats)
        return
    raise TypeError('%s is not allowed in canonical JSON'
                    % type(value).__name__)


def dumps(value, floats=False):
    """Encode ``value`` as canonical JSON bytes.

    ``floats`` admits finite floats, in Python's shortest spelling: for the
    seals of RPC messages (``trove_upgrade.common.sealing``), whose
    timestamps and arguments may hold them. Signed documents never do.
    """
    _check(value, floats)
    return json.dumps(value, sort_keys=True, separators=(',', ':'),
                      ensure_ascii=False, allow_nan=False).encode('utf-8')


def _no_duplicates(pairs):
    result = {}
    for key, value in pairs:
        if key in result:
            raise exceptions.ManifestFormatError(
                'duplicate key %s in JSON object' % exceptions.quoted(key))
        result[key] = value
    return result


def _no_float(text):
    raise exceptions.ManifestFormatError(
        'number %s is not an integer' % exceptions.quoted(text))


def _no_constant(text):
    raise exceptions.ManifestFormatError(
        '%s is not valid JSON' % exceptions.quoted(text))


def _int(text):
    if len(text) > MAX_INT_DIGITS:
        raise exceptions.ManifestFormatError(
            'a number of %d digits is longer than the %d allowed'
            % (len(text), MAX_INT_DIGITS))
    return int(text)


def loads(data):
    """Decode canonical JSON bytes; raise ManifestFormatError otherwise."""
    try:
        text = data.decode('utf-8')
    except UnicodeDecodeError as exc:
        raise exceptions.ManifestFormatError('not UTF-8: %s' % exc)
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates,
                           parse_float=_no_float, parse_int=_int,
                           parse_constant=_no_constant)
        # A lone surrogate (``"\\ud800"``) decodes but cannot be encoded.
        canonical = dumps(value)
    except (ValueError, RecursionError) as exc:
        raise exceptions.ManifestFormatError('not valid JSON: %s' % exc)
    if canonical != data:
        raise exceptions.ManifestFormatError(
            'not in canonical form (sorted keys, no white space, UTF-8)')
    return value


def signed_bytes(data, document, name='signed'):
    """The exact bytes of ``document[name]`` as received in ``data``.

    ``data`` passed :func:`loads`, so it is the canonical encoding of
    ``document`` and the value of the last key, in sorted order, is the
    canonical encoding of that value just before the closing brace.
    Signatures are checked over these bytes, never over a re-encoding.
    """
    if not isinstance(document, dict) or sorted(document)[-1:] != [name]:
        raise exceptions.ManifestFormatError(
            'the document does not end with "%s"' % name)
    part = dumps(document[name])
    start = len(data) - 1 - len(part)
    if data[start:-1] != part or data[start - len(name) - 3:start] != (
            b'"%s":' % name.encode()):
        raise exceptions.ManifestFormatError(
            'the "%s" value cannot be located in the document' % name)
    return bytes(data[start:-1])
