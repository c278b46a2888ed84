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

"""What both demo stories share: how they speak, fail and end.

``tools/demo.py`` (the sample story) and ``tools/demo_trove.py`` (the real
Trove guest agent's) print their steps with :func:`say` and :func:`step`,
raise :class:`DemoFailed` when a step does not see what it expected, and
end with :func:`complete`, which fails the demo when a process it started
outlives it.
"""

import os


class DemoFailed(Exception):
    """A step did not see what it expected."""


def say(text=''):
    print(text, flush=True)


def step(number, text):
    say()
    say('== %s. %s' % (number, text))


def flip_byte(path):
    """Flip one bit of the byte in the middle of ``path``; its offset.

    In a package, that byte is in the encrypted payload: the signed
    manifest stays genuine.
    """
    offset = os.path.getsize(path) // 2
    with open(path, 'r+b') as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0x01]))
    return offset


def complete(workdir):
    """Say the demo is complete once nothing it started still runs."""
    left = processes_mentioning(workdir)
    say()
    if left:
        say('DEMO FAILED: processes left running:\n%s' % '\n'.join(left))
        return 1
    say('Demo complete: every process it started has stopped.')
    return 0


def processes_mentioning(text):
    """The command lines of the processes that name ``text``."""
    found = []
    for pid in os.listdir('/proc'):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open('/proc/%s/cmdline' % pid, 'rb') as f:
                cmdline = f.read().replace(b'\0', b' ').decode()
        except OSError:
            continue
        if text in cmdline:
            found.append(cmdline)
    return found
