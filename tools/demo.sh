#!/usr/bin/env bash
# The demo: the whole story of trove-upgrade on one machine (tools/demo.py):
# the real OpenStack Trove guest agent upgraded from 25.1.0 to 26.0.0 (the
# first run downloads Trove's wheels from PyPI, a few minutes; they are
# cached). "tools/demo.sh --sample" runs the quick sample-guest story.
# From a fresh Debian machine as root: makes sure RabbitMQ answers on
# loopback (installing or starting it when needed), builds a virtualenv with
# trove-upgrade and the openstack CLI in .venv, and runs the demo. It leaves
# nothing running.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! python3 -c 'import venv, ensurepip' 2>/dev/null || ! command -v git >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv git >/dev/null
fi
tools/start-services.sh rabbitmq

# The server and agent extras: a plain install is the CLI plugin only.
# supervisor runs the real Trove guest agent, as a guest's service manager.
if ! .venv/bin/python -c 'import oslo_messaging, sqlalchemy, swiftclient' 2>/dev/null \
        || [ ! -x .venv/bin/openstack ] || [ ! -x .venv/bin/supervisord ] \
        || [ ! -x .venv/bin/trove-upgrade-adopt ]; then
    echo "Installing trove-upgrade, python-openstackclient and supervisor into .venv ..."
    python3 -m venv .venv
    .venv/bin/pip install -q -U pip
    # -qq: pip still prints errors; setuptools' notice that an editable
    # install links this checkout is not news to whoever runs it.
    .venv/bin/pip install -qq -e '.[server,agent]' python-openstackclient supervisor
fi
exec .venv/bin/python tools/demo.py "$@"
