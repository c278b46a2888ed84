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

"""The guest image recipe of install/guest-image.rst, as the guide has it.

The diskimage-builder element's ``install.d`` script and its
``agent.conf`` are read from the guide itself and run by bash, with two
changes only: the absolute paths (``/opt``, ``/etc``, ``/var``) are moved
under a temporary directory, and pip finds trove-upgrade as a wheel of
this checkout (``PIP_FIND_LINKS``), since it is not on PyPI; its
dependencies come from the index, as on an image build. The installed
``trove-upgrade-agent`` and ``trove-upgrade-adopt`` must then start: a
recipe that installs the CLI-only package gives them ``No module named
'oslo_service'``. One real install (minutes), so one test.
"""

import os
import re
import subprocess
import sys

import fixtures
from testtools import content

from trove_upgrade.tests import base

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..',
                                    '..', '..'))
GUIDE = os.path.join(REPO, 'doc', 'source', 'install', 'guest-image.rst')
INSTALL_SCRIPT = '``install.d/80-trove-upgrade-agent``:'
AGENT_CONF = '``agent.conf`` (no instance id'
UNIT = os.path.join(REPO, 'etc', 'systemd', 'trove-upgrade-agent.service')
# The image's top directories the recipe writes to, where a path starts.
MOVED = re.compile(r'(?<![\w./$}])/(?:opt|etc|var)/')


def code_block_after(text, marker):
    """The first ``.. code-block::`` after the line starting ``marker``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines)
                 if line.startswith(marker))
    directive = next(i for i in range(start + 1, len(lines))
                     if lines[i].startswith('.. code-block::'))
    block = []
    for line in lines[directive + 1:]:
        if line and not line.startswith(' '):
            break
        block.append(line)
    body = '\n'.join(block).strip('\n').splitlines()
    indent = min(len(line) - len(line.lstrip())
                 for line in body if line.strip())
    return '\n'.join(line[indent:] for line in body) + '\n'


def move_under(text, root):
    """``text`` with the image's absolute paths moved under ``root``."""
    return MOVED.sub(lambda match: root + match.group(0), text)


class TestGuestImageRecipe(base.TestCase):

    def test_the_guides_element_installs_an_agent_that_starts(self):
        with open(GUIDE) as f:
            guide = f.read()
        script = code_block_after(guide, INSTALL_SCRIPT)
        agent_conf = code_block_after(guide, AGENT_CONF)
        self.assertIn("pip install 'trove-upgrade[agent]'", script)

        tmp = self.useFixture(fixtures.TempDir()).path
        root = os.path.join(tmp, 'image')
        wheels = os.path.join(tmp, 'wheels')
        built = subprocess.run(
            [sys.executable, '-m', 'pip', 'wheel', '-q', '--no-deps',
             '-w', wheels, REPO], capture_output=True, text=True,
            timeout=600)
        self.assertEqual(0, built.returncode, built.stderr[-3000:])
        # The element's own files, as diskimage-builder gives SCRIPTDIR.
        element = os.path.join(tmp, 'element')
        os.makedirs(element)
        with open(os.path.join(element, 'agent.conf'), 'w') as f:
            f.write(agent_conf)
        with open(UNIT) as src, open(os.path.join(
                element, 'trove-upgrade-agent.service'), 'w') as dest:
            dest.write(src.read())
        os.makedirs(os.path.join(root, 'etc', 'systemd', 'system'))
        script_path = os.path.join(tmp, '80-trove-upgrade-agent')
        with open(script_path, 'w') as f:
            f.write(move_under(script, root))
        self.addDetail('install.d script', content.text_content(
            move_under(script, root)))

        env = {name: value for name, value in os.environ.items()
               if not name.startswith(('OS_', 'VIRTUAL_ENV', 'PYTHON'))}
        env.update(SCRIPTDIR=element, PIP_FIND_LINKS=wheels,
                   PIP_DISABLE_PIP_VERSION_CHECK='1')
        ran = subprocess.run(['bash', script_path], capture_output=True,
                             text=True, env=env, timeout=1800, cwd=tmp)
        self.assertEqual(0, ran.returncode, ran.stderr[-5000:])

        venv_bin = os.path.join(root, 'opt', 'trove-upgrade', 'bin')
        for command in ('trove-upgrade-agent', 'trove-upgrade-adopt'):
            for option in ('--help', '--version'):
                started = subprocess.run(
                    [os.path.join(venv_bin, command), option],
                    capture_output=True, text=True, env=env, timeout=120)
                output = started.stdout + started.stderr
                self.assertEqual(0, started.returncode,
                                 (command, option, output[-3000:]))
                self.assertNotIn('No module named', output)
            self.assertIn('usage: %s' % command, subprocess.run(
                [os.path.join(venv_bin, command), '--help'],
                capture_output=True, text=True, env=env,
                timeout=120).stdout)
        with open(os.path.join(
                root, 'etc', 'trove-upgrade', 'trove-upgrade.conf.d',
                'agent.conf')) as f:
            self.assertEqual(agent_conf, f.read())
        self.assertTrue(os.path.isfile(os.path.join(
            root, 'etc', 'systemd', 'system',
            'trove-upgrade-agent.service')))
        self.assertTrue(os.path.isdir(os.path.join(
            root, 'var', 'lib', 'trove-upgrade')))
