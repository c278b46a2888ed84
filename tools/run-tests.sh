#!/usr/bin/env bash
# The whole test suite, from a fresh Debian machine (as root) or a developer
# checkout: installs what is missing, starts the real services the
# functional tests talk to, prepares their databases, and runs unit and
# functional tests in one stestr run through tox, its two workers balanced
# by the durations of the last run on this machine.
#
#   tools/run-tests.sh [stestr filter]
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the tests need beyond the database and message servers
# (tools/start-services.sh installs those): a compiler and headers for
# wheels that build, venv, rsync for the rsync strategy and memcached for
# Swift.
need=()
command -v gcc >/dev/null || need+=(gcc)
command -v rsync >/dev/null || need+=(rsync)
command -v memcached >/dev/null || need+=(memcached)
command -v git >/dev/null || need+=(git)
python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
[ -e "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ] \
    || need+=(python3-dev)
if [ ${#need[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

tools/start-services.sh
tools/test-setup.sh

# tox itself lives in a small virtualenv of its own; tox builds the test
# environment (tox.ini): the package with its server and agent extras,
# test-requirements.txt, and the services the functional tests start.
# stestr beside it is for tools/stestr-times.py, whose seed runs before tox
# has built the test environment.
if [ ! -x .tox-bootstrap/bin/tox ] || [ ! -x .tox-bootstrap/bin/stestr ]; then
    python3 -m venv .tox-bootstrap
    .tox-bootstrap/bin/pip install -q 'tox>=4' 'stestr>=4.0.0'
fi
# The durations of the last run on this machine, kept in the tests' cache
# directory: with them stestr gives its two workers equal shares of time,
# not equal numbers of test classes (tools/stestr-times.py).
.tox-bootstrap/bin/python tools/stestr-times.py seed \
    || echo "stestr-times: seed failed, workers get tests round robin"
# The services were just started: a database test that cannot reach its
# server must fail, not skip.
export TROVE_UPGRADE_TEST_REQUIRE_DATABASES=1
status=0
.tox-bootstrap/bin/tox -e all -- "$@" || status=$?
# Saved whether the tests passed or not; a run of some tests only updates
# their durations and keeps the others'.
save=(save)
[ $# -eq 0 ] || save+=(--merge)
.tox-bootstrap/bin/python tools/stestr-times.py "${save[@]}" \
    || echo "stestr-times: save failed, durations left as they were"
exit "$status"
