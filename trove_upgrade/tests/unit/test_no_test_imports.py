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

"""Nothing outside the tests imports them or what only they install.

The README's demo runs in a virtualenv with trove-upgrade's server and
agent extras (``tools/demo.sh``), without test-requirements.txt: a module
of the product, of the demo or of the testbed they share with the tests
(``tools/testbed``) that imported the test tree or a library only the tests
install would fail there, and nowhere else. Every module is read, imports
inside functions included.
"""

import ast
import configparser
import importlib.metadata
import importlib.util
import os

from packaging import requirements
from packaging import utils as packaging_utils
import testtools

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..',
                                    '..'))
TESTS = os.path.join(REPO, 'trove_upgrade', 'tests')
# Run in the test environment by design, so they may import the tests'
# libraries (database drivers, kombu, testtools), never the test tree:
# the benchmarks and the test runner's own tools.
TEST_ENVIRONMENT_TOOLS = (os.path.join('tools', 'bench') + os.sep,
                          os.path.join('tools', 'stestr-times.py'),
                          os.path.join('tools', 'test-summary.py'))


def python_files():
    """Every Python module outside trove_upgrade/tests, relative to REPO.

    The files that carry the license header (tools/add-license-headers.py).
    """
    spec = importlib.util.spec_from_file_location(
        'add_license_headers',
        os.path.join(REPO, 'tools', 'add-license-headers.py'))
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return [os.path.relpath(path, REPO) for path in tool.python_files(REPO)
            if not path.startswith(TESTS + os.sep)]


def imported_modules(source):
    """The absolute module names ``source`` imports, anywhere in it."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names.add(node.module)
            names.update('%s.%s' % (node.module, alias.name)
                         for alias in node.names)
    return names


def imports_test_tree(names):
    return sorted(name for name in names
                  if name == 'trove_upgrade.tests'
                  or name.startswith('trove_upgrade.tests.'))


def _requirement_names(lines):
    names = set()
    for line in lines:
        line = line.split('#')[0].strip()
        if line:
            names.add(packaging_utils.canonicalize_name(
                requirements.Requirement(line).name))
    return names


def product_distributions():
    """What ``pip install trove-upgrade[server,agent]`` installs."""
    parser = configparser.ConfigParser()
    parser.read(os.path.join(REPO, 'setup.cfg'))
    with open(os.path.join(REPO, 'requirements.txt')) as f:
        lines = f.read().splitlines()
    for extra in ('server', 'agent'):
        lines += parser['extras'][extra].splitlines()
    found = set()
    todo = list(_requirement_names(lines))
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for text in requires:
            req = requirements.Requirement(text)
            if req.marker and not req.marker.evaluate({'extra': ''}):
                continue
            todo.append(packaging_utils.canonicalize_name(req.name))
    return found


def test_only_modules():
    """Top-level modules only test-requirements.txt installs."""
    with open(os.path.join(REPO, 'test-requirements.txt')) as f:
        test_only = (_requirement_names(f.read().splitlines())
                     - product_distributions())
    modules = set()
    for module, dists in importlib.metadata.packages_distributions().items():
        if {packaging_utils.canonicalize_name(d) for d in dists} & test_only:
            modules.add(module)
    return modules


class TestNoTestImports(testtools.TestCase):

    def test_nothing_outside_the_tests_imports_them(self):
        files = python_files()
        self.assertIn(os.path.join('tools', 'demo.py'), files)
        self.assertIn(os.path.join('tools', 'testbed', 'guest.py'), files)
        self.assertNotIn(os.path.join('trove_upgrade', 'tests', 'base.py'),
                         files)
        found = {}
        for path in files:
            with open(os.path.join(REPO, path)) as f:
                bad = imports_test_tree(imported_modules(f.read()))
            if bad:
                found[path] = bad
        self.assertEqual({}, found)

    def test_only_the_tests_import_their_libraries(self):
        test_only = test_only_modules()
        # The libraries the demo once failed on, and the product's own.
        self.assertTrue({'fixtures', 'testtools'} <= test_only, test_only)
        self.assertFalse({'oslo_messaging', 'cryptography'} & test_only)
        found = {}
        for path in python_files():
            if path.startswith(TEST_ENVIRONMENT_TOOLS):
                continue
            with open(os.path.join(REPO, path)) as f:
                tops = {name.split('.')[0]
                        for name in imported_modules(f.read())}
            if tops & test_only:
                found[path] = sorted(tops & test_only)
        self.assertEqual({}, found)

    def test_the_checks_see_an_import_in_a_function(self):
        names = imported_modules(
            'def f():\n    from trove_upgrade.tests import base\n'
            '    import fixtures\n')
        self.assertEqual(['trove_upgrade.tests', 'trove_upgrade.tests.base'],
                         imports_test_tree(names))
        self.assertIn('fixtures', names)
