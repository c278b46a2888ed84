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

"""trove-upgrade-adopt: manage a Trove image's existing guest agent install.

Run once on an instance built from an image that predates trove-upgrade
(or from the image build itself), with the upgrade agent's configuration
and before ``trove-upgrade-agent`` starts::

    trove-upgrade-adopt --config-file /etc/trove-upgrade/agent.conf \\
        --venv /opt/guest-agent-venv

The running guest agent is neither reinstalled nor restarted. Adoption is
all or nothing: a step that fails is undone with every step before it, and
a run that was killed is undone by the next one before it adopts. Exit
status: 0 adopted (or already adopted), 1 refused (the reason is printed,
nothing changed), 2 the configuration cannot work or a step failed (named
on one line, every change undone).
"""

# First: oslo.messaging, which this command imports, initialises a backend
# of oslo.service when it loads (eventlet by default); the threading one.
from trove_upgrade.common import threading_backend  # noqa: F401

import logging
import os
import sys

from oslo_config import cfg

from trove_upgrade.agent import adopt
from trove_upgrade.agent import init_system
from trove_upgrade.agent import install
from trove_upgrade.agent import journal as journal_mod
from trove_upgrade.agent import service as agent_service
from trove_upgrade.cmd import short_lived
from trove_upgrade import conf
from trove_upgrade import version

CONF = conf.CONF
LOG = logging.getLogger(__name__)
PROG = 'trove-upgrade-adopt'

cli_opts = [
    cfg.StrOpt('venv', default=adopt.DEFAULT_VENV,
               help='Virtualenv of the existing guest agent.'),
    cfg.StrOpt('guest-version',
               help='Version to record; default: the version of the '
                    'distribution declaring the guest agent\'s console '
                    'script.'),
]


@short_lived.command(PROG)
def main(argv=None):
    CONF.register_cli_opts(cli_opts)
    argv = sys.argv[1:] if argv is None else argv
    with conf.readable_config(PROG, argv):
        CONF(argv,
             project='trove-upgrade',
             prog=PROG, version=version.version_info.version_string())
    agent = CONF.agent
    try:
        # Reads every value now: one that cannot work, read later, ended
        # the command in a traceback.
        CONF.log_opt_values(LOG, logging.DEBUG)
        guest = agent_service.load_trove_guest(CONF)
        journal = journal_mod.UpgradeJournal(agent.install_root)
        journal.read()
        owner = agent_service.AgentService._own_install_root(
            agent.install_root, wait=0)
    except (agent_service.AgentConfigError, journal_mod.JournalError,
            OSError, cfg.Error) as e:
        print('%s: error: %s' % (PROG, e), file=sys.stderr)
        return 2
    try:
        installs = install.InstallRoot(agent.install_root, journal.lock)
        supervisor = None
        if agent.service_manager != 'builtin':
            supervisor = init_system.load(CONF, installs)
        trove_config_dir = None
        if (guest is not None and CONF.trove_guest.manage_rpc_ping
                and guest.guest_id):
            trove_config_dir = guest.config_dir
        adopted, changed = adopt.adopt(
            installs, journal, CONF.venv, agent.guest_console_script,
            version=CONF.guest_version, supervisor=supervisor,
            program_link=agent.guest_program_link,
            trove_config_dir=trove_config_dir)
    except (adopt.AdoptionRefusedError, install.InstallError,
            init_system.InitSystemError) as e:
        print('%s: refused: %s' % (PROG, e), file=sys.stderr)
        return 1
    except (adopt.AdoptionStepError, OSError) as e:
        print('%s: error: %s' % (PROG, e), file=sys.stderr)
        return 2
    finally:
        os.close(owner)
    print('%s %s as version %s under %s'
          % ('adopted' if changed else 'already adopted:', CONF.venv,
             adopted, agent.install_root))
    return 0


if __name__ == '__main__':
    sys.exit(main())
