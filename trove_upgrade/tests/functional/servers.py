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

"""Real servers on loopback for the download strategies, as fixtures.

* :class:`SwiftServer`: a complete Swift (proxy, account, container and
  object servers, tempauth ``test:tester``/``testing``) started by pifpaf on
  free ports.
* :class:`CertificateAuthority`: a throw-away CA issuing server and client
  certificates.
* :class:`HttpsFileServer`: a threaded HTTPS file server with Range
  support, an optional client-certificate requirement and injectable faults
  (a connection dropped mid-body, a lying Content-Length, endless data).
* :class:`RsyncDaemon`: ``rsync --daemon`` serving one module.

They serve the strategies' functional tests, the agent's tests and the
demo; each listens on 127.0.0.1 only and removes everything it created.
"""

import os
import shutil
import socket
import subprocess
import sys
import time

import fixtures
from pifpaf.drivers import swift as pifpaf_swift
from swiftclient import client as swift_client

LOOPBACK = '127.0.0.1'


def free_port():
    """A TCP port free on loopback right now."""
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def wait_for_port(port, timeout=30.0, process=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError('%s exited with status %s before listening'
                               % (process.args[0], process.returncode))
        with socket.socket() as sock:
            if sock.connect_ex((LOOPBACK, port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError('nothing listens on %s:%d after %s s'
                       % (LOOPBACK, port, timeout))


class _PifpafSwift(pifpaf_swift.SwiftDriver):
    """pifpaf's Swift driver, usable on a port other than 8080.

    pifpaf checks the started Swift with ``swift -A
    http://localhost:8080/auth/v1.0`` whatever port it was given; point
    that check at the real proxy.
    """

    keystone_filters = None

    def _exec(self, command, *args, **kwargs):
        command = [arg.replace('http://localhost:8080/',
                               'http://%s:%d/' % (LOOPBACK, self.port))
                   for arg in command]
        return super()._exec(command, *args, **kwargs)

    def template(self, resource, env, dest):
        """Add Keystone auth beside tempauth when asked to."""
        super().template(resource, env, dest)
        if resource != 'proxy.conf' or self.keystone_filters is None:
            return
        with open(dest) as f:
            text = f.read()
        text = text.replace(' tempauth ',
                            ' authtoken keystoneauth tempauth ')
        with open(dest, 'w') as f:
            f.write(text + self.keystone_filters)


class SwiftServer(fixtures.Fixture):
    """A real Swift with tempauth, on free loopback ports.

    Given a running ``keystone`` fixture (tests/functional/keystone.py),
    Swift also accepts Keystone tokens for accounts ``KEY_<project id>``
    and is registered in that Keystone's catalog as ``object-store``.
    """

    user = 'test:tester'
    key = 'testing'
    keystone_reseller_prefix = 'KEY_'

    def __init__(self, keystone=None):
        super().__init__()
        self.keystone = keystone

    def _setUp(self):
        self.port = free_port()
        driver = _PifpafSwift(
            port=self.port, account_port=free_port(),
            container_port=free_port(), object_port=free_port(),
            memcached_port=free_port())
        if self.keystone is not None:
            driver.keystone_filters = self._keystone_filters()
        bin_dirs = [os.path.dirname(sys.executable)]
        if os.geteuid() == 0:
            bin_dirs.insert(0, self._memcached_as_root())
        old_path = os.environ.get('PATH', os.defpath)
        os.environ['PATH'] = os.pathsep.join(bin_dirs + [old_path])
        try:
            self.useFixture(driver)
        finally:
            os.environ['PATH'] = old_path
        self.auth_url = 'http://%s:%d/auth/v1.0' % (LOOPBACK, self.port)
        if self.keystone is not None:
            self.keystone.register_service(
                'http://%s:%d/v1/%s$(project_id)s' % (
                    LOOPBACK, self.port, self.keystone_reseller_prefix),
                service_type='object-store')

    def _keystone_filters(self):
        options = dict(self.keystone.authtoken_options(),
                       delay_auth_decision='true',
                       service_type='object-store')
        lines = ['', '[filter:authtoken]',
                 'paste.filter_factory = '
                 'keystonemiddleware.auth_token:filter_factory']
        lines += ['%s = %s' % item for item in sorted(options.items())]
        lines += ['', '[filter:keystoneauth]',
                  'use = egg:swift#keystoneauth',
                  'reseller_prefix = %s' % self.keystone_reseller_prefix,
                  'operator_roles = admin, member', '']
        return '\n'.join(lines)

    def _memcached_as_root(self):
        """memcached refuses to run as root without ``-u root``."""
        real = shutil.which('memcached')
        if real is None:
            raise RuntimeError('memcached is not installed (Debian package '
                               '"memcached")')
        wrapper_dir = self.useFixture(fixtures.TempDir()).path
        wrapper = os.path.join(wrapper_dir, 'memcached')
        with open(wrapper, 'w') as f:
            f.write('#!/bin/sh\nexec %s -u root "$@"\n' % real)
        os.chmod(wrapper, 0o755)
        return wrapper_dir

    def connection(self):
        return swift_client.Connection(authurl=self.auth_url, user=self.user,
                                       key=self.key, auth_version='1')

    def strategy_conf(self):
        """The ``[swift]`` drop-in settings reaching this Swift."""
        return {'auth_version': '1', 'auth_url': self.auth_url,
                'user': self.user, 'key': self.key}


class RsyncDaemon(fixtures.Fixture):
    """``rsync --daemon`` serving ``root`` as module ``module``.

    With ``secret``, the module requires user ``user`` with that password;
    :meth:`password_file` writes the file the client passes to rsync.
    ``pre_xfer_exec``, a program, runs before each request is served, which
    waits for it.
    """

    def __init__(self, root, module='packages', user=None, secret=None,
                 pre_xfer_exec=None):
        super().__init__()
        self.root = root
        self.module = module
        self.user = user
        self.secret = secret
        self.pre_xfer_exec = pre_xfer_exec

    def _setUp(self):
        self.workdir = self.useFixture(fixtures.TempDir()).path
        self.port = free_port()
        config = os.path.join(self.workdir, 'rsyncd.conf')
        lines = ['use chroot = no', 'max connections = 8']
        if os.geteuid() == 0:
            lines += ['uid = root', 'gid = root']
        lines += ['[%s]' % self.module, 'path = %s' % self.root,
                  'read only = yes', 'list = yes']
        if self.pre_xfer_exec:
            lines.append('pre-xfer exec = %s' % self.pre_xfer_exec)
        if self.secret is not None:
            secrets = self._write('rsyncd.secrets',
                                  '%s:%s\n' % (self.user, self.secret))
            lines += ['auth users = %s' % self.user,
                      'secrets file = %s' % secrets]
        with open(config, 'w') as f:
            f.write('\n'.join(lines) + '\n')
        self.log_file = os.path.join(self.workdir, 'rsyncd.log')
        process = subprocess.Popen(
            ['rsync', '--daemon', '--no-detach', '--port', str(self.port),
             '--address', LOOPBACK, '--config', config,
             '--log-file', self.log_file],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        self.addCleanup(self._stop, process)
        wait_for_port(self.port, process=process)

    def url(self, name, with_user=True):
        user = '%s@' % self.user if self.user and with_user else ''
        return 'rsync://%s%s:%d/%s/%s' % (user, LOOPBACK, self.port,
                                          self.module, name)

    def password_file(self):
        return self._write('client.password', '%s\n' % self.secret)

    def _write(self, name, text):
        path = os.path.join(self.workdir, name)
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                          0o600), 'w') as f:
            f.write(text)
        return path

    @staticmethod
    def _stop(process):
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def write_strategy_conf(config_dir, name, settings):
    """Write the drop-in ``<config_dir>/<name>.conf`` of one strategy."""
    os.makedirs(config_dir, exist_ok=True)
    lines = ['[%s]' % name]
    for key, value in settings.items():
        if isinstance(value, (list, tuple)):
            value = ','.join(value)
        lines.append('%s = %s' % (key, value))
    path = os.path.join(config_dir, '%s.conf' % name)
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    return path
