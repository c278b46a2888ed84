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

"""A directory tree as data, to check that a change left it as it was."""

import os
import stat


def snapshot(top):
    """Every entry under ``top``: type, mode, bytes or symlink target.

    ``top`` itself is replaced by ``@`` in targets and contents, so two
    trees in different temporary directories compare equal.
    """
    tree = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                entry = ('link', os.readlink(path).replace(top, '@'))
            elif stat.S_ISREG(st.st_mode):
                with open(path, 'rb') as f:
                    entry = ('file', mode,
                             f.read().replace(top.encode(), b'@'))
            else:
                entry = (stat.S_IFMT(st.st_mode), mode)
            tree[os.path.relpath(path, top)] = entry
    return tree


def write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write(text)
    os.chmod(path, mode)
