"""The README's demo runs green and leaves nothing running."""

import os
import subprocess
import sys

from trove_upgrade.tests import base

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..',
                                    '..'))


def _processes_mentioning(text):
    found = []
    for pid in os.listdir('/proc'):
        if not pid.isdigit():
            continue
        try:
            with open('/proc/%s/cmdline' % pid, 'rb') as f:
                cmdline = f.read().replace(b'\0', b' ').decode()
        except OSError:
            continue
        if text in cmdline:
            found.append(cmdline)
    return found


class TestDemo(base.TestCase):

    def test_demo_tells_the_whole_story(self):
        # tools/demo.sh builds .venv and runs this same script with it; the
        # test environment already has everything the script needs.
        proc = subprocess.run(
            [sys.executable, os.path.join(ROOT, 'tools', 'demo.py'),
             '--sample'],
            capture_output=True, text=True, cwd=ROOT, timeout=900)
        out = proc.stdout
        self.assertEqual(0, proc.returncode, out + proc.stderr)
        self.assertEqual(3, out.count('guest agent v1.0.1 is running and '
                                      'healthy'), out)
        self.assertIn('RESTARTING  -> FAILED      guest agent v1.0.2 failed',
                      out)
        self.assertIn('rolled back to v1.0.1, which is running', out)
        self.assertIn('VERIFYING   -> FAILED      package rejected: '
                      'ChunkAuthenticationError', out)
        self.assertIn('(HTTP 404)', out)
        self.assertIn('Demo complete: every process it started has '
                      'stopped.', out)
        workdir = [line for line in out.splitlines()
                   if 'database: SQLite at ' in line][0]
        workdir = os.path.dirname(workdir.split('SQLite at ')[1].split(
            ',')[0])
        self.assertFalse(os.path.exists(workdir))
        self.assertEqual([], _processes_mentioning(workdir))
