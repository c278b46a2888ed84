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

"""The verified wheels the agent keeps, named by their SHA-256.

Layout under the install root::

    uv-wheels/<sha256>/<file name>     one verified wheel
    versions/<version>/.trove-upgrade-wheels   the SHA-256 of its wheels

Every wheel an install was built from is kept here: uv knows a local wheel
by its path, so the same bytes at the same path are the same wheel to its
cache, and an upgrade takes from here every wheel of the new package whose
signed SHA-256 it holds, fetching only the others
(:mod:`trove_upgrade.agent.delta`). A wheel is kept while an install lists
it: pruning an old version drops the wheels no remaining install lists, so
the store holds at most the wheels of ``[agent] keep_versions`` installs.

A wheel is written under a temporary name and renamed into place whole,
and read back only through :meth:`WheelStore.take`, which hashes it again:
a damaged or altered file is dropped and fetched, never installed.
"""

import hashlib
import json
import os
import re
import shutil

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

WHEELS_DIR = 'uv-wheels'
# The wheels an install was built from, in its directory.
RECORD = '.trove-upgrade-wheels'
_HEX64 = re.compile(r'[0-9a-f]{64}')
_BLOCK = 1 << 20


def file_sha256(path):
    """The SHA-256 of a file, hex, and its size."""
    digest = hashlib.sha256()
    size = 0
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(_BLOCK), b''):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


def _link_or_copy(source, target):
    """``target`` made whole from ``source``: a hard link, else a copy."""
    partial = target + '.partial'
    if os.path.lexists(partial):
        os.unlink(partial)
    try:
        os.link(source, partial)
    except OSError:
        shutil.copyfile(source, partial)
    os.replace(partial, target)


class WheelStore:
    """``uv-wheels`` of an install root; the caller holds its lock."""

    def __init__(self, root):
        self.path = os.path.join(root, WHEELS_DIR)

    def add(self, wheel_paths):
        """Keep verified wheels; return their paths in the store.

        A path already there holds the same bytes and is kept as it is
        (its time too, which uv compares); a new one is a hard link to
        the verified wheel (a copy across file systems).
        """
        named = []
        for path in wheel_paths:
            digest, _ = file_sha256(path)
            folder = os.path.join(self.path, digest)
            target = os.path.join(folder, os.path.basename(path))
            if not os.path.exists(target):
                os.makedirs(folder, exist_ok=True)
                _link_or_copy(path, target)
            named.append(target)
        return named

    def held(self):
        """The SHA-256 of every wheel kept, sorted."""
        try:
            names = os.listdir(self.path)
        except FileNotFoundError:
            return []
        return sorted(n for n in names if _HEX64.fullmatch(n))

    def take(self, entry, dest):
        """Link the kept wheel of manifest ``entry`` to ``dest``; or False.

        The wheel is hashed again first: one whose bytes no longer have
        the signed size and SHA-256 is dropped from the store, and the
        caller fetches it instead.
        """
        folder = os.path.join(self.path, entry.sha256)
        try:
            names = [n for n in os.listdir(folder)
                     if not n.endswith('.partial')]
        except (FileNotFoundError, NotADirectoryError):
            return False
        for name in names:
            path = os.path.join(folder, name)
            try:
                if (os.path.islink(path) or not os.path.isfile(path)
                        or file_sha256(path) != (entry.sha256, entry.size)):
                    raise ValueError(path)
                _link_or_copy(path, dest)
                return True
            except (OSError, ValueError):
                LOG.warning('The kept wheel %s does not have the SHA-256 '
                            'it is kept under: dropped, it is fetched',
                            path)
                shutil.rmtree(folder, ignore_errors=True)
                return False
        return False

    def keep_only(self, digests):
        """Drop every kept wheel whose SHA-256 is not in ``digests``."""
        digests = set(digests)
        dropped = [d for d in self.held() if d not in digests]
        for digest in dropped:
            shutil.rmtree(os.path.join(self.path, digest),
                          ignore_errors=True)
        if dropped:
            LOG.info('Dropped %d kept wheel(s) no install lists',
                     len(dropped))
        return dropped

    def clear(self):
        if os.path.lexists(self.path):
            LOG.info('Emptying the wheel store %s', self.path)
            shutil.rmtree(self.path, ignore_errors=True)


def write_record(install_dir, wheel_paths):
    """Record in an install which kept wheels it was built from."""
    digests = sorted({os.path.basename(os.path.dirname(p))
                      for p in wheel_paths})
    with open(os.path.join(install_dir, RECORD), 'w') as f:
        json.dump(digests, f)


def read_record(install_dir):
    """The SHA-256 an install lists; empty when it lists none."""
    try:
        with open(os.path.join(install_dir, RECORD)) as f:
            digests = json.load(f)
    except (OSError, ValueError, RecursionError):
        return []
    if not isinstance(digests, list):
        return []
    return [d for d in digests if isinstance(d, str) and _HEX64.fullmatch(d)]
