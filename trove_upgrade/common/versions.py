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

"""One rule for reading and comparing versions, wherever they appear.

A version is read as PEP 440 (``packaging.version.Version``) when it is
one, one optional leading ``v`` or ``V`` allowed: ``2.0``, ``2.0.0`` and
``v2.0`` are one version, ``2.1rc1`` comes before ``2.1``.

Anything else (an agent reports what its guest says) is an opaque
version. Its normalisation drops one leading ``v`` or ``V`` and nothing
more; an opaque version is the same as another only when the two are
identical after it, and it is neither older nor newer than any version.
Sorted, opaque versions come after every PEP 440 one, by their text.

Nothing longer than :data:`MAX_LENGTH` is read as PEP 440 (packaging
would turn a release segment of thousands of digits into an int), nor
anything with white space around it (packaging would ignore it).
"""

from packaging import specifiers
from packaging import version as pep440

from trove_upgrade.common import exception

# The length of the version columns.
MAX_LENGTH = 255

_OPERATORS = ('===', '==', '!=', '>=', '<=', '~=', '>', '<')


def _bare(text):
    """``text`` without one leading "v" or "V": the opaque normalisation."""
    return text[1:] if text[:1] in ('v', 'V') else text


def parse(text):
    """The PEP 440 version ``text`` is, or None when it is none."""
    if (not isinstance(text, str) or len(text) > MAX_LENGTH
            or text != text.strip()):
        return None
    try:
        # packaging itself takes one leading "v" or "V".
        return pep440.Version(text)
    except (pep440.InvalidVersion, ValueError):
        return None


def require(text):
    """The PEP 440 version ``text`` is.

    :raises: Invalid when it is none.
    """
    found = parse(text)
    if found is None:
        raise exception.InvalidInputError(
            reason='%r is not a version (PEP 440, with an optional leading '
                   '"v")' % (text,))
    return found


def sort_key(text):
    """Orders versions; two versions are the same when their keys are."""
    found = parse(text)
    if found is not None:
        return (0, found, '')
    return (1, None, _bare(text))


def same(a, b):
    """Whether ``a`` and ``b`` are one version; None is no version."""
    return a is not None and b is not None and sort_key(a) == sort_key(b)


def label(text):
    """The one name of the versions that are the same as ``text``.

    PEP 440 compares ``2.0`` and ``2.0.0`` equal but prints them apart,
    so the release is written with three parts (more when a later one is
    not 0): ``v2``, ``2.0`` and ``2.0.0.0`` are all ``2.0.0``. An opaque
    version is named by its normalised text.
    """
    found = parse(text)
    if found is None:
        return _bare(text)
    release = list(found.release)
    while len(release) > 3 and release[-1] == 0:
        release.pop()
    release += [0] * (3 - len(release))
    return '%s%s%s' % ('%d!' % found.epoch if found.epoch else '',
                       '.'.join(map(str, release)),
                       str(found)[len(found.base_version):])


def matcher(query):
    """A predicate on version strings for a query.

    ``26.0.0`` matches that version exactly (``v26.0`` too: versions are
    compared, not strings); ``26.*`` is a wildcard; a query starting with
    an operator (``>=25.1``, ``>=25,<27``, ``~=26.0``) is a PEP 440
    specifier set. Pre-releases match a range or wildcard that covers
    them. Opaque versions match only a query that is the same version.

    :raises: Invalid when the query is none of those.
    """
    query = query.strip()
    try:
        if query.startswith(_OPERATORS):
            spec = specifiers.SpecifierSet(query)
        elif '*' in query:
            spec = specifiers.SpecifierSet('==' + _bare(query))
        else:
            wanted = require(query)
            return lambda text: parse(text) == wanted
    except specifiers.InvalidSpecifier as e:
        raise exception.InvalidInputError(
            reason='version query %r is neither a version, a wildcard nor a '
                   'range: %s' % (query, e))

    def matches(text):
        found = parse(text)
        return found is not None and spec.contains(found, prereleases=True)
    return matches
