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

"""Downtime of the real Trove guest agent, 25.1.0 -> 26.0.0 (``--trove``).

Run by ``tools/bench/downtime.py --trove``. ``trove-guestagent`` runs on
Trove's guest layout (``tools/testbed/guest.py``) with RabbitMQ on
loopback. A pinger sends oslo.messaging's ``oslo_rpc_server_ping`` to
``guestagent.<guest_id>`` without pause (several threads, each call waiting
at most ``PING_TIMEOUT``), so downtime is the gap between the last answer
of the old release and the first answer of the new one, as a Trove
controller would see it. Three figures in the same run:

side-by-side
    trove-upgrade-agent's pipeline: verify, decrypt and install 26.0.0 into
    a new virtualenv while 25.1.0 answers; switch, stop, start, ping.
in place
    stop 25.1.0, ``pip install --no-index trove==26.0.0`` into its live
    virtualenv, start.
cold start
    26.0.0 stopped, then started: from the start to its first answer.
"""

import datetime
import os
import shutil
import threading
import time
import uuid

from trove_upgrade.agent import init_system
from trove_upgrade.agent import install
from trove_upgrade.agent import journal as journal_mod
from trove_upgrade.agent import pipeline
from trove_upgrade.agent import supervisor
from trove_upgrade.agent import trove_guest
from trove_upgrade.agent import verifier
from trove_upgrade import conf
from trove_upgrade.package_format import build
from trove_upgrade.package_format import keys
from trove_upgrade.package_format import manifest as manifest_mod

# The repository's root is on the path: downtime.py put it there.
from tools.testbed import guest
from tools.testbed import trove_release
import trove_timeline

RABBIT = 'rabbit://guest:guest@127.0.0.1:5672/'
FROM = '25.1.0'
TO = '26.0.0'
PING_TIMEOUT = 0.3
PINGERS = 3
WAIT = 300


class Pinger:
    """Pings the guest agent without pause; keeps every answer's time."""

    def __init__(self, exchange, guest_id, key):
        self.ping = trove_guest.RpcPing(RABBIT, exchange, guest_id,
                                        PING_TIMEOUT, key=key)
        self.answers = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True)
                         for _ in range(PINGERS)]

    def _run(self):
        while not self._stop.is_set():
            if self.ping() is None:
                with self._lock:
                    self.answers.append(time.monotonic())
            else:
                time.sleep(0.01)

    def start(self):
        for index, thread in enumerate(self._threads):
            thread.start()
            time.sleep(PING_TIMEOUT / PINGERS)

    def first_after(self, moment, timeout=WAIT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                later = [t for t in self.answers if t > moment]
            if later:
                return min(later)
            time.sleep(0.02)
        raise RuntimeError('the guest agent never answered')

    def last_before(self, moment):
        with self._lock:
            return max(t for t in self.answers if t <= moment)

    def close(self):
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self.ping.close()


class TimedSupervisor(trove_timeline.TimedSupervisorMixin,
                      supervisor.GuestSupervisor):
    """The built-in supervisor, noting the moments of a restart."""


class TimedServiceSupervisor(trove_timeline.TimedSupervisorMixin,
                             init_system.InitSystemSupervisor):
    """supervisord through its XML-RPC driver, noting the moments."""


class CopyStrategy:
    def fetch(self, location, dest_path, max_bytes):
        shutil.copyfile(location, dest_path)
        return os.path.getsize(dest_path)


class Guest:
    """One Trove guest: layout, Docker API, install root, supervisor."""

    def __init__(self, work, name, cache, manager, stop_timeout):
        self.dir = os.path.join(work, name)
        self.exchange = 'trove_bench_%s' % uuid.uuid4().hex[:8]
        self.guest_id = str(uuid.uuid4())
        self.layout = guest.TroveGuestLayout(self.dir, self.guest_id, RABBIT,
                                             self.exchange)
        self.layout.setUp()
        trove_guest.write_managed_config(self.layout.conf_dir)
        self.docker = guest.DockerVersionAPI()
        self.docker.setUp()
        os.environ['DOCKER_HOST'] = self.docker.docker_host
        self.root = os.path.join(self.dir, 'root')
        self.journal = journal_mod.UpgradeJournal(self.root)
        self.installs = install.InstallRoot(self.root, self.journal.lock)
        self.installs.install(FROM, guest.wheelhouse(FROM, cache),
                              console_script=guest.CONSOLE_SCRIPT)
        self.installs.switch(FROM)
        self.pinger = Pinger(self.exchange, self.guest_id,
                             self.layout.instance_key)
        self.watch = trove_timeline.TopicWatch(RABBIT, self.guest_id)
        probe = trove_guest.RpcPing(RABBIT, self.exchange, self.guest_id, 2,
                                    key=self.layout.instance_key)
        self.supervisord = None
        if manager == 'supervisord':
            # As on Trove's images: the program runs a stable link, here
            # straight to the current install.
            link = os.path.join(self.dir, 'guest-agent')
            os.symlink(os.path.join(self.installs.current_link, 'bin',
                                    guest.CONSOLE_SCRIPT), link)
            self.supervisord = guest.Supervisord(
                os.path.join(self.dir, 'supervisor'),
                self.layout.command(link),
                {'DOCKER_HOST': self.docker.docker_host})
            self.supervisord.setUp()
            self.supervisor = TimedServiceSupervisor(
                self.installs, init_system.SupervisordRpcDriver(
                    guest.PROGRAM, self.supervisord.serverurl,
                    stop_timeout),
                stop_timeout=stop_timeout, probe=probe)
            self.supervisor.adopt()
        else:
            self.supervisor = TimedSupervisor(
                self.installs, self.layout.command('bin/trove-guestagent'),
                stop_timeout=stop_timeout, probe=probe)
            self.supervisor.restart(None, 0, WAIT, 1)
        self.supervisor.watch = self.watch
        self.pinger.start()
        self.pinger.first_after(0)

    def close(self):
        self.supervisor.stop()
        if self.supervisord is not None:
            self.supervisord.cleanUp()
        self.pinger.close()
        self.supervisor.probe.close()
        trove_timeline.remove_topic(RABBIT, self.exchange, self.guest_id)
        self.docker.cleanUp()
        self.layout.cleanUp()


def _package(work, cache):
    signing = keys.generate_signing_key()
    sign_path = os.path.join(work, 'sign.key')
    keys.write_signing_key(sign_path, signing)
    enc = keys.generate_encryption_key()
    enc_path = keys.write_encryption_key(os.path.join(work, 'enc.key'), enc)
    path = os.path.join(work, 'trove-%s.pkg' % TO)
    build.build_package(
        guest.wheelhouse(TO, cache), path, version=TO,
        signing_keys=[signing], encryption_key=enc,
        expires=datetime.datetime.now(datetime.timezone.utc)
        + datetime.timedelta(days=1),
        guest_agent=manifest_mod.GuestAgent(guest.CONSOLE_SCRIPT))
    return path, sign_path, enc_path


def _restart_figures(box, restart):
    """Run ``restart`` on a running guest; return the downtime, breakdown."""
    box.watch.start()
    try:
        box.supervisor.reset_marks()
        restart()
        marks = box.supervisor.marks
        last_old = box.pinger.last_before(marks['sigterm'])
        first_new = box.pinger.first_after(marks['start issued'])
    finally:
        box.watch.stop()
    rows = trove_timeline.breakdown(marks, box.watch, last_old, first_new)
    return first_new - last_old, rows


def side_by_side(work, cache, package, sign_path, enc_path, manager,
                 stop_timeout):
    """Side-by-side downtime, its breakdown, and the cold start."""
    box = Guest(work, 'side-by-side', cache, manager, stop_timeout)
    try:
        conf.CONF([], project='trove-upgrade')
        for name, value in (('install_root', box.root),
                            ('health_grace', 0.0), ('health_timeout', WAIT),
                            ('restart_retries', 1), ('keep_versions', 2)):
            conf.CONF.set_override(name, value, group='agent')
        runner = pipeline.UpgradePipeline(
            conf.CONF, box.journal, box.installs, box.supervisor,
            verifier.PackageVerifier([sign_path + '.pub'], 1, [enc_path]),
            load_strategy=lambda name: CopyStrategy())
        entry = {'id': 'bench', 'instance_version': TO, 'to_version': TO,
                 'from_version': FROM, 'strategy': 'copy',
                 'location': package, 'allow_downgrade': False,
                 'step': pipeline.ACCEPTED, 'attempts': 1, 'detail': ''}
        with box.journal.update() as data:
            data['current_upgrade'] = entry

        def upgrade():
            result = runner.run(entry)
            if result != 'SUCCESS':
                raise RuntimeError('side-by-side upgrade ended %s: %s'
                                   % (result, box.journal.read()['outbox']))

        downtime, rows = _restart_figures(box, upgrade)
        # The cold start of the new release, on the same guest.
        box.supervisor.stop()
        started = time.monotonic()
        box.supervisor.start()
        cold = box.pinger.first_after(started) - started
        return downtime, rows, cold
    finally:
        box.close()


def in_place(work, cache, manager, stop_timeout):
    box = Guest(work, 'in-place', cache, manager, stop_timeout)
    try:
        def upgrade():
            box.supervisor.stop()
            live = box.installs.path(FROM)
            house = os.path.dirname(guest.trove_wheel(TO, cache))
            box.installs._run(
                [box.installs.python, '-m', 'pip', '--python',
                 os.path.join(live, 'bin', 'python'), 'install',
                 '--no-index', '--disable-pip-version-check', '--quiet',
                 '--find-links', house, 'trove==%s' % TO],
                'pip install in place')
            box.supervisor.start()

        return _restart_figures(box, upgrade)[0]
    finally:
        box.close()


def _row(label, seconds, reference='', sign='+'):
    print('  %-40s %7s  %s' % (label, '' if seconds is None
                               else ('%' + sign + '.2fs') % seconds,
                               reference), flush=True)


def main(work, manager, stop_timeout):
    cache = trove_release.cache_dir()
    print('preparing: wheels of trove %s and %s (cached in %s), package of '
          '%s' % (FROM, TO, cache, TO), flush=True)
    package, sign_path, enc_path = _package(work, cache)
    guest.wheelhouse(FROM, cache)
    print('real trove-guestagent %s -> %s; downtime = last answer of the '
          'old release to first answer of the new one on '
          'guestagent.<guest_id> (ping resolution ~%.2fs; consumers and '
          'pids sampled every %.3fs); load: %s'
          % (FROM, TO, PING_TIMEOUT / PINGERS, trove_timeline.SAMPLE,
             _load()), flush=True)
    print('service manager: %s; stop_timeout %.1fs (SIGKILL after it)'
          % (manager, stop_timeout))
    down_sbs, rows, cold = side_by_side(work, cache, package, sign_path,
                                        enc_path, manager, stop_timeout)
    print('side-by-side restart, after the old release\'s last answer:')
    for label, seconds in rows:
        _row(label, seconds)
    marks = dict(rows)
    old_stop = marks['old process exits'] - marks[
        'SIGTERM sent to the old release']
    target = cold + 0.5
    fair = old_stop + cold + 0.5
    print('figures:')
    _row("old release's stop (SIGTERM to exit)", old_stop,
         'stop_timeout %.2fs' % stop_timeout, sign='')
    _row('cold start of %s (start to answer)' % TO, cold, sign='')
    _row('side-by-side downtime', down_sbs,
         'target <= cold start + 0.5s = %.2fs: %s; <= old stop + cold '
         'start + 0.5s = %.2fs: %s' % (
             target, 'met' if down_sbs <= target else 'NOT met', fair,
             'met' if down_sbs <= fair else 'NOT met'), sign='')
    down_in_place = in_place(work, cache, manager, stop_timeout)
    _row('in-place downtime', down_in_place,
         'side-by-side below it: %s' % (
             'met' if down_sbs < down_in_place else 'NOT met'), sign='')
    print('load: %s' % _load(), flush=True)


def _load():
    return ' '.join('%.2f' % n for n in os.getloadavg())
