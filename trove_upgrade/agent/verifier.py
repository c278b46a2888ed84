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

"""The agent's use of the package verification library.

Keys are loaded once, when the agent starts, so a missing or malformed key
file stops the agent with a clear error instead of failing every upgrade.
The manifest is verified before the payload is downloaded: its signed size
then bounds the download.
"""

import shlex

from trove_upgrade.package_format import keys
from trove_upgrade.package_format import verify

MAX_MANIFEST_SIZE = verify.DEFAULT_MAX_MANIFEST_SIZE


class PackageVerifier:
    """Verifies manifests and payloads with the configured keys."""

    max_manifest_size = MAX_MANIFEST_SIZE

    def __init__(self, trusted_key_files, threshold, decryption_key_files):
        self.trusted = keys.load_trusted_keys(trusted_key_files, threshold)
        self.keyring = keys.load_keyring(decryption_key_files)

    @classmethod
    def from_conf(cls, conf):
        agent = conf.agent
        return cls(agent.trusted_key_files, agent.signature_threshold,
                   agent.decryption_key_files)

    def verify_manifest(self, manifest_bytes, expected_version,
                        installed_version, allow_downgrade,
                        max_payload_size, expected_manifest=None):
        """A verified manifest; raises a PackageError subclass otherwise.

        ``expected_manifest`` is an upgrade's (``rpc_interface``): the
        manifest's SHA-256 and package name it expects, or None.
        """
        expected = expected_manifest or {}
        return verify.verify_manifest(
            manifest_bytes, self.trusted,
            expected_version=expected_version,
            installed_version=installed_version,
            allow_downgrade=allow_downgrade,
            max_payload_size=max_payload_size,
            max_manifest_size=MAX_MANIFEST_SIZE,
            expected_sha256=expected.get('sha256'),
            expected_package=expected.get('package'))

    def extract(self, payload_path, manifest, dest_dir, max_payload_size):
        """Decrypt, check and unpack the payload; return the wheel paths."""
        return verify.verify_and_extract(payload_path, manifest,
                                         self.keyring, dest_dir,
                                         max_payload_size=max_payload_size)

    def extract_files(self, ranges_path, manifest, dest_dir, wanted):
        """Check the fetched ranges of ``wanted``; return the wheel paths."""
        return verify.verify_and_extract_files(ranges_path, manifest,
                                               self.keyring, dest_dir,
                                               wanted)

    @staticmethod
    def health_check(manifest):
        """The manifest's ``(command line, timeout)``, or ``(None, None)``."""
        if manifest.health_check is None:
            return None, None
        return (shlex.join(manifest.health_check.command),
                manifest.health_check.timeout)
