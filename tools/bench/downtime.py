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

"""How long the guest agent is down during an upgrade, by package size.

Downtime is measured from the moment the old guest agent process has
exited to the moment the new one passes its health check (alive for
``--health-grace`` seconds, then the health command passing). Two ways of
upgrading are measured in the same run, on the same packages:

side-by-side (trove-upgrade-agent's pipeline)
    download, verify, decrypt and install into a new virtualenv while the
    old guest agent runs; then switch ``current``, stop, start, check.
in place
    stop the guest agent, ``pip install`` the new wheel into its live
    environment, start it, check.

The packages are real (a sample guest-agent wheel padded with
incompressible bytes, signed and encrypted by the packaging library) and
the guest agents real processes. Usage::

    python tools/bench/downtime.py [--sizes-mib 1 200] [--health-grace 1]
    python tools/bench/downtime.py --trove [--service-manager supervisord]
        [--stop-timeout 0.5]

``--trove`` measures the real OpenStack Trove guest agent instead, 25.1.0
to 26.0.0, downtime seen on its RPC topic (``downtime_trove.py``).
"""

import argparse
import datetime
import os
import shutil
import subprocess
import sys
import tempfile
import time

from oslo_utils import uuidutils

from trove_upgrade.agent import install
from trove_upgrade.agent import journal as journal_mod
from trove_upgrade.agent import pipeline
from trove_upgrade.agent import strategies
from trove_upgrade.agent import supervisor
from trove_upgrade.agent import verifier
from trove_upgrade import conf
from trove_upgrade.package_format import build
from trove_upgrade.package_format import keys
from trove_upgrade.package_format import manifest as manifest_mod

# What the benchmarks share with the functional tests (tools/testbed), from
# the repository's root.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
from tools.testbed import conffile  # noqa: E402
from tools.testbed import sample_guest  # noqa: E402

STATE_DIR = '../../guest-run'
MIB = 1024 * 1024


class TimedSupervisor(supervisor.GuestSupervisor):
    """Notes when the old process is gone and when the new one is healthy."""

    stopped_at = None
    healthy_at = None

    def stop(self):
        running = self.is_running()
        super().stop()
        if running and self.stopped_at is None:
            self.stopped_at = time.monotonic()

    def restart(self, *args, **kwargs):
        version = super().restart(*args, **kwargs)
        self.healthy_at = time.monotonic()
        return version


def _keys(work):
    signing = keys.generate_signing_key()
    sign_path = os.path.join(work, 'sign.key')
    keys.write_signing_key(sign_path, signing)
    enc = keys.generate_encryption_key()
    enc_path = keys.write_encryption_key(os.path.join(work, 'enc.key'), enc)
    return signing, sign_path, enc, enc_path


def _package(work, version, padding, signing, enc):
    wheel = sample_guest.build_wheel(os.path.join(work, 'wheels-' + version),
                                     version, padding=padding)
    path = os.path.join(work, 'guest-%s.pkg' % version)
    build.build_package(
        [wheel], path, version=version, signing_keys=[signing],
        encryption_key=enc,
        expires=datetime.datetime.now(datetime.timezone.utc)
        + datetime.timedelta(days=1),
        health_check=manifest_mod.HealthCheck(
            tuple(sample_guest.health_command(STATE_DIR).split()), 30))
    return wheel, path


def _configure(root, grace, work):
    # The local strategy reads the packages where the benchmark built them.
    strategy_dir = os.path.join(work, 'strategies.d')
    conffile.write_conf(os.path.join(strategy_dir, 'local.conf'),
                        {'local': {'allowed_dirs': [work]}})
    conf.CONF([], project='trove-upgrade')
    for name, value in (('install_root', root),
                        ('strategy_config_dir', strategy_dir),
                        ('allowed_strategies', ['local']),
                        ('guest_command',
                         sample_guest.guest_command(STATE_DIR)),
                        ('health_grace', grace), ('health_timeout', 30),
                        ('restart_retries', 1), ('keep_versions', 2)):
        conf.CONF.set_override(name, value, group='agent')


def _fresh_root(work, name):
    root = os.path.join(work, name)
    journal = journal_mod.UpgradeJournal(root)
    installs = install.InstallRoot(root, journal.lock)
    v1 = sample_guest.build_wheel(os.path.join(work, 'wheels-1'), '1.0.0')
    installs.install('1.0.0', [v1],
                     sample_guest.health_command(STATE_DIR))
    installs.switch('1.0.0')
    return root, journal, installs


def side_by_side(work, package, grace, sign_path, enc_path):
    root, journal, installs = _fresh_root(work, 'side-by-side')
    _configure(root, grace, work)
    sup = TimedSupervisor(installs, conf.CONF.agent.guest_command)
    health = sample_guest.health_command(STATE_DIR)
    sup.restart(health, grace, 30, 1)
    sup.stopped_at = None
    runner = pipeline.UpgradePipeline(
        conf.CONF, journal, installs, sup,
        verifier.PackageVerifier([sign_path + '.pub'], 1, [enc_path]),
        # The local disk, so that the network is not measured.
        load_strategy=lambda name: strategies.load('local', conf=conf.CONF))
    # The agent takes only UUIDs for upgrade ids.
    entry = {'id': uuidutils.generate_uuid(), 'instance_version': '2.0.0',
             'to_version': '2.0.0', 'from_version': '1.0.0',
             'strategy': 'local', 'location': package,
             'allow_downgrade': False, 'step': pipeline.ACCEPTED,
             'attempts': 1, 'detail': ''}
    with journal.update() as data:
        data['current_upgrade'] = entry
    started = time.monotonic()
    result = runner.run(entry)
    total = time.monotonic() - started
    sup.stop()
    if result != 'SUCCESS':
        raise RuntimeError('side-by-side upgrade ended %s: %s'
                           % (result, journal.read()['outbox'][-1]))
    shutil.rmtree(root)
    return sup.healthy_at - sup.stopped_at, total


def in_place(work, wheel, grace):
    root, journal, installs = _fresh_root(work, 'in-place')
    sup = supervisor.GuestSupervisor(installs,
                                     sample_guest.guest_command(STATE_DIR))
    health = sample_guest.health_command(STATE_DIR)
    sup.restart(health, grace, 30, 1)
    started = time.monotonic()
    sup.stop()
    stopped = time.monotonic()
    live = installs.path('1.0.0')
    subprocess.run(
        [sys.executable, '-m', 'pip', '--python',
         os.path.join(live, 'bin', 'python'), 'install', '--no-index',
         '--no-cache-dir', '--disable-pip-version-check', '--quiet',
         '--find-links', os.path.dirname(wheel), wheel], check=True)
    sup.start()
    reason = sup.check_health(health, grace, 30)
    healthy = time.monotonic()
    sup.stop()
    if reason:
        raise RuntimeError('in-place upgrade unhealthy: %s' % reason)
    shutil.rmtree(root)
    return healthy - stopped, healthy - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--sizes-mib', type=int, nargs='+', default=[1, 200])
    parser.add_argument('--health-grace', type=float, default=1.0)
    parser.add_argument('--trove', action='store_true',
                        help='the real Trove guest agent, 25.1.0 -> 26.0.0')
    parser.add_argument('--service-manager', default='builtin',
                        choices=['builtin', 'supervisord'],
                        help='with --trove: who runs the guest agent '
                             '(supervisord through its XML-RPC interface)')
    parser.add_argument('--stop-timeout', type=float, default=0.5,
                        help='with --trove: [agent] stop_timeout, seconds '
                             'from SIGTERM to SIGKILL (0.5: the value '
                             'recommended for Trove guests)')
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix='downtime-bench-')
    if args.trove:
        import downtime_trove
        try:
            return downtime_trove.main(work, args.service_manager,
                                       args.stop_timeout)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    try:
        signing, sign_path, enc, enc_path = _keys(work)
        print('health grace %.1fs (included in every downtime)'
              % args.health_grace)
        print('%-9s %-13s %12s %12s' % ('package', 'method', 'downtime',
                                        'total'))
        for size in args.sizes_mib:
            wheel, package = _package(work, '2.0.0', size * MIB, signing,
                                      enc)
            label = '%d MiB' % size
            down, total = side_by_side(work, package, args.health_grace,
                                       sign_path, enc_path)
            print('%-9s %-13s %11.2fs %11.2fs'
                  % (label, 'side-by-side', down, total))
            down, total = in_place(work, wheel, args.health_grace)
            print('%-9s %-13s %11.2fs %11.2fs'
                  % (label, 'in place', down, total))
            os.unlink(package)
            os.unlink(package + manifest_mod.MANIFEST_SUFFIX)
            shutil.rmtree(os.path.dirname(wheel))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    main()
