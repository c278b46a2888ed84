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

"""Each package imports only the layers below it, and guests load no SQL.

The rules are checked twice: by reading every module's imports with
``ast`` (every import, at any depth, of every module outside the tests and
the migrations), and by importing the guests' entry points in a fresh
interpreter, since this test process has imported everything already.
"""

import ast
import json
import os
import subprocess
import sys

import trove_upgrade
from trove_upgrade.tests import base

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(
    trove_upgrade.__file__)))

# Package (or root module) -> the packages of ours it may import. The
# root's leaves (hosted_conf, strategy_plugins, version) import nothing of
# ours, and hosted_conf is imported before trove_upgrade.conf.
ALLOWED = {
    'hosted_conf': set(),
    'strategy_plugins': set(),
    'version': set(),
    'conf': {'hosted_conf', 'strategy_plugins'},
    'common': {'conf', 'hosted_conf'},
    'package_format': {'common', 'conf'},
    'db': {'common', 'conf'},
    'services': {'db', 'common', 'conf', 'package_format'},
    'conductor': {'services', 'db', 'common', 'conf', 'package_format'},
    'agent': {'common', 'conf', 'package_format', 'strategy_plugins',
              'version'},
    'osc': {'common', 'strategy_plugins', 'version'},
}

# (importing module, imported package or module): why it is allowed.
EXCEPTIONS = {
    ('trove_upgrade.conf.opts', 'trove_upgrade.common.rpc'):
        "the generator's entry point sets oslo.messaging's defaults, "
        'importing them only when called',
    ('trove_upgrade.services.packages', 'trove_upgrade.agent.strategies'):
        "the registry fetches a manifest with the agents' own download "
        'strategy, through their loader',
    ('trove_upgrade.services.packages',
     'trove_upgrade.agent.strategies.exception'):
        "the registry fetches a manifest with the agents' own download "
        'strategy, through their loader',
}

# Top-level packages (and their submodules) a guest or a CLI must not load.
_SERVER_ONLY = ('trove_upgrade.db', 'sqlalchemy', 'oslo_db', 'alembic')

_PROBE = '''
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps(sorted(sys.modules)))
'''


def _modules():
    """Every module of ours but the tests and migrations: name -> path."""
    found = {}
    package_dir = os.path.join(ROOT, 'trove_upgrade')
    for directory, dirs, files in os.walk(package_dir):
        dirs[:] = sorted(d for d in dirs
                         if d not in ('tests', 'migrations', '__pycache__'))
        for name in files:
            if name.endswith('.py'):
                path = os.path.join(directory, name)
                parts = os.path.relpath(path[:-3], ROOT).split(os.sep)
                if parts[-1] == '__init__':
                    parts.pop()
                if len(parts) > 1:
                    found['.'.join(parts)] = path
    return found


def _imports(path):
    """The names of ours that the module at ``path`` imports, anywhere."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.update('%s.%s' % (node.module, alias.name)
                         for alias in node.names)
    return {name for name in names if name.startswith('trove_upgrade.')}


def _package(name):
    """``trove_upgrade.db.agents`` -> ``db``; a root module is its own."""
    return name.split('.')[1]


def _allowed(importer, imported):
    return any(imported == name or imported.startswith(name + '.')
               for (module, name) in EXCEPTIONS if module == importer)


def _edges():
    """Package -> packages it imports, and the imports ``ALLOWED`` refuses.

    The imports of ``EXCEPTIONS`` are neither.
    """
    graph, broken = {}, []
    for module, path in sorted(_modules().items()):
        source = _package(module)
        for imported in sorted(_imports(path)):
            target = _package(imported)
            if target == source or _allowed(module, imported):
                continue
            graph.setdefault(source, set()).add(target)
            if source in ALLOWED and target not in ALLOWED[source]:
                broken.append('%s imports %s' % (module, imported))
    return graph, broken


def _cycle(graph):
    """A list of packages that import each other in a circle, or None."""
    done, path = set(), []

    def visit(node):
        if node in path:
            return path[path.index(node):] + [node]
        if node in done:
            return None
        path.append(node)
        for successor in sorted(graph.get(node, ())):
            found = visit(successor)
            if found:
                return found
        path.pop()
        done.add(node)
        return None

    for node in sorted(graph):
        found = visit(node)
        if found:
            return found
    return None


def _loaded(*modules):
    """Every module loaded by importing ``modules`` in a new interpreter."""
    out = subprocess.run([sys.executable, '-c', _PROBE, *modules],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def _server_only(loaded):
    return sorted(name for name in loaded
                  if any(name == top or name.startswith(top + '.')
                         for top in _SERVER_ONLY))


class TestLayers(base.TestCase):

    def test_each_package_imports_only_the_layers_it_may(self):
        self.assertEqual([], _edges()[1])

    def test_no_packages_import_each_other_in_a_circle(self):
        self.assertIsNone(_cycle(_edges()[0]))

    def test_every_exception_is_still_needed(self):
        # An exception no import uses any more is dropped, not kept.
        modules = _modules()
        for importer, imported in EXCEPTIONS:
            self.assertIn(imported, _imports(modules[importer]))

    def test_the_check_sees_a_broken_rule_and_a_circle(self):
        # Were the reader blind, the tests above would pass whatever
        # the tree imports.
        self.assertIn('trove_upgrade.services.upgrades',
                      _imports(_modules()['trove_upgrade.conductor.manager']))
        self.assertEqual(['a', 'b', 'a'], _cycle({'a': {'b'}, 'b': {'a'}}))
        self.assertIsNone(_cycle({'a': {'b'}, 'b': set()}))


class TestImportBoundaries(base.TestCase):

    def assertNoServerCode(self, *modules):
        found = _server_only(_loaded(*modules))
        self.assertEqual([], found, 'importing %s loads %s' % (
            ', '.join(modules), ', '.join(found[:10])))

    def test_agent_service_loads_no_database_code(self):
        # cmd.agent first: it picks oslo.service's backend, as the
        # console script does.
        self.assertNoServerCode('trove_upgrade.cmd.agent',
                                'trove_upgrade.agent.service')

    def test_cli_plugin_loads_no_database_code(self):
        self.assertNoServerCode('trove_upgrade.osc.plugin',
                                'trove_upgrade.osc.v1.upgrades',
                                'trove_upgrade.osc.v1.agents',
                                'trove_upgrade.osc.v1.rollouts')

    def test_untrusted_child_loads_no_control_plane_or_bus_code(self):
        # What the child imports (its main's imports included): it reads
        # untrusted bytes, so it loads no database, RPC or messaging code.
        loaded = _loaded('trove_upgrade.agent.untrusted',
                         'trove_upgrade.agent.strategies',
                         'trove_upgrade.agent.verifier', 'trove_upgrade.conf',
                         'trove_upgrade.version')
        self.assertEqual([], _server_only(loaded))
        self.assertEqual([], sorted(
            name for name in loaded
            if name.split('.')[0] == 'oslo_messaging'
            or name in ('trove_upgrade.common.rpc',
                        'trove_upgrade.common.rpc_interface',
                        'trove_upgrade.agent.journal')))

    def test_common_and_package_format_load_no_database_code(self):
        # threading_backend first, as every console script imports it.
        self.assertNoServerCode('trove_upgrade.common.threading_backend',
                                *sorted(name for name in _modules()
                                        if _package(name) in (
                                            'common', 'package_format')))

    def test_probe_sees_the_control_planes_client_load_the_database(self):
        # The agent's RPC client reads the database: were the probe blind
        # to it, the tests above would pass whatever the agent imports.
        found = _server_only(_loaded('trove_upgrade.services.agent_rpcapi'))
        self.assertIn('trove_upgrade.db', found)
        self.assertIn('sqlalchemy', found)
