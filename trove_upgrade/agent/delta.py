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

"""Fetch only the wheels the guest does not hold: ranges of the payload.

The signed manifest lists every wheel with its SHA-256. The agent keeps
the wheels of its installs, named by that hash
(:mod:`trove_upgrade.agent.wheel_store`), so an upgrade needs only the
wheels whose hash it does not hold, and a new release shares most of its
wheels with the last one. Those are fetched as byte ranges of the package
the store already serves (an HTTP ``Range``, a Swift ranged GET, a seek in
a local file): nothing changes for whoever builds or publishes packages,
every package ever built can be fetched so, and a strategy that cannot
read part of an object (rsync) downloads the whole package, as does a
server that answers a range with the whole object. The ranges are written
back to back into ``package.ranges`` in the download step; the verify step
authenticates and checks them (:mod:`trove_upgrade.package_format
.payload_ranges`) before any wheel is written out.

The whole package is downloaded, as before, when the guest holds none of
its wheels (a first install, an image's adopted virtualenv) or when the
ranges would save nothing.
"""

import os

from oslo_log import log as logging

from trove_upgrade.agent.strategies import exception as strategy_exc
from trove_upgrade.package_format import payload_ranges

LOG = logging.getLogger(__name__)

RANGES_SUFFIX = '.ranges'


def missing(manifest, held):
    """The manifest's entries whose SHA-256 is not in ``held``."""
    held = set(held)
    return [entry for entry in manifest.files if entry.sha256 not in held]


def download(strategy, location, manifest, held, payload_path):
    """Fetch the ranges of the wheels not held; None to fetch everything.

    Returns ``{'size': bytes fetched, 'kept': wheels not fetched}``.
    """
    wanted = missing(manifest, held)
    # A plugin strategy need not derive from strategies.base.Strategy.
    if (not getattr(strategy, 'serves_ranges', False)
            or len(wanted) == len(manifest.files)):
        return None
    ranges = payload_ranges.plan(manifest, wanted)
    if payload_ranges.fetched_size(ranges) >= manifest.payload.size:
        return None
    try:
        size = strategy.fetch_ranges(
            location, [(r.start, r.length) for r in ranges],
            payload_path + RANGES_SUFFIX)
    except strategy_exc.RangesNotServedError as e:
        LOG.warning('Downloading the whole package instead: %s', e)
        return None
    LOG.info('Fetched %d of the %d wheels of %s (%d of %d bytes); the '
             'others are kept from earlier installs', len(wanted),
             len(manifest.files), location, size, manifest.payload.size)
    return {'size': size, 'kept': len(manifest.files) - len(wanted)}


def fetched_ranges(payload_path):
    """The ranges file the download step left, or None."""
    path = payload_path + RANGES_SUFFIX
    return path if os.path.exists(path) else None


def extract(verifier, ranges_path, manifest, held, dest_dir):
    """Check the fetched wheels and write them out; return their paths."""
    wheels = verifier.extract_files(ranges_path, manifest, dest_dir,
                                    missing(manifest, held))
    os.unlink(ranges_path)
    return wheels


def take_kept(store, manifest, dest_dir):
    """Link every wheel of ``manifest`` not in ``dest_dir`` from the store.

    :raises: KeptWheelMissing when the store no longer holds one with its
        signed SHA-256 (it was dropped after the download began).
    """
    for entry in manifest.files:
        path = os.path.join(dest_dir, entry.name)
        if os.path.exists(path):
            continue
        if store is None or not store.take(entry, path):
            raise KeptWheelMissing(entry.name)
    return [os.path.join(dest_dir, entry.name) for entry in manifest.files]


class KeptWheelMissing(Exception):
    """A wheel not fetched is not held either: the next attempt fetches it."""

    def __init__(self, name):
        super().__init__('the wheel %s was not fetched and the agent no '
                         'longer holds it with its signed SHA-256; the '
                         'next attempt fetches it' % name)
