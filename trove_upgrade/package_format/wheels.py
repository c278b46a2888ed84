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

"""Collect the wheels of a release and all its dependencies with real pip.

A guest installs a package with ``pip install --no-index``, so a package
must carry every wheel its release needs. ``pip wheel`` resolves the
requirement specifiers (``trove==26.0.0``) under an optional constraints
file (OpenStack's upper-constraints), downloads the wheels and builds the
ones published only as source. The result is a *wheelhouse*, kept in a
cache directory under a name derived from everything that decides its
content (specifiers, constraints, interpreter), so a second build of the
same release reuses it with no network. A wheelhouse is built in a
temporary directory and renamed into place with a marker written last: an
interrupted build leaves nothing that looks complete.
"""

import configparser
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

from trove_upgrade.common import exception as exceptions

MARKER = '.complete'
WHEEL_SUFFIX = '.whl'
_PIP_LINE_LIMIT = 2000


def _python_version(python):
    """``python``'s X.Y; BuildError when it does not run as a Python.

    A program that is not one (or fails) ended the command as an internal
    error, with that program's output.
    """
    try:
        proc = subprocess.run(
            [python, '-c',
             'import sys; print("%d.%d" % sys.version_info[:2])'],
            stdin=subprocess.DEVNULL, capture_output=True, text=True,
            errors='replace')
    except OSError as e:
        raise exceptions.BuildError('--python %s cannot run: %s'
                                    % (python, e.strerror or e))
    tag = proc.stdout.strip()
    if proc.returncode != 0 or not re.fullmatch(r'\d+\.\d+', tag):
        raise exceptions.BuildError(
            '--python %s is not a Python interpreter (exit status %d: %s)'
            % (python, proc.returncode, exceptions.bounded(
                (proc.stderr.strip().splitlines() or ['no message'])[-1],
                200)))
    return tag


def _key(requirements, constraints_text, python):
    tag = _python_version(python)
    digest = hashlib.sha256(json.dumps(
        [sorted(requirements), constraints_text, tag]).encode())
    return 'py%s-%s' % (tag, digest.hexdigest()[:16])


def wheelhouse_name(requirements, constraints=None, python=None):
    """The cache entry name for a set of specifiers and constraints."""
    text = ''
    if constraints:
        with open(constraints) as f:
            text = f.read()
    label = '-'.join(r.replace('==', '-') for r in sorted(requirements))
    label = ''.join(c if c.isalnum() or c in '.-_' else '_'
                    for c in label)[:60]
    return 'wheelhouse-%s-%s' % (label, _key(requirements, text,
                                             python or sys.executable))


def _report(progress, message):
    if progress is not None:
        progress(message)


def _run_pip(argv, progress):
    """Run pip, streaming one progress line per distribution it handles."""
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
    except OSError as e:
        raise exceptions.BuildError('pip cannot run: %s' % e)
    tail = []
    count = 0
    for line in proc.stdout:
        line = line.rstrip()
        tail = (tail + [line])[-20:]
        if line.startswith(('Collecting ', 'Saved ', 'Building wheel')):
            if line.startswith('Collecting '):
                count += 1
            _report(progress, '  [%3d] %s' % (count, line[:120]))
    status = proc.wait()
    if status != 0:
        raise exceptions.BuildError(
            'pip wheel failed with status %d: %s'
            % (status, '\n'.join(tail)[-_PIP_LINE_LIMIT:]))


def collect(requirements, cache_dir, constraints=None, python=None,
            progress=None, index_args=()):
    """Return the wheel paths of ``requirements`` and all dependencies.

    ``python`` is the interpreter whose pip resolves (and whose version the
    guest runs); ``progress`` a callable taking one line of text;
    ``index_args`` extra pip options such as ``--no-index --find-links D``.
    Raises BuildError when pip fails or resolves nothing.
    """
    if not requirements:
        raise exceptions.BuildError('no requirement specifiers given')
    if constraints and not os.path.isfile(constraints):
        raise exceptions.BuildError('constraints file %s does not exist'
                                    % constraints)
    python = python or sys.executable
    os.makedirs(cache_dir, exist_ok=True)
    name = wheelhouse_name(requirements, constraints, python)
    final = os.path.join(cache_dir, name)
    with open(final + '.lock', 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(os.path.join(final, MARKER)):
            _report(progress, 'reusing the wheelhouse %s' % final)
            return list_wheels(final)
        shutil.rmtree(final, ignore_errors=True)
        _report(progress, 'collecting the wheels of %s and their '
                'dependencies into %s (pip wheel; this can take minutes)'
                % (', '.join(requirements), final))
        work = tempfile.mkdtemp(prefix='.%s.partial-' % name, dir=cache_dir)
        try:
            argv = [python, '-m', 'pip', 'wheel', '--no-input',
                    '--disable-pip-version-check', '--wheel-dir', work]
            argv += list(index_args)
            if constraints:
                argv += ['--constraint', os.path.abspath(constraints)]
            argv += ['--'] + list(requirements)
            _run_pip(argv, progress)
            if not any(n.endswith(WHEEL_SUFFIX) for n in os.listdir(work)):
                raise exceptions.BuildError('pip resolved no wheels')
            with open(os.path.join(work, MARKER), 'w') as f:
                f.write(json.dumps({'requirements': list(requirements)}))
                f.flush()
                os.fsync(f.fileno())
            os.rename(work, final)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
    wheels = list_wheels(final)
    _report(progress, 'collected %d wheels' % len(wheels))
    return wheels


def list_wheels(directory):
    return sorted(os.path.join(directory, n) for n in os.listdir(directory)
                  if n.endswith(WHEEL_SUFFIX))


def console_scripts(wheel_path):
    """The console scripts a wheel declares: {name: 'module:function'}.

    :raises: BuildError when the file is no zip, or its entry points are
        not UTF-8 or not an INI file (a section or a name twice, a line
        outside a section).
    """
    try:
        with zipfile.ZipFile(wheel_path) as zf:
            names = [n for n in zf.namelist()
                     if n.count('/') == 1
                     and n.endswith('.dist-info/entry_points.txt')]
            if not names:
                return {}
            parser = configparser.ConfigParser(delimiters=('=',),
                                               interpolation=None)
            parser.optionxform = str
            parser.read_string(zf.read(names[0]).decode('utf-8'))
    except (zipfile.BadZipFile, configparser.Error,
            UnicodeDecodeError) as exc:
        raise exceptions.BuildError(
            'the entry points of wheel %s cannot be read: %s'
            % (os.path.basename(wheel_path), exc))
    if not parser.has_section('console_scripts'):
        return {}
    return dict(parser.items('console_scripts'))


def check_console_script(wheel_paths, script):
    """Raise BuildError unless one wheel declares console script ``script``."""
    for path in wheel_paths:
        if script in console_scripts(path):
            return os.path.basename(path)
    raise exceptions.BuildError(
        'no wheel declares the console script %r: the guest agent could not '
        'be started from this package' % script)
