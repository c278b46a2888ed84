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

"""A real Trove guest on loopback: Trove's layout, its agent, supervisord.

What a Trove guest VM gives ``trove-guestagent`` at start is made here:
Trove's configuration directory (``guest_info.conf`` with ``guest_id``,
``trove-guestagent.conf`` with the bus and a datastore device listed in
/etc/mtab), a Docker API answering ``GET /version`` on loopback, and an
image virtualenv at ``<tmp>/opt/guest-agent-venv`` installed with real pip
from the cached wheelhouse of a Trove release. The guest agent runs under
supervisord (from PyPI), a real service manager, because systemd cannot
run as PID 1 here. Trove is only ever run as its own process.
"""

import http.server
import json
import os
import secrets
import shutil
import signal
import string
import subprocess
import sys
import threading
import time
import zipfile

from tools.testbed import conffile
from tools.testbed import lifecycle
from trove_upgrade.package_format import wheels

BIN = os.path.dirname(sys.executable)
PROGRAM = 'guest-agent'
# TroveGuestLayout's default: a new key, as Trove gives each instance.
SECURE = object()
CONSOLE_SCRIPT = 'trove-guestagent'


def wheelhouse(version, cache_dir):
    """The cached wheels of ``trove==version`` and its dependencies."""
    return wheels.collect(['trove==%s' % version], cache_dir)


def trove_wheel(version, cache_dir):
    name = 'trove-%s-py3-none-any.whl' % version
    for path in wheelhouse(version, cache_dir):
        if os.path.basename(path) == name:
            return path
    raise AssertionError('%s is not in the wheelhouse' % name)


def broken_trove_wheel(version, kind, dest_dir, cache_dir):
    """A copy of Trove's wheel that is broken in the way ``kind`` says.

    ``import``: it cannot import; ``exit``: its guest agent exits at start;
    ``plain``: its guest agent runs without secure RPC, ignoring the
    instance key; ``silent``: its guest agent runs and answers pings but
    never heartbeats to Trove's conductor.
    """
    source = trove_wheel(version, cache_dir)
    os.makedirs(dest_dir, exist_ok=True)
    dest = os.path.join(dest_dir, os.path.basename(source))
    if kind == 'import':
        member = 'trove/__init__.py'
        extra = b'\nraise ImportError("deliberately broken build")\n'
    elif kind == 'exit':
        # Imports fine; the guest agent exits as soon as it runs.
        member = 'trove/cmd/guest.py'
        extra = b'\n\ndef main():\n    raise SystemExit(3)\n'
    elif kind == 'plain':
        # Runs and serves its topic, but answers in plain text.
        member = 'trove/common/rpc/secure_serializer.py'
        extra = (b'\n\n_init = SecureSerializer.__init__\n'
                 b'SecureSerializer.__init__ = (\n'
                 b'    lambda self, base, key: _init(self, base, None))\n')
    elif kind == 'silent':
        # Serves its topic, but its status never reaches trove-conductor.
        member = 'trove/guestagent/datastore/service.py'
        extra = (b'\n\nBaseDbStatus.set_status = (\n'
                 b'    lambda self, status, force=False: None)\n')
    else:
        raise ValueError(kind)
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(
            dest, 'w', zipfile.ZIP_DEFLATED) as out:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == member:
                data += extra
            out.writestr(item, data)
    return dest


def program_link(top, venv):
    """The image's ``usr/local/bin/guest-agent`` under ``top``, to ``venv``.

    The link Trove's image starts its guest agent through, which adoption
    points at ``current``.
    """
    link_dir = os.path.join(top, 'usr', 'local', 'bin')
    os.makedirs(link_dir)
    link = os.path.join(link_dir, 'guest-agent')
    os.symlink(os.path.join(venv, 'bin', CONSOLE_SCRIPT), link)
    return link


def make_venv(path, version, cache_dir):
    """A virtualenv with trove==version, by real pip, from the wheelhouse."""
    house = os.path.dirname(trove_wheel(version, cache_dir))
    subprocess.run([sys.executable, '-m', 'venv', '--without-pip', path],
                   check=True)
    subprocess.run([sys.executable, '-m', 'pip', '--python',
                    os.path.join(path, 'bin', 'python'), 'install', '-q',
                    '--no-index', '--disable-pip-version-check',
                    '--find-links', house, 'trove==%s' % version],
                   check=True)
    return path


# What Docker says of the datastore's container, named ``database`` by
# Trove's guest agent: running, and healthy by its health check.
DATABASE_CONTAINER = {'Id': 'a' * 64, 'Name': '/database',
                      'State': {'Status': 'running',
                                'Health': {'Status': 'healthy'}}}


class DockerVersionAPI(lifecycle.Resource):
    """A loopback HTTP endpoint answering Docker's ``GET /version``.

    And the inspection of the datastore's container, which the guest
    agent's status check (and so its heartbeats to Trove) reads.
    """

    def _setUp(self):
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                answer = {'ApiVersion': '1.41', 'Version': '24.0.0'}
                if self.path.split('?')[0].endswith(
                        '/containers/database/json'):
                    answer = DATABASE_CONTAINER
                body = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        self.docker_host = 'tcp://127.0.0.1:%d' % server.server_address[1]


def new_instance_key():
    """A key as Trove's ``crypto_utils.generate_random_key`` makes one."""
    chars = string.ascii_letters + string.digits
    return ''.join(secrets.choice(chars) for _ in range(32))


class TroveGuestLayout(lifecycle.Resource):
    """Trove's guest configuration directory for one instance.

    With Trove's defaults: secure RPC on, the instance's key in
    ``guest_info.conf`` (``instance_rpc_encr_key``) where Trove's
    ``get_injected_files`` writes it; ``instance_key=None`` for a Trove
    with ``enable_secure_rpc_messaging = False``.
    """

    def __init__(self, root, guest_id, transport_url, exchange,
                 instance_key=SECURE):
        super().__init__()
        self.root = root
        self.guest_id = guest_id
        self.transport_url = transport_url
        self.exchange = exchange
        self.instance_key = (new_instance_key() if instance_key is SECURE
                             else instance_key)

    def _setUp(self):
        self.conf_dir = os.path.join(self.root, 'etc', 'trove', 'conf.d')
        self.venv = os.path.join(self.root, 'opt', 'guest-agent-venv')
        self.log_dir = os.path.join(self.root, 'var', 'log', 'trove')
        mount = os.path.join(self.root, 'var', 'lib', 'database')
        for path in (self.log_dir, mount):
            os.makedirs(path)
        info = {'guest_id': self.guest_id, 'datastore_manager': 'mysql'}
        if self.instance_key is not None:
            info['instance_rpc_encr_key'] = self.instance_key
        conffile.write_conf(os.path.join(self.conf_dir, 'guest_info.conf'),
                            {'DEFAULT': info})
        conffile.write_conf(
            os.path.join(self.conf_dir, 'trove-guestagent.conf'), {
                'DEFAULT': {'transport_url': self.transport_url,
                            'control_exchange': self.exchange,
                            'log_dir': self.log_dir,
                            'log_file': 'trove-guestagent.log'},
                'mysql': {'device_path': 'tmpfs', 'mount_point': mount}})

    def command(self, program):
        return '%s --config-dir=%s' % (program, self.conf_dir)


class Supervisord(lifecycle.Resource):
    """supervisord running one program: the guest agent by default."""

    def __init__(self, root, command, environment, program=PROGRAM):
        super().__init__()
        self.root = root
        self.command = command
        self.environment = environment
        self.program = program

    def _setUp(self):
        os.makedirs(self.root, exist_ok=True)
        self.conf = os.path.join(self.root, 'supervisord.conf')
        sock = os.path.join(self.root, 'supervisor.sock')
        self.serverurl = 'unix://' + sock
        env = ','.join('%s="%s"' % kv for kv in self.environment.items())
        with open(self.conf, 'w') as f:
            f.write(
                '[unix_http_server]\nfile=%(sock)s\n\n'
                '[supervisord]\nlogfile=%(root)s/supervisord.log\n'
                'pidfile=%(root)s/supervisord.pid\nnodaemon=true\n\n'
                '[rpcinterface:supervisor]\nsupervisor.rpcinterface_factory '
                '= supervisor.rpcinterface:make_main_rpcinterface\n\n'
                '[supervisorctl]\nserverurl=unix://%(sock)s\n\n'
                '[program:%(prog)s]\ncommand=%(command)s\n'
                'environment=%(env)s\nautostart=true\nautorestart=true\n'
                'startsecs=1\nstartretries=1\nstopwaitsecs=10\n'
                'killasgroup=true\nstopasgroup=true\n'
                'redirect_stderr=true\n'
                'stdout_logfile=%(root)s/guest-agent.out\n'
                % {'sock': sock, 'root': self.root,
                   'prog': self.program, 'command': self.command,
                   'env': env})
        self.log = open(os.path.join(self.root, 'supervisord.out'), 'ab')
        self.addCleanup(self.log.close)
        self.proc = subprocess.Popen(
            [os.path.join(BIN, 'supervisord'), '-c', self.conf],
            stdout=self.log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
        self.addCleanup(self._stop)
        self.ctl = '%s -c %s' % (os.path.join(BIN, 'supervisorctl'),
                                 self.conf)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.pid() is not None:
                return
            time.sleep(0.2)
        raise AssertionError('supervisord did not start %s' % self.program)

    def pid(self):
        out = subprocess.run(self.ctl.split() + ['pid', self.program],
                             stdout=subprocess.PIPE, text=True).stdout
        try:
            return int(out.strip().splitlines()[-1]) or None
        except (ValueError, IndexError):
            return None

    def _stop(self):
        subprocess.run(self.ctl.split() + ['shutdown'],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def venv_of(pid):
    """The virtualenv a running Python process loaded its extensions from.

    The kernel resolved the path when the process mapped them, so this is
    what the process runs, whatever ``current`` points at now.
    """
    with open('/proc/%d/maps' % pid) as f:
        for line in f:
            path = line.split()[-1]
            if '/site-packages/' in path:
                return path.split('/lib/python')[0]
    return None


def remove(path):
    shutil.rmtree(path, ignore_errors=True)
