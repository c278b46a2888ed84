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

"""The package registry: publish a version once, deploy it by reference.

A package is registered only after the control plane fetched its signed
manifest (``<location>.manifest``) with the agents' own download strategy
and verified it with
:func:`trove_upgrade.package_format.verify.verify_manifest` against the
control plane's trusted keys (``[packages]``): signatures and
threshold, expiry, the declared version, the format and the announced
size. A typo, a tampered or expired manifest, a wrong version or an
unreachable location is refused at publication, with the reason, instead
of being discovered by every agent after dispatch. The payload itself is
not downloaded: the agent verifies it against the manifest's signed hash.

A package is ``active``, ``deprecated`` (still deployable, shown as such)
or ``retired`` (refused to new deploys). It cannot be deleted while
anything uses it: an upgrade in flight, an active rollout, a desired
version, or agents running its version (agents report a version, not a
package name, so any package of that version counts as in use).
"""

import hashlib
import os
import tempfile
import types

from oslo_log import log as logging

from trove_upgrade.agent import strategies
from trove_upgrade.agent.strategies import exception as strategy_exc
from trove_upgrade.common import exception
from trove_upgrade.common import exception as package_exc
from trove_upgrade.common import rollout_states
from trove_upgrade.common import versions
from trove_upgrade import conf
from trove_upgrade.db import common as db_common
from trove_upgrade.db import desired_versions as dv_db
from trove_upgrade.db import packages as db
from trove_upgrade.package_format import keys
from trove_upgrade.package_format import manifest as manifest_mod
from trove_upgrade.package_format import verify

CONF = conf.CONF
LOG = logging.getLogger(__name__)

ACTIVE = 'active'
DEPRECATED = 'deprecated'
RETIRED = 'retired'
STATES = (ACTIVE, DEPRECATED, RETIRED)


def _strategy_conf():
    """The ``conf.agent`` view the strategies read, from ``[packages]``."""
    opts = CONF.packages
    return types.SimpleNamespace(agent=types.SimpleNamespace(
        allowed_strategies=opts.allowed_strategies,
        strategy_config_dir=opts.strategy_config_dir,
        download_timeout=opts.fetch_timeout,
        download_retries=opts.fetch_retries,
        download_retry_delay=1.0,
        download_retry_max_delay=5.0))


def fetch_manifest(strategy_name, location):
    """The bytes of ``<location>.manifest``, as an agent would fetch them.

    :raises: StrategyError subclasses (not allowed, malformed location,
        unreachable, too large).
    """
    strategy = strategies.load(strategy_name, conf=_strategy_conf())
    with tempfile.TemporaryDirectory(prefix='trove-upgrade-manifest-') as d:
        path = os.path.join(d, 'manifest')
        strategy.fetch(location + manifest_mod.MANIFEST_SUFFIX, path,
                       verify.DEFAULT_MAX_MANIFEST_SIZE)
        with open(path, 'rb') as f:
            return f.read()


def _trusted_keys():
    opts = CONF.packages
    if not opts.trusted_key_files:
        raise exception.PackageRejectedError(
            package='', reason='the control plane trusts no signing key: '
                               'set [packages] trusted_key_files')
    return keys.load_trusted_keys(opts.trusted_key_files,
                                  opts.signature_threshold)


def verified_manifest(name, version, strategy_name, location):
    """Fetch and verify a package's manifest; PackageRejectedError otherwise.

    Returns the trusted keys, the manifest and its file's SHA-256.
    """
    label = '%s %s' % (name, version)
    trusted = _trusted_keys()
    try:
        manifest_bytes = fetch_manifest(strategy_name, location)
    except strategy_exc.StrategyError as e:
        raise exception.PackageRejectedError(
            package=label, reason='its manifest could not be fetched: %s: %s'
                                  % (type(e).__name__, e))
    try:
        manifest = verify.verify_manifest(
            manifest_bytes, trusted, expected_version=version,
            installed_version=None,
            max_payload_size=CONF.packages.max_payload_size)
    except package_exc.PackageError as e:
        raise exception.PackageRejectedError(
            package=label, reason='its manifest failed verification: %s: %s'
                                  % (type(e).__name__, e))
    return trusted, manifest, hashlib.sha256(manifest_bytes).hexdigest()


def register_package(context, values):
    """Verify and record a package.

    ``values`` has ``name``, ``version``, ``strategy`` and ``location``.
    """
    name, version = values['name'], values['version']
    versions.require(version)
    if db.find_package(context, name, version) is not None:
        raise exception.PackageConflictError(reason=(
            'Package %s version %s is registered already.' % (name, version)))
    trusted, manifest, manifest_sha256 = verified_manifest(
        name, version, values['strategy'], values['location'])
    package = db.create_package(context, {
        'name': name, 'version': version, 'strategy': values['strategy'],
        'location': values['location'], 'state': ACTIVE,
        'size': manifest.payload.size, 'sha256': manifest.payload.sha256,
        'min_upgrade_from': manifest.min_upgrade_from,
        'signer_key_ids': sorted({s.key_id for s in manifest.signatures
                                  if s.key_id in trusted}),
        'manifest_created_at': manifest.created,
        'manifest_expires_at': manifest.expires,
        'manifest_sha256': manifest_sha256,
        'manifest_package': manifest.package})
    LOG.info('Package %(name)s %(version)s registered from %(location)s.',
             {'name': name, 'version': version,
              'location': values['location']})
    return package


def get_package(context, package_id):
    """:raises: PackageNotFoundError."""
    return db.get_package(context, package_id)


def list_packages(context, name=None, state=None, version=None):
    """Registered packages; ``version`` is a version, wildcard or range."""
    filters = {k: v for k, v in (('name', name), ('state', state)) if v}
    found = db.list_packages(context, filters=filters)
    if version is not None:
        matches = versions.matcher(version)
        found = [p for p in found if matches(p['version'])]
    return found


def set_state(context, package_id, state):
    if state not in STATES:
        raise exception.InvalidInputError(reason='state must be one of %s'
                                          % ', '.join(STATES))
    package = db.update_package_state(context, package_id, state)
    LOG.info('Package %(name)s %(version)s is now %(state)s.', package)
    return package


def users_of(context, package):
    """What uses ``package``, as sentences; empty when nothing does."""
    uses = []
    upgrades = db.list_unfinished_upgrades_of(
        context, package['strategy'], package['location'])
    if upgrades:
        uses.append('%d upgrade(s) in flight (%s)' % (
            len(upgrades), ', '.join(upgrades[:3])))
    rollouts = db.list_rollouts_of(context, package['strategy'],
                                   package['location'],
                                   rollout_states.ACTIVE_STATES)
    if rollouts:
        uses.append('active rollout(s) %s' % ', '.join(
            '%s (%s)' % (r['id'], r['name']) for r in rollouts))
    desired = dv_db.list_desired_versions(
        context, filters={'package_name': package['name'],
                          'version': package['version']})
    if desired:
        uses.append('desired version(s) %s' % ', '.join(
            '%s (%s)' % (d['id'], d['name']) for d in desired))
    spellings = [v for v in db.count_agents_by_version(context)
                 if versions.same(v, package['version'])]
    running = (db.list_agents_running(context, spellings) if spellings
               else [])
    if running:
        uses.append('%d instance(s) running version %s (%s)' % (
            len(running), package['version'], ', '.join(running[:3])))
    return uses


def delete_package(context, package_id):
    """Delete an unused package; PackageConflictError naming its users."""
    package = db.get_package(context, package_id)
    uses = users_of(context, package)
    if uses:
        raise exception.PackageConflictError(reason=(
            'Package %s %s is in use: %s.' % (package['name'],
                                              package['version'],
                                              '; '.join(uses))))
    db.delete_package(context, package_id)
    LOG.info('Package %(name)s %(version)s deleted.', package)


def resolve(context, name, version):
    """The deployable package ``name`` at ``version``.

    :raises: PackageRejectedError (400) when it is not registered,
        PackageConflictError (409) when it is retired.
    """
    package = db.find_package(context, name, version)
    if package is None:
        matches = [p for p in db.list_packages(context, {'name': name})
                   if versions.same(p['version'], version)]
        package = matches[0] if matches else None
    if package is None:
        raise exception.PackageRejectedError(
            package='%s %s' % (name, version),
            reason='no such package is registered')
    if package['state'] == RETIRED:
        raise exception.PackageConflictError(reason=(
            'Package %s %s is retired: it cannot be deployed.'
            % (name, version)))
    return package


def deploy_by_reference(context, values, agents):
    """Fill ``strategy``, ``location`` and the expectation from a package.

    ``values`` are an upgrade's or a rollout's; ``agents`` those it
    targets (or a function returning them, called only when a package is
    named), refused when below the package's floor. Without ``package``
    only the request's own ``expected_manifest`` is kept. Nothing is
    recorded.

    ``expected_manifest`` is the request's, when it gives one, or the
    registered package's: an upgrade to a registered package is always
    bound to the manifest verified at its registration, and a request
    that expects another one is refused.
    """
    _expectation(values)
    name = values.pop('package', None)
    if name is None:
        return
    package = resolve(context, name, values['instance_version'])
    check_floor(package, agents() if callable(agents) else agents)
    values['strategy'] = package['strategy']
    values['location'] = package['location']
    registered = package['expected_manifest']
    given = values.get('expected_manifest')
    if given is not None and registered is not None and any(
            given[k] not in (None, registered[k]) for k in given):
        raise exception.InvalidInputError(reason=(
            'expected_manifest differs from that of the registered '
            'package %s %s (sha256 %s, package %s).'
            % (package['name'], package['version'], registered['sha256'],
               registered['package'])))
    if registered is not None:
        values['expected_manifest'] = registered


def _expectation(values):
    """The request's ``expected_manifest`` with both fields, or none."""
    given = values.pop('expected_manifest', None)
    if given is None:
        return
    given = {k: given.get(k) for k in db_common.EXPECTED_MANIFEST_FIELDS}
    try:
        manifest_mod.check_expectation(given['sha256'], given['package'])
    except package_exc.InvalidExpectationError as e:
        raise exception.InvalidInputError(reason='expected_manifest: %s' % e)
    if any(v is not None for v in given.values()):
        values['expected_manifest'] = given


def below_floor(package, running_version):
    """Whether an agent at ``running_version`` cannot take ``package``.

    Its manifest's ``min_upgrade_from`` is the oldest version it installs
    over; an agent that reports no version is left for its own check.
    """
    floor = package['min_upgrade_from']
    if floor is None or running_version is None:
        return False
    running = versions.parse(running_version)
    if running is None:
        return False
    return running < versions.require(floor)


def check_floor(package, agents):
    """Refuse (409) when one of ``agents`` is below the package's floor."""
    below = sorted(a['instance_id'] for a in agents
                   if below_floor(package, a['guest_version']))
    if below:
        raise exception.PackageConflictError(reason=(
            'Package %s %s installs only over %s or later; %d selected '
            'agent(s) run an older version: %s%s.'
            % (package['name'], package['version'],
               package['min_upgrade_from'], len(below),
               ', '.join(below[:5]), ', ...' if len(below) > 5 else '')))
