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

"""trove-upgrade-package: make keys, build, sign, verify and inspect packages.

Exit status: 0 on success, 1 when a package, manifest or key is refused
(the message names the check that failed), 2 for a usage error, 3 when a
file cannot be read or written, 4 for an internal error (a bug: the
package was neither accepted nor refused), 128 + the signal's number when
SIGINT or SIGTERM stopped it (after removing what it had half-written).

The modules that make packages (``packaging.build``, and
``packaging.wheels`` with pip, zip files and subprocesses) are imported by
the commands that make them: ``verify`` and ``inspect`` load what they
check and no more (tests/unit/cmd/test_start_up.py).
"""

import argparse
import datetime
import hashlib
import json
import os
import re
import shlex
import signal
import sys
import tempfile

from trove_upgrade.cmd import short_lived
from trove_upgrade.common import exception as exceptions
from trove_upgrade.package_format import chunked_aead
from trove_upgrade.package_format import keys
from trove_upgrade.package_format import manifest as manifest_mod
from trove_upgrade.package_format import verify

PROG = 'trove-upgrade-package'
EXIT_REFUSED = 1
EXIT_IO_ERROR = 3
EXIT_INTERNAL_ERROR = 4
DEFAULT_EXPIRES_IN_DAYS = 30
DEFAULT_HEALTH_CHECK_TIMEOUT = 60
_SIZE = re.compile(r'(\d+)([KMGT]?)(?:i?B)?', re.IGNORECASE)


def _size(text):
    match = _SIZE.fullmatch(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(
            '%r is not a size like 2G, 512M or 1048576' % text)
    power = ' KMGT'.index(match.group(2).upper() or ' ')
    return int(match.group(1)) * 1024 ** power


def _time(text):
    try:
        return manifest_mod.parse_time(text, ValueError)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc))


def _positive(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError('%r is not a positive integer'
                                         % text)
    return value


def _manifest_path(path):
    """The manifest of a package, or the path itself if it is a manifest."""
    if path.endswith(manifest_mod.MANIFEST_SUFFIX):
        return path
    return path + manifest_mod.MANIFEST_SUFFIX


def _read_manifest(path):
    return manifest_mod.Manifest.from_bytes(verify.read_manifest_file(path))


def do_keygen(args):
    if not (args.signing_key or args.encryption_key):
        raise exceptions.KeyFileError(
            'give --signing-key PATH, --encryption-key PATH or both')
    # Both or neither: an encryption key that could not be written left
    # the signing key pair behind, with a non-zero status.
    written, done = [], []
    try:
        if args.signing_key:
            signing_key = keys.generate_signing_key()
            private, public = keys.write_signing_key(args.signing_key,
                                                     signing_key)
            written += [private, public]
            done.append('signing key %s: private %s, public %s'
                        % (signing_key.key_id, private, public))
        if args.encryption_key:
            key = keys.generate_encryption_key()
            keys.write_encryption_key(args.encryption_key, key)
            done.append('encryption key %s: %s'
                        % (keys.encryption_key_id(key), args.encryption_key))
    except BaseException:
        for path in written:
            os.unlink(path)
        raise
    for line in done:
        print(line)


def _progress(message):
    print(message, file=sys.stderr, flush=True)


def _build_wheels(args):
    """The wheels to package: given ones, then resolved requirements'."""
    from trove_upgrade.package_format import build
    from trove_upgrade.package_format import wheels as wheels_mod
    if not (args.inputs or args.requirement):
        raise exceptions.BuildError(
            'give wheels or directories, --requirement SPEC, or both')
    found = build.collect_wheels(args.inputs) if args.inputs else []
    if args.requirement:
        cache = args.wheel_cache or os.path.join(
            os.path.expanduser('~'), '.cache', 'trove-upgrade-wheels')
        found += wheels_mod.collect(
            args.requirement, cache, constraints=args.constraints,
            python=args.python, progress=_progress)
        # A wheel given by hand replaces the resolved one of the same name.
        by_name = {}
        for path in found:
            by_name.setdefault(os.path.basename(path), path)
        found = build.collect_wheels(sorted(by_name.values()))
    guest_agent = None
    if args.guest_agent_script:
        wheels_mod.check_console_script(found, args.guest_agent_script)
        guest_agent = manifest_mod.GuestAgent(args.guest_agent_script)
    return found, guest_agent


def _health_check_command(text):
    """The argv of ``--health-check``, split like a shell would.

    Unbalanced quotes, or bytes that are not UTF-8 (which no manifest can
    hold), ended the command as an internal error.
    """
    try:
        text.encode('utf-8')
    except UnicodeEncodeError:
        raise exceptions.BuildError(
            'the health-check command %s is not UTF-8 text'
            % exceptions.quoted(text))
    try:
        command = tuple(shlex.split(text))
    except ValueError as exc:
        raise exceptions.BuildError(
            'the health-check command %s cannot be split: %s'
            % (exceptions.quoted(text), exc))
    if not command:
        raise exceptions.BuildError('the health-check command is empty')
    return command


def do_build(args):
    from trove_upgrade.package_format import build
    wheels, guest_agent = _build_wheels(args)
    signing_keys = [keys.load_signing_key(path) for path in args.signing_key]
    encryption_key = keys.load_encryption_key(args.encryption_key)
    now = datetime.datetime.now(datetime.timezone.utc)
    try:
        expires = args.expires or now + datetime.timedelta(
            days=args.expires_in_days)
    except OverflowError:
        raise exceptions.BuildError(
            '--expires-in-days %d ends after the year %d'
            % (args.expires_in_days, datetime.MAXYEAR))
    health_check = None
    if args.health_check:
        command = _health_check_command(args.health_check)
        health_check = manifest_mod.HealthCheck(command,
                                                args.health_check_timeout)
    manifest = build.build_package(
        wheels, args.output, version=args.version, signing_keys=signing_keys,
        encryption_key=encryption_key, expires=expires, created=now,
        min_upgrade_from=args.min_upgrade_from, health_check=health_check,
        chunk_size=args.chunk_size, guest_agent=guest_agent,
        package=args.package_name)
    print('built %s (%d bytes, %d files) and %s%s, package %s version %s, '
          'expires %s, manifest sha256 %s'
          % (args.output, manifest.payload.size, len(manifest.files),
             args.output, manifest_mod.MANIFEST_SUFFIX,
             manifest.package or '(unnamed)', manifest.version,
             manifest_mod.format_time(manifest.expires),
             hashlib.sha256(manifest.to_bytes()).hexdigest()))


def do_sign(args):
    from trove_upgrade.package_format import build
    path = _manifest_path(args.manifest)
    manifest = _read_manifest(path)
    for key_path in args.signing_key:
        signing_key = keys.load_signing_key(key_path)
        signed = manifest.with_signature(signing_key)
        if signed is manifest:
            print('%s is already signed by %s' % (path, signing_key.key_id))
        else:
            print('signed %s with %s' % (path, signing_key.key_id))
        manifest = signed
    build.write_manifest(path, manifest)


def do_verify(args):
    manifest_path = args.manifest or _manifest_path(args.package)
    trusted = keys.load_trusted_keys(args.trusted_key, args.threshold)
    keyring = keys.load_keyring(args.encryption_key)
    manifest_bytes = verify.read_manifest_file(manifest_path)
    expected = (args.version
                or manifest_mod.Manifest.from_bytes(manifest_bytes).version)
    manifest = verify.verify_manifest(
        manifest_bytes, trusted, expected_version=expected,
        installed_version=args.installed_version,
        allow_downgrade=args.allow_downgrade,
        max_payload_size=args.max_payload_size,
        expected_sha256=args.expect_manifest_sha256,
        expected_package=args.expect_package)
    if args.extract_to is not None:
        files = verify.verify_and_extract(
            args.package, manifest, keyring, args.extract_to,
            max_payload_size=args.max_payload_size)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            files = verify.verify_and_extract(
                args.package, manifest, keyring,
                os.path.join(tmp, 'files'),
                max_payload_size=args.max_payload_size)
            files = [os.path.basename(path) for path in files]
    signers = sorted(s.key_id for s in manifest.signatures
                     if s.key_id in trusted)
    print('OK: %s is version %s, %d file(s) verified, signed by %s'
          % (args.package, manifest.version, len(files), ', '.join(signers)))
    for path in files:
        print('  %s' % path)


def _describe(manifest, path, manifest_sha256):
    now = datetime.datetime.now(datetime.timezone.utc)
    health = manifest.health_check
    lines = [
        'manifest:         %s' % path,
        'manifest sha256:  %s' % manifest_sha256,
        'format version:   %d' % manifest.format_version,
        'package:          %s' % (manifest.package or '-'),
        'version:          %s' % manifest.version,
        'created:          %s' % manifest_mod.format_time(manifest.created),
        'expires:          %s%s' % (
            manifest_mod.format_time(manifest.expires),
            ' (EXPIRED)' if manifest.expires <= now else ''),
        'min upgrade from: %s' % (manifest.min_upgrade_from or '-'),
        'guest agent:      %s' % (
            manifest.guest_agent.console_script
            if manifest.guest_agent else '-'),
        'health check:     %s' % (
            '%s (timeout %d s)' % (shlex.join(health.command),
                                   health.timeout) if health else '-'),
        'payload:          %d bytes, sha256 %s' % (manifest.payload.size,
                                                   manifest.payload.sha256),
        'encryption:       %s, key id %s, chunk size %d' % (
            manifest.encryption.algorithm, manifest.encryption.key_id,
            manifest.encryption.chunk_size),
        'files:',
    ]
    lines += ['  %s  %d bytes  sha256 %s' % (f.name, f.size, f.sha256)
              for f in manifest.files]
    lines.append('signatures (not verified here; use "verify"):')
    lines += ['  %s' % s.key_id for s in manifest.signatures] or ['  none']
    return '\n'.join(lines)


def do_inspect(args):
    path = _manifest_path(args.path)
    data = verify.read_manifest_file(path)
    manifest = manifest_mod.Manifest.from_bytes(data)
    if args.format == 'json':
        print(json.dumps({'signed': manifest.signed_dict(),
                          'signatures': [{'key_id': s.key_id, 'sig': s.sig}
                                         for s in manifest.signatures]},
                         indent=2, sort_keys=True))
    else:
        print(_describe(manifest, path, hashlib.sha256(data).hexdigest()))


class _Parser(argparse.ArgumentParser):
    """argparse's parser, its usage errors cut to a bounded length.

    They quote the argument refused, however long: a 128 KiB one came
    back whole on stderr. The sub-commands' parsers are of this class too.
    """

    def error(self, message):
        super().error(exceptions.bounded(message))


def build_parser():
    parser = _Parser(
        prog=PROG, description='Make keys for, build, sign, verify and '
        'inspect trove-upgrade packages.')
    commands = parser.add_subparsers(dest='command', metavar='COMMAND',
                                     required=True)

    keygen = commands.add_parser(
        'keygen', help='generate a signing key pair and/or an encryption key')
    keygen.add_argument('--signing-key', metavar='PATH',
                        help='write the private signing key here and the '
                        'public key to PATH.pub')
    keygen.add_argument('--encryption-key', metavar='PATH',
                        help='write a new AES-256 encryption key here')
    keygen.set_defaults(func=do_keygen)

    build_cmd = commands.add_parser(
        'build', help='build a package and its signed manifest from wheels')
    build_cmd.add_argument('inputs', nargs='*', metavar='WHEEL_OR_DIR')
    build_cmd.add_argument('--requirement', '-r', action='append',
                           default=[], metavar='SPEC',
                           help='requirement specifier, e.g. trove==26.0.0; '
                           'its wheels and all its dependencies\' are '
                           'collected with pip (repeatable)')
    build_cmd.add_argument('--constraints', '-c', metavar='FILE',
                           help='pip constraints file for --requirement, '
                           'e.g. OpenStack\'s upper-constraints.txt')
    build_cmd.add_argument('--wheel-cache', metavar='DIR',
                           help='where collected wheels are kept for reuse, '
                           'default ~/.cache/trove-upgrade-wheels')
    build_cmd.add_argument('--python', metavar='PATH',
                           help='interpreter whose pip resolves '
                           '--requirement; use the guest\'s Python version '
                           '(default: this one)')
    build_cmd.add_argument('--guest-agent-script', metavar='NAME',
                           help='console script that is the guest agent, '
                           'e.g. trove-guestagent; recorded in the signed '
                           'manifest and checked against the wheels')
    build_cmd.add_argument('--package-name', metavar='NAME',
                           help='package name signed in the manifest, '
                           'which upgrades may require, e.g. '
                           'trove-guestagent, or trove-upgrade for the '
                           'upgrade agent itself; agents older than RPC '
                           'API 1.2 cannot read a named package (default: '
                           'none)')
    build_cmd.add_argument('--version', required=True,
                           help='package version, e.g. v1.0.1')
    build_cmd.add_argument('--output', '-o', required=True, metavar='PATH',
                           help='package path; the manifest goes to '
                           'PATH.manifest')
    build_cmd.add_argument('--signing-key', action='append', required=True,
                           metavar='PATH', help='private signing key file '
                           '(repeat to sign with several keys)')
    build_cmd.add_argument('--encryption-key', required=True, metavar='PATH')
    expiry = build_cmd.add_mutually_exclusive_group()
    expiry.add_argument('--expires-in-days', type=_positive,
                        default=DEFAULT_EXPIRES_IN_DAYS, metavar='DAYS',
                        help='default %(default)s')
    expiry.add_argument('--expires', type=_time, metavar='TIME',
                        help='UTC expiry time, e.g. 2027-01-31T00:00:00Z')
    build_cmd.add_argument('--min-upgrade-from', metavar='VERSION',
                           help='refuse to install over older versions')
    build_cmd.add_argument('--health-check', metavar='COMMAND',
                           help='command the agent runs after restarting '
                           '(split like a shell would, run without one)')
    build_cmd.add_argument('--health-check-timeout', type=_positive,
                           default=DEFAULT_HEALTH_CHECK_TIMEOUT,
                           metavar='SECONDS', help='default %(default)s')
    build_cmd.add_argument('--chunk-size', type=_size,
                           default=chunked_aead.DEFAULT_CHUNK_SIZE,
                           help='encryption chunk size, default 64K')
    build_cmd.set_defaults(func=do_build)

    sign = commands.add_parser(
        'sign', help='add signatures to a manifest (offline threshold '
        'signing)')
    sign.add_argument('manifest', metavar='MANIFEST_OR_PACKAGE')
    sign.add_argument('--signing-key', action='append', required=True,
                      metavar='PATH')
    sign.set_defaults(func=do_sign)

    verify_cmd = commands.add_parser(
        'verify', help='verify a package the way the agent does')
    verify_cmd.add_argument('package')
    verify_cmd.add_argument('--manifest', metavar='PATH',
                            help='default PACKAGE.manifest')
    verify_cmd.add_argument('--trusted-key', action='append', required=True,
                            metavar='PATH', help='public signing key file '
                            '(repeatable)')
    verify_cmd.add_argument('--threshold', type=_positive, default=1)
    verify_cmd.add_argument('--encryption-key', action='append',
                            required=True, metavar='PATH',
                            help='encryption key file (repeatable)')
    verify_cmd.add_argument('--version', metavar='VERSION',
                            help='require this version')
    verify_cmd.add_argument('--installed-version', metavar='VERSION',
                            help='check rollback and upgrade path against '
                            'this installed version')
    verify_cmd.add_argument('--allow-downgrade', action='store_true')
    verify_cmd.add_argument('--expect-manifest-sha256', metavar='HEX',
                            help='require the manifest file to have this '
                            'SHA-256, as an upgrade that names it does')
    verify_cmd.add_argument('--expect-package', metavar='NAME',
                            help='require the manifest to sign this '
                            'package name, as an upgrade that names it '
                            'does')
    verify_cmd.add_argument('--max-payload-size', type=_size,
                            default=verify.DEFAULT_MAX_PAYLOAD_SIZE,
                            metavar='SIZE', help='default 2G')
    verify_cmd.add_argument('--extract-to', metavar='DIR',
                            help='keep the verified wheels in this new '
                            'directory')
    verify_cmd.set_defaults(func=do_verify)

    inspect = commands.add_parser('inspect', help='show a manifest')
    inspect.add_argument('path', metavar='MANIFEST_OR_PACKAGE')
    inspect.add_argument('--format', choices=('text', 'json'),
                         default='text')
    inspect.set_defaults(func=do_inspect)
    return parser


class _Stopped(BaseException):
    """SIGTERM, raised where the command is so that its clean-ups run.

    Killed by the signal's default action, a build left its partial
    payload behind, and one stopped between its two renames a payload
    without its manifest.
    """

    def __init__(self, signum, frame=None):
        super().__init__(signum)
        self.signum = signum


def _raise_stopped(signum, frame):
    raise _Stopped(signum)


@short_lived.command(PROG)
def main(argv=None):
    args = build_parser().parse_args(argv)
    previous = signal.signal(signal.SIGTERM, _raise_stopped)
    try:
        return _run(args)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run(args):
    try:
        args.func(args)
    except (KeyboardInterrupt, _Stopped) as exc:
        signum = getattr(exc, 'signum', signal.SIGINT)
        print('%s: stopped by %s; nothing was left half-written'
              % (PROG, signal.Signals(signum).name), file=sys.stderr)
        return 128 + signum
    except exceptions.PackageError as exc:
        print('%s: error: %s: %s' % (PROG, type(exc).__name__, exc),
              file=sys.stderr)
        return EXIT_REFUSED
    except BrokenPipeError:
        # stdout's reader went away: short_lived ends quietly.
        raise
    except OSError as exc:
        print('%s: error: %s' % (PROG, exceptions.bounded(exc)),
              file=sys.stderr)
        return EXIT_IO_ERROR
    except Exception as exc:
        print('%s: internal error (please report it): %s: %s'
              % (PROG, type(exc).__name__, exceptions.bounded(exc)),
              file=sys.stderr)
        return EXIT_INTERNAL_ERROR
    return 0


if __name__ == '__main__':
    sys.exit(main())
