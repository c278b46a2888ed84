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

"""Every Python file carries the Apache-2.0 header, as OpenStack requires.

The header and the list of files come from ``tools/add-license-headers.py``,
the tool that adds the header where it is missing: when this test fails,
run that tool.
"""

import importlib.util
import io
import os

import fixtures
import testtools

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..',
                                    '..'))
TOOL = os.path.join(REPO, 'tools', 'add-license-headers.py')


def _load_tool():
    spec = importlib.util.spec_from_file_location('add_license_headers',
                                                  TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tool = _load_tool()


class TestLicenseHeaders(testtools.TestCase):

    def test_every_python_file_has_the_header(self):
        files = tool.python_files()
        self.assertIn(os.path.join(REPO, 'setup.py'), files)
        self.assertIn(os.path.abspath(__file__), files)
        self.assertIn(TOOL, files)
        missing = []
        for path in files:
            with open(path, encoding='utf-8') as f:
                if not tool.has_header(f.read()):
                    missing.append(os.path.relpath(path, REPO))
        self.assertEqual([], missing,
                         'Run tools/add-license-headers.py to add the '
                         'Apache-2.0 header to these files.')

    def test_the_header_is_the_apache_2_header(self):
        self.assertIn('Licensed under the Apache License, Version 2.0',
                      tool.HEADER)
        self.assertIn('http://www.apache.org/licenses/LICENSE-2.0',
                      tool.HEADER)
        with open(os.path.join(REPO, 'LICENSE')) as f:
            self.assertIn('Apache License\n', f.read(200))

    def test_the_tool_adds_it_once_keeping_shebang_and_empty_files(self):
        root = self.useFixture(fixtures.TempDir()).path
        os.makedirs(os.path.join(root, 'trove_upgrade'))
        os.makedirs(os.path.join(root, 'tools'))
        sources = {
            'setup.py': 'import setuptools\n',
            'trove_upgrade/__init__.py': '',
            'trove_upgrade/mod.py': '\n"""Doc."""\n',
            'tools/run.py': '#!/usr/bin/env python3\n"""Doc."""\n',
        }
        for name, text in sources.items():
            with open(os.path.join(root, name), 'w') as f:
                f.write(text)
        os.chmod(os.path.join(root, 'tools/run.py'), 0o755)
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', io.StringIO()))

        for _ in range(2):
            tool.main(root)
            contents = {}
            for name in sources:
                with open(os.path.join(root, name)) as f:
                    contents[name] = f.read()
            self.assertEqual({
                'setup.py': tool.HEADER + '\nimport setuptools\n',
                'trove_upgrade/__init__.py': '',
                'trove_upgrade/mod.py': tool.HEADER + '\n"""Doc."""\n',
                'tools/run.py': '#!/usr/bin/env python3\n' + tool.HEADER
                                + '\n"""Doc."""\n',
            }, contents)
        self.assertEqual(0o755, os.stat(os.path.join(root, 'tools/run.py'))
                         .st_mode & 0o777)
