"""die_with_parent asks the kernel for a signal and closes the race."""

import os
import signal
import subprocess
import sys
import textwrap
from unittest import mock

from trove_upgrade.conductor import parent_death
from trove_upgrade.tests import base


class TestDieWithParent(base.TestCase):

    def test_parent_already_gone_signals_at_once(self):
        with mock.patch.object(os, 'getppid', return_value=1), \
                mock.patch.object(os, 'kill') as kill:
            self.assertTrue(parent_death.die_with_parent(12345))
        kill.assert_called_once_with(os.getpid(), signal.SIGTERM)

    def test_live_parent_is_not_signalled(self):
        with mock.patch.object(os, 'kill') as kill:
            self.assertTrue(parent_death.die_with_parent(os.getppid()))
        kill.assert_not_called()

    def test_other_platforms_are_left_alone(self):
        with mock.patch.object(sys, 'platform', 'darwin'), \
                mock.patch.object(os, 'kill') as kill:
            self.assertFalse(parent_death.die_with_parent(1))
        kill.assert_not_called()

    def test_the_kernel_has_the_request(self):
        # A child of its own, so this process's setting stays untouched.
        code = textwrap.dedent('''
            import ctypes, os, signal
            from trove_upgrade.conductor import parent_death
            parent_death.die_with_parent(os.getppid(), signal.SIGUSR1)
            value = ctypes.c_int()
            ctypes.CDLL(None).prctl(2, ctypes.byref(value), 0, 0, 0)
            print(value.value)
        ''')
        out = subprocess.check_output([sys.executable, '-c', code])
        self.assertEqual(int(signal.SIGUSR1), int(out))
