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

"""The one place of warning filters, installed before any other import.

eventlet is still installed (oslo.service depends on it) and futurist,
which oslo.messaging and oslo.service import, tries ``import eventlet`` to
know whether it could use green threads. That import warns, about nothing
the user did, before any output of ours: eventlet 0.39+ with a multi-line
``EventletDeprecationWarning``, and the dnspython it loads, with
cryptography 51, with a ``CryptographyDeprecationWarning`` ("DSA is
deprecated") for each of its DSA names. The filters below drop exactly
those warnings, whoever triggers them, and nothing else. Every console
script (``trove_upgrade.cmd``) and every process that selects the threading
backend (:mod:`trove_upgrade.common.threading_backend`: the WSGI
application, the demo, the benchmarks) imports this module first.
"""

import warnings

from cryptography import utils as crypto_utils

# The warning's text starts with a newline; its category is eventlet's own
# (a subclass of Warning), which cannot be named before eventlet is loaded.
warnings.filterwarnings('ignore', message=r'\s*Eventlet is deprecated',
                        category=Warning)
warnings.filterwarnings('ignore', message='DSA is deprecated',
                        category=crypto_utils.CryptographyDeprecationWarning,
                        module=r'dns\.')
