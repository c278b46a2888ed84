#!/usr/bin/env python3
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

"""Give every Python file of the project the Apache-2.0 license header.

Run from anywhere: ``tools/add-license-headers.py``. It edits the files
that lack the header in place and prints their names; a file that has it
is left byte for byte as it is, so running it twice changes nothing. An
empty file (an empty ``__init__.py``) stays empty: hacking's H104 wants
files with nothing but comments to be empty. A ``#!`` line stays first.

``trove_upgrade/tests/unit/test_license_headers.py`` checks the result.
"""

import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))

# The header of OpenStack's Python files, as in placement and nova.
HEADER = '''\
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
'''

# What carries the header, relative to ROOT: directories are walked (the
# documentation trees hold their Sphinx conf.py).
COVERED = ('setup.py', 'tools', 'trove_upgrade', 'doc', 'api-ref',
           'releasenotes')
_SKIPPED_DIRS = frozenset(['__pycache__', '.venv', '.tox', 'build', 'dist'])


def python_files(root=ROOT):
    """Every ``.py`` file of COVERED under ``root``, sorted."""
    found = []
    for covered in COVERED:
        path = os.path.join(root, covered)
        if os.path.isfile(path):
            found.append(path)
            continue
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames[:] = [d for d in dirnames if d not in _SKIPPED_DIRS]
            found.extend(os.path.join(dirpath, name)
                         for name in filenames if name.endswith('.py'))
    return sorted(found)


def split_shebang(text):
    """(the ``#!`` line or '', the rest of ``text``)."""
    if text.startswith('#!'):
        first, _, rest = text.partition('\n')
        return first + '\n', rest
    return '', text


def has_header(text):
    """Whether ``text`` is empty or starts with HEADER (after ``#!``)."""
    if not text:
        return True
    return split_shebang(text)[1].startswith(HEADER)


def with_header(text):
    """``text`` with HEADER after its ``#!`` line, then a blank line."""
    if has_header(text):
        return text
    shebang, rest = split_shebang(text)
    return shebang + HEADER + '\n' + rest.lstrip('\n')


def main(root=ROOT):
    for path in python_files(root):
        with open(path, encoding='utf-8') as f:
            text = f.read()
        new = with_header(text)
        if new == text:
            continue
        tmp = path + '.license-tmp'
        with open(tmp, 'w', encoding='utf-8') as f:
            f.write(new)
        os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        os.replace(tmp, path)
        print(os.path.relpath(path, root))
    return 0


if __name__ == '__main__':
    sys.exit(main())
