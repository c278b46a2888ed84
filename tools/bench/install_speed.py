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

"""Guest CPU and wall time of building an install: pip against uv.

The wheels of real Trove releases (``trove==<version>`` and every
dependency, collected by pip once into ``--cache``, the functional tests'
cache by default) are built into a signed, encrypted package in a
temporary directory and verified as the agent verifies, and the verified
wheels are installed by the agent's own code (``InstallRoot.build``: the
virtualenv, the install, byte code compiled), each case in an install
root of its own:

* ``pip``: the fallback, ``pip install --no-index`` (the reference);
* ``uv first``: uv with an empty cache and no older install, every wheel
  unpacked and every file compiled;
* ``uv upgrade``: uv after the ``--from`` release was built the same way
  beside it (not measured), as on a guest upgrading: unchanged wheels
  linked from the cache with their compiled files;
* ``uv again``: the same wheels once more beside ``uv first``.

CPU is user plus system time of the benchmark's children (the virtualenv's
creation, uv or pip, and the interpreters compiling byte code), from
``resource.getrusage(RUSAGE_CHILDREN)``, plus this process's own (the
linking of compiled files runs in the agent). The target, reported and not
asserted: ``uv upgrade`` at most a tenth of ``pip``'s CPU. Nothing is kept.
Usage::

    python tools/bench/install_speed.py [--from 25.1.0] [--to 26.0.0]
        [--cache DIR] [--dir DIR]
"""

import argparse
import datetime
import os
import resource
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from trove_upgrade.agent import install  # noqa: E402
from trove_upgrade.agent import journal  # noqa: E402
from trove_upgrade.package_format import build  # noqa: E402
from trove_upgrade.package_format import keys  # noqa: E402
from trove_upgrade.package_format import verify  # noqa: E402
from trove_upgrade.package_format import wheels as wheels_mod  # noqa: E402

TARGET_RATIO = 0.1
DEFAULT_CACHE = os.environ.get('TROVE_UPGRADE_TEST_CACHE') or os.path.join(
    os.path.expanduser('~'), '.cache', 'trove-upgrade-tests')


def verified_wheels(version, cache, workdir):
    """Trove ``version``'s wheels, packaged, verified and written out."""
    collected = wheels_mod.collect(['trove==%s' % version], cache)
    signing_key = keys.generate_signing_key()
    secret = keys.generate_encryption_key()
    package = os.path.join(workdir, 'package-%s' % version)
    now = datetime.datetime.now(datetime.timezone.utc)
    build.build_package(
        collected, package, version=version, signing_keys=[signing_key],
        encryption_key=secret, expires=now + datetime.timedelta(days=1))
    _, public = keys.write_signing_key(
        os.path.join(workdir, 'signing-%s' % version), signing_key)
    secret_path = keys.write_encryption_key(
        os.path.join(workdir, 'encryption-%s' % version), secret)
    dest = os.path.join(workdir, 'verified-%s' % version)
    _, extracted = verify.verify_package(
        package, trusted_keys=keys.load_trusted_keys([public]),
        keyring=keys.load_keyring([secret_path]), dest_dir=dest,
        expected_version=version, installed_version='0',
        max_payload_size=4 * 1024 ** 3)
    os.unlink(package)
    return sorted(str(p) for p in extracted)


def install_root(workdir, name, uv):
    root = os.path.join(workdir, name)
    os.makedirs(root)
    return install.InstallRoot(
        root, journal.InstallRootLock(root),
        uv_program=install.find_uv if uv else None)


def timed_build(installs, version, wheels):
    """Build ``version``; return (installer, wall s, CPU s); mark it whole."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = time.process_time()
    started = time.perf_counter()
    how = installs.build(installs.path(version), wheels)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime
           - before.ru_stime + time.process_time() - own)
    # Complete, as install() marks it after its checks (not measured).
    with open(os.path.join(installs.path(version), install.MARKER),
              'w') as f:
        f.write(version)
    return how, wall, cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--from', dest='old', default='25.1.0',
                        help='the release the upgraded guest holds')
    parser.add_argument('--to', dest='new', default='26.0.0',
                        help='the release installed')
    parser.add_argument('--cache', default=DEFAULT_CACHE,
                        help='where pip collects the wheels (kept)')
    parser.add_argument('--dir', default=None,
                        help='where to put the temporary files')
    args = parser.parse_args()
    if install.find_uv() is None:
        print('uv is not installed beside this interpreter')
        return 2
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        new = verified_wheels(args.new, args.cache, tmp)
        old = verified_wheels(args.old, args.cache, tmp)
        shared = len({os.path.basename(p) for p in new}
                     & {os.path.basename(p) for p in old})
        print('trove %s: %d verified wheels, %d of them also in %s'
              % (args.new, len(new), shared, args.old))
        figures = {}
        figures['pip'] = timed_build(install_root(tmp, 'pip', False),
                                     args.new, new)
        first = install_root(tmp, 'uv', True)
        figures['uv first'] = timed_build(first, args.new, new)
        upgraded = install_root(tmp, 'uv-upgrade', True)
        timed_build(upgraded, args.old, old)
        figures['uv upgrade'] = timed_build(upgraded, args.new, new)
        figures['uv again'] = timed_build(first, args.new + '-again', new)
    pip_cpu = figures['pip'][2]
    print('%-11s %-9s %8s %8s %8s' % ('case', 'installer', 'wall s',
                                      'CPU s', 'of pip'))
    for name, (how, wall, cpu) in figures.items():
        print('%-11s %-9s %8.2f %8.2f %7.1f%%'
              % (name, how, wall, cpu, 100 * cpu / pip_cpu))
    ratio = figures['uv upgrade'][2] / pip_cpu
    met = ratio <= TARGET_RATIO and all(
        how == 'uv' for name, (how, _, _) in figures.items() if name != 'pip')
    print('CPU: user and system, of the children and of this process; '
          'byte code compiled in every case')
    print('target (uv upgrade CPU <= %d%% of pip): %s'
          % (100 * TARGET_RATIO, 'met' if met else 'NOT met'))
    return 0 if met else 1


if __name__ == '__main__':
    sys.exit(main())
