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

"""Throughput and peak memory of package verification, next to OpenSSL.

For each size, builds a package from generated wheel-like files (random
bytes, as incompressible as the zip files wheels are) in a temporary
directory, then, in the same run and on the same (page-cached) file,
``--repeat`` times each:

* ``openssl dgst -sha256`` over the package: the hashing speed this
  machine really has (SHA instructions), the reference of the target,
* ``sha256sum`` (coreutils, which may not use them) as a second column,
* ``cp`` of the package (writing as many bytes, left in the page cache),
* ``dd ... conv=fsync`` of the package: the same bytes written and made
  durable, the most the disk allows a verification (which must fsync the
  files it writes) in this run, and
* the agent's verification (manifest checks, decrypting, hashing the
  ciphertext once, writing the files with fsync, rename into place) in a
  child process, and
* the real ``trove-upgrade-package verify`` command (the console script
  beside this interpreter) on the same package, extracting to the same
  directory,

timing each child and measuring its peak RSS with GNU time
(``/usr/bin/time``, package ``time``). The verification is timed twice:
its call, timed by the child itself, which is what the agent does for
each package in its long-running process, and the whole command, with
the start of Python and every import it makes. Medians are printed.
Nothing is kept: the temporary directory is removed after each size.
Usage::

    python tools/bench/package_throughput.py [--sizes 256M,1G] [--dir DIR]
        [--repeat 3]

The targets (the call at least 90% of OpenSSL SHA-256 throughput, the
whole command at least 60%, peak RSS of the call's child at most 48 MiB
whatever the size) are reported, not asserted.
The CPU time (user and system) per GiB of verification and of OpenSSL
is printed too: it moves far less than wall-clock time on a shared
machine. Beside them, ``of dd`` is verification's share of the fsync'd copy's
throughput: where ``dd`` itself is below 40% of OpenSSL, the disk, not
the verification, decides whether the first target can be met.
"""

import argparse
import datetime
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from trove_upgrade.package_format import build  # noqa: E402
from trove_upgrade.package_format import keys  # noqa: E402

MIB = 1024 * 1024
WHEELS_PER_PACKAGE = 4
TARGET_CALL_RATIO = 0.9
TARGET_COMMAND_RATIO = 0.6
TARGET_RSS_MIB = 48
GNU_TIME = '/usr/bin/time'
COMMAND = os.path.join(os.path.dirname(sys.executable),
                       'trove-upgrade-package')

CHILD = '''
import sys
import time
from trove_upgrade.package_format import keys, verify
package, dest, public, secret = sys.argv[1:]
started = time.perf_counter(), time.process_time()
verify.verify_package(
    package, trusted_keys=keys.load_trusted_keys([public]),
    keyring=keys.load_keyring([secret]), dest_dir=dest,
    expected_version='1.0.0', installed_version='0.9.0',
    max_payload_size=4 * 1024 ** 3)
print(time.perf_counter() - started[0], time.process_time() - started[1])
'''


def parse_size(text):
    units = {'M': MIB, 'G': 1024 * MIB}
    return int(text[:-1]) * units[text[-1].upper()]


def timed_child(argv, **kwargs):
    """Run a command; return (seconds, peak RSS in MiB, CPU seconds, out).

    The peak RSS and the CPU time (user and system) come from GNU time,
    which forks the command from its own small process: the rusage of a
    child forked from this Python process would count the parent's pages
    it carried until exec. ``out`` is what the command printed, when
    ``stdout`` is ``subprocess.PIPE``.
    """
    with tempfile.NamedTemporaryFile('r') as report:
        start = time.perf_counter()
        done = subprocess.run([GNU_TIME, '-f', '%M %U %S', '-o', report.name]
                              + argv, check=True, **kwargs)
        elapsed = time.perf_counter() - start
        rss, user, system = report.read().split()[-3:]
        return (elapsed, int(rss) / 1024.0, float(user) + float(system),
                done.stdout)


def make_wheels(directory, total):
    paths = []
    for number in range(WHEELS_PER_PACKAGE):
        path = os.path.join(directory, 'bench%d-1.0-py3-none-any.whl'
                            % number)
        with open(path, 'wb') as out:
            left = total // WHEELS_PER_PACKAGE
            while left:
                block = os.urandom(min(left, 4 * MIB))
                out.write(block)
                left -= len(block)
        paths.append(path)
    return paths


def bench(size, workdir, repeat):
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        wheel_dir = os.path.join(tmp, 'wheels')
        os.mkdir(wheel_dir)
        wheels = make_wheels(wheel_dir, size)
        signing_key = keys.generate_signing_key()
        secret = keys.generate_encryption_key()
        _, public_path = keys.write_signing_key(
            os.path.join(tmp, 'signing'), signing_key)
        secret_path = keys.write_encryption_key(
            os.path.join(tmp, 'encryption'), secret)
        package = os.path.join(tmp, 'package')
        now = datetime.datetime.now(datetime.timezone.utc)
        manifest = build.build_package(
            wheels, package, version='1.0.0', signing_keys=[signing_key],
            encryption_key=secret, expires=now + datetime.timedelta(days=1))
        shutil.rmtree(wheel_dir)
        payload = manifest.payload.size
        # Same starting point for all: the package in the page cache.
        subprocess.run(['cat', package], stdout=subprocess.DEVNULL,
                       check=True)
        figures = {}
        for _ in range(repeat):
            # Interleaved, so a burst of load elsewhere hits all alike.
            for name, argv, kwargs in (
                    ('openssl', ['openssl', 'dgst', '-sha256', package],
                     dict(stdout=subprocess.DEVNULL)),
                    ('sha256sum', ['sha256sum', package],
                     dict(stdout=subprocess.DEVNULL)),
                    ('cp', ['cp', package, os.path.join(tmp, 'copy')], {}),
                    ('dd', ['dd', 'if=' + package,
                            'of=' + os.path.join(tmp, 'copy'), 'bs=1M',
                            'conv=fsync', 'status=none'], {}),
                    ('verify', [sys.executable, '-c', CHILD, package,
                                os.path.join(tmp, 'extracted'), public_path,
                                secret_path],
                     dict(cwd=REPO, stdout=subprocess.PIPE,
                          env=dict(os.environ, PYTHONPATH=REPO,
                                   PYTHONWARNINGS='ignore'))),
                    ('command', [COMMAND, 'verify', package,
                                 '--trusted-key', public_path,
                                 '--encryption-key', secret_path,
                                 '--version', '1.0.0',
                                 '--installed-version', '0.9.0',
                                 '--max-payload-size', '4G',
                                 '--extract-to',
                                 os.path.join(tmp, 'extracted')],
                     dict(stdout=subprocess.DEVNULL))):
                elapsed, rss, cpu, out = timed_child(argv, **kwargs)
                figures.setdefault(name, []).append((elapsed, rss, cpu))
                if name == 'verify':
                    # The verification's own call, without the start of
                    # Python and the imports, as the agent verifies.
                    seconds, call_cpu = (float(f) for f in out.split())
                    figures.setdefault('call', []).append(
                        (seconds, rss, call_cpu))
                for leftover in ('copy', 'extracted'):
                    shutil.rmtree(os.path.join(tmp, leftover),
                                  ignore_errors=True)
                    if os.path.isfile(os.path.join(tmp, leftover)):
                        os.unlink(os.path.join(tmp, leftover))
    mib = payload / MIB
    return {name: (mib / statistics.median(t for t, _, _ in runs),
                   max(rss for _, rss, _ in runs),
                   statistics.median(cpu for _, _, cpu in runs) * 1024 / mib)
            for name, runs in figures.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--sizes', default='256M,1G',
                        help='comma-separated package sizes (M or G)')
    parser.add_argument('--dir', default=None,
                        help='where to put the temporary files')
    parser.add_argument('--repeat', type=int, default=3,
                        help='runs of each command; medians are printed')
    args = parser.parse_args()
    print('temporary files in %s; medians of %d runs'
          % (args.dir or tempfile.gettempdir(), args.repeat))
    print('%-6s %12s %6s %14s %6s %13s %14s %6s %10s %9s %8s %15s %8s' % (
        'size', 'verify MiB/s', 'ratio', 'command MiB/s', 'ratio',
        'openssl MiB/s', 'dd+fsync MiB/s', 'of dd', 'sha256sum', 'cp MiB/s',
        'RSS MiB', 'CPU s/GiB', 'openssl'))
    met = True
    for text in args.sizes.split(','):
        figures = bench(parse_size(text), args.dir, args.repeat)
        openssl = figures['openssl'][0]
        call_rate, _, call_cpu = figures['call']
        _, rss, _ = figures['verify']
        command_rate, _, command_cpu = figures['command']
        ratio = call_rate / openssl
        command_ratio = command_rate / openssl
        met = (met and ratio >= TARGET_CALL_RATIO
               and command_ratio >= TARGET_COMMAND_RATIO
               and rss <= TARGET_RSS_MIB)
        print('%-6s %12.1f %5.0f%% %14.1f %5.0f%% %13.1f %14.1f %5.0f%% '
              '%10.1f %9.1f %8.1f %7.2f (%5.2f) %8.2f'
              % (text, call_rate, 100 * ratio, command_rate,
                 100 * command_ratio, openssl, figures['dd'][0],
                 100 * call_rate / figures['dd'][0],
                 figures['sha256sum'][0], figures['cp'][0], rss, call_cpu,
                 command_cpu, figures['openssl'][2]))
    print('verify: the call that checks the manifest, decrypts, hashes the '
          'ciphertext, writes the files with fsync and renames them into '
          'place, as the agent makes it; command: the whole '
          'trove-upgrade-package verify process, start and imports '
          'included; cp: writing the same bytes to a new file, without '
          'fsync; dd+fsync: the same with fsync; CPU s/GiB: user and system '
          'CPU per GiB of the call (of the command) and of openssl')
    print('targets (call >= %d%%, command >= %d%% of openssl dgst -sha256, '
          'peak RSS <= %d MiB): %s'
          % (100 * TARGET_CALL_RATIO, 100 * TARGET_COMMAND_RATIO,
             TARGET_RSS_MIB, 'met' if met else 'NOT met'))
    return 0 if met else 1


if __name__ == '__main__':
    sys.exit(main())
