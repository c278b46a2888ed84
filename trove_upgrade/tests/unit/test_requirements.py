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

"""Each install declares exactly what its processes import.

``pip install trove-upgrade`` is the openstack CLI plugin
(requirements.txt); the extras of setup.cfg add the control plane
(``[server]``) and the guest-side agent (``[agent]``). For each, a clean
interpreter imports that install's entry points; every distribution that a
loaded trove-upgrade module imports must be declared for it (but for an
import guarded by ``except ImportError``, which is optional), and every
one declared must be imported. The tests run with everything installed, so
without this an import that an install lacks would only show on a real
deployment.
"""

import configparser
import json
import os
import re
import subprocess
import sys

from packaging import requirements
import testtools

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..',
                                    '..'))

# Modules each install serves, and the entry-point groups whose plugins it
# loads.
ROLES = {
    'cli': {'modules': ['trove_upgrade.osc.plugin',
                        'trove_upgrade.osc.client'],
            'groups': ['openstack.guest_upgrade.v1']},
    'server': {'modules': ['trove_upgrade.cmd.api',
                           'trove_upgrade.cmd.conductor',
                           'trove_upgrade.cmd.manage',
                           'trove_upgrade.cmd.status',
                           'trove_upgrade.cmd.package',
                           'trove_upgrade.wsgi'],
               # The package registry fetches manifests with them.
               'groups': ['trove_upgrade.strategies']},
    'agent': {'modules': ['trove_upgrade.cmd.agent',
                          'trove_upgrade.cmd.package'],
              'groups': ['trove_upgrade.strategies']},
}
# Declared for packaging itself (pbr builds the package), not imported.
NOT_IMPORTED = {'pbr'}
# Declared, and imported only under "except ImportError": the agent builds
# its installs with pip where uv is missing (agent/install.py).
OPTIONAL = {'uv'}
# What a workstation with only the CLI must never load.
SERVER_MODULES = {'alembic', 'keystonemiddleware', 'oslo_db',
                  'oslo_messaging', 'oslo_service', 'sqlalchemy'}

# Run in a clean interpreter: the distributions that the loaded modules
# of trove_upgrade import, by name, with the modules importing each.
_PROBE = '''
import ast, importlib, importlib.metadata as md, json, sys
role = json.loads(sys.argv[1])
for name in role['modules']:
    importlib.import_module(name)
for group in role['groups']:
    for entry_point in md.entry_points(group=group):
        entry_point.load()
distributions = md.packages_distributions()
used = {}
for name, module in sorted(sys.modules.items()):
    path = getattr(module, '__file__', None)
    if not name.startswith('trove_upgrade') or not path:
        continue
    with open(path, encoding='utf-8') as f:
        tree = ast.parse(f.read())
    # "try: import x / except ImportError:" is an optional dependency.
    optional = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
                isinstance(h.type, ast.Name) and h.type.id in (
                    'ImportError', 'ModuleNotFoundError')
                for h in node.handlers):
            optional.update(id(n) for stmt in node.body
                            for n in ast.walk(stmt))
    for node in ast.walk(tree):
        if id(node) in optional:
            continue
        if isinstance(node, ast.Import):
            imported = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            imported = [node.module]
        else:
            continue
        for top in {i.split('.')[0] for i in imported}:
            for dist in distributions.get(top, []):
                used.setdefault(dist, set()).add(name)
print(json.dumps({
    'used': {dist: sorted(names) for dist, names in used.items()},
    'loaded': sorted({name.split('.')[0] for name in sys.modules}),
}))
'''


def canonical(name):
    return re.sub(r'[-_.]+', '-', name).lower()


def _names(lines):
    found = set()
    for line in lines:
        line = line.split('#')[0].strip()
        if line:
            found.add(canonical(requirements.Requirement(line).name))
    return found


def declared():
    """{'cli': names, 'server': names, 'agent': names}, base included."""
    with open(os.path.join(REPO, 'requirements.txt')) as f:
        base = _names(f)
    parser = configparser.ConfigParser()
    parser.read(os.path.join(REPO, 'setup.cfg'))
    extras = {name: _names(value.splitlines())
              for name, value in parser['extras'].items()}
    return {'cli': base, 'server': base | extras['server'],
            'agent': base | extras['agent'], 'base': base,
            'extras': extras}


def probe(role):
    result = subprocess.run(
        [sys.executable, '-c', _PROBE, json.dumps(ROLES[role])],
        capture_output=True, text=True, timeout=300, check=False)
    if result.returncode:
        raise AssertionError('importing the %s failed:\n%s'
                             % (role, result.stderr))
    found = json.loads(result.stdout)
    found['used'] = {canonical(name): modules
                     for name, modules in found['used'].items()
                     if canonical(name) != 'trove-upgrade'}
    return found


class TestRequirements(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.declared = declared()

    def assertDeclaresWhatIsUsed(self, role, own):
        found = probe(role)
        used = found['used']
        missing = {name: used[name] for name in set(used)
                   - self.declared[role]}
        self.assertEqual({}, missing, 'imported by the %s but not declared '
                                      'for it' % role)
        unused = own - set(used) - NOT_IMPORTED - OPTIONAL
        self.assertEqual(set(), unused, 'declared for the %s but imported '
                                        'by none of its modules' % role)
        return found

    def test_the_cli_needs_only_requirements_txt(self):
        found = self.assertDeclaresWhatIsUsed('cli', self.declared['base'])
        self.assertEqual(set(), SERVER_MODULES & set(found['loaded']))

    def test_the_server_extra(self):
        self.assertDeclaresWhatIsUsed(
            'server', self.declared['extras']['server'])

    def test_the_agent_extra(self):
        self.assertDeclaresWhatIsUsed(
            'agent', self.declared['extras']['agent'])

    def test_no_extra_repeats_a_base_requirement(self):
        for name, extra in self.declared['extras'].items():
            self.assertEqual(set(), extra & self.declared['base'], name)
