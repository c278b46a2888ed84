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

"""The last line of another process's error, as oslo.messaging gives it."""

import json
import sys
import traceback

import oslo_messaging as messaging
from oslo_messaging._drivers import common as driver_common

from trove_upgrade.agent import reasons
from trove_upgrade.tests import base

GUEST_PATH = '/opt/guest-agent-venv/lib/python3.12/site-packages/trove'


def remote(error, allowed=()):
    """``error`` raised in a server, as oslo.messaging gives it back.

    Serialized and deserialized by oslo.messaging's own driver helpers,
    the traceback is a real one from this process.
    """
    try:
        raise error
    except Exception:
        data = driver_common.serialize_remote_exception(sys.exc_info())
    # A guest's traceback names the guest's files.
    failure = json.loads(data)
    failure['tb'] = [GUEST_PATH.join(line.split(__file__))
                     for line in failure['tb']]
    return driver_common.deserialize_remote_exception(json.dumps(failure),
                                                      list(allowed))


class TestErrorLine(base.TestCase):

    def test_last_non_blank_line_collapsed(self):
        self.assertEqual('ERROR: no matching', reasons.error_line(
            'Collecting x\n  ERROR:   no \t matching  \n\n  \n'))

    def test_empty(self):
        self.assertEqual('', reasons.error_line(''))

    def test_bounded(self):
        line = reasons.error_line('x' * 5000)
        self.assertLessEqual(len(line), reasons.MAX_ERROR_LINE)
        self.assertIn('characters cut', line)

    def test_a_traceback_gives_its_exception_line(self):
        try:
            raise ImportError('deliberately broken build')
        except ImportError:
            text = traceback.format_exc()
        self.assertEqual('ImportError: deliberately broken build',
                         reasons.error_line(text))


class TestOfError(base.TestCase):

    def assertOneBoundedLine(self, text):
        self.assertNotIn('\n', text)
        self.assertNotIn('Traceback', text)
        self.assertNotIn(GUEST_PATH, text)
        self.assertNotIn('site-packages', text)
        self.assertLessEqual(len(text), reasons.MAX_ERROR_LINE)

    def test_remote_builtin_error(self):
        # Trove's guest agent refusing a plain call: oslo.messaging
        # rebuilds the KeyError with the traceback in its argument.
        error = remote(KeyError('context'))
        self.assertIn(GUEST_PATH, str(error))
        reason = reasons.of_error(error)
        self.assertEqual("KeyError: 'context'", reason)
        self.assertOneBoundedLine(reason)

    def test_remote_error_of_a_module_not_allowed(self):
        error = remote(messaging.MessagingTimeout('slow\nsecond line'))
        self.assertIsInstance(error, messaging.RemoteError)
        reason = reasons.of_error(error)
        self.assertEqual('MessagingTimeout: second line', reason)
        self.assertOneBoundedLine(reason)

    def test_remote_error_of_an_allowed_module(self):
        error = remote(messaging.MessagingTimeout('slow'),
                       allowed=['oslo_messaging.exceptions'])
        reason = reasons.of_error(error)
        self.assertTrue(reason.endswith('MessagingTimeout: slow'), reason)
        self.assertOneBoundedLine(reason)

    def test_huge_remote_message_is_bounded(self):
        reason = reasons.of_error(remote(ValueError('v' * 100000)))
        self.assertTrue(reason.startswith('ValueError: vvv'), reason)
        self.assertOneBoundedLine(reason)

    def test_local_error(self):
        self.assertEqual('OSError: [Errno 28] no space',
                         reasons.of_error(OSError(28, 'no space')))
        self.assertEqual('RuntimeError', reasons.of_error(RuntimeError()))
