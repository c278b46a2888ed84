"""Throughput and peak memory of package verification, next to sha256sum.

For each size, builds a package from generated wheel-like files (random
bytes, as incompressible as the zip files wheels are) in a temporary
directory, then, in the same run and on the same (page-cached) file:

* runs ``sha256sum`` over the package,
* copies it with ``cp`` (the cost of writing as many bytes, which
  extraction also pays), and
* runs the agent's verification (manifest checks, streaming decrypt and
  hash, safe unpack with fsync, rename into place) in a child process,

timing each child and measuring its peak RSS with GNU time
(``/usr/bin/time``, package ``time``). Nothing is
kept: the temporary directory is removed after each size. Usage::

    python tools/bench/package_throughput.py [--sizes 256M,1G] [--dir DIR]

The targets (verification at least 60% of sha256sum's throughput, peak RSS
under 64 MiB whatever the size) are reported, not asserted.
"""

import argparse
import datetime
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from trove_upgrade.packaging import build  # noqa: E402
from trove_upgrade.packaging import keys  # noqa: E402

MIB = 1024 * 1024
WHEELS_PER_PACKAGE = 4
TARGET_RATIO = 0.6
TARGET_RSS_MIB = 64
GNU_TIME = '/usr/bin/time'

CHILD = '''
import sys
from trove_upgrade.packaging import keys, verify
package, dest, public, secret = sys.argv[1:]
verify.verify_package(
    package, trusted_keys=keys.load_trusted_keys([public]),
    keyring=keys.load_keyring([secret]), dest_dir=dest,
    expected_version='1.0.0', installed_version='0.9.0',
    max_payload_size=4 * 1024 ** 3)
'''


def parse_size(text):
    units = {'M': MIB, 'G': 1024 * MIB}
    return int(text[:-1]) * units[text[-1].upper()]


def timed_child(argv, **kwargs):
    """Run a command; return (seconds, its peak RSS in MiB).

    The peak RSS comes from GNU time, which forks the command from its own
    small process: the rusage of a child forked from this Python process
    would count the parent's pages it carried until exec.
    """
    with tempfile.NamedTemporaryFile('r') as report:
        start = time.perf_counter()
        subprocess.run([GNU_TIME, '-f', '%M', '-o', report.name] + argv,
                       check=True, **kwargs)
        elapsed = time.perf_counter() - start
        return elapsed, int(report.read().split()[-1]) / 1024.0


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


def bench(size, workdir):
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
        # Same starting point for both: the package in the page cache.
        subprocess.run(['cat', package], stdout=subprocess.DEVNULL,
                       check=True)
        sha_time, sha_rss = timed_child(['sha256sum', package],
                                        stdout=subprocess.DEVNULL)
        copy = os.path.join(tmp, 'copy')
        cp_time, _ = timed_child(['cp', package, copy])
        os.unlink(copy)
        verify_time, verify_rss = timed_child(
            [sys.executable, '-c', CHILD, package,
             os.path.join(tmp, 'extracted'), public_path, secret_path],
            cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO,
                               PYTHONWARNINGS='ignore'))
    rate = payload / MIB
    return (rate / verify_time, verify_rss, rate / sha_time, sha_rss,
            rate / cp_time)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--sizes', default='256M,1G',
                        help='comma-separated package sizes (M or G)')
    parser.add_argument('--dir', default=None,
                        help='where to put the temporary files')
    args = parser.parse_args()
    print('temporary files in %s' % (args.dir or tempfile.gettempdir()))
    print('%-6s %13s %13s %7s %9s %15s %15s' % (
        'size', 'verify MiB/s', 'sha256sum', 'ratio', 'cp MiB/s',
        'verify RSS MiB', 'sha256sum RSS'))
    met = True
    for text in args.sizes.split(','):
        verify_rate, verify_rss, sha_rate, sha_rss, cp_rate = bench(
            parse_size(text), args.dir)
        ratio = verify_rate / sha_rate
        met = met and ratio >= TARGET_RATIO and verify_rss < TARGET_RSS_MIB
        print('%-6s %13.1f %13.1f %6.0f%% %9.1f %15.1f %15.1f' % (
            text, verify_rate, sha_rate, 100 * ratio, cp_rate, verify_rss,
            sha_rss))
    print('verify: manifest checks, streaming decrypt, both hashes, safe '
          'unpack, fsync, rename; cp: writing the same bytes to a new file')
    print('targets (>= %d%% of sha256sum, RSS < %d MiB): %s' % (
        100 * TARGET_RATIO, TARGET_RSS_MIB, 'met' if met else 'NOT met'))
    return 0 if met else 1


if __name__ == '__main__':
    sys.exit(main())
