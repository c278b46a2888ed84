"""Downtime of the real Trove guest agent, 25.1.0 -> 26.0.0 (``--trove``).

Run by ``tools/bench/downtime.py --trove``. ``trove-guestagent`` runs on
Trove's guest layout (``tests/functional/trove/guest.py``) with RabbitMQ on
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

from trove_upgrade.agent import install
from trove_upgrade.agent import journal as journal_mod
from trove_upgrade.agent import pipeline
from trove_upgrade.agent import supervisor
from trove_upgrade.agent import trove_guest
from trove_upgrade.agent import verifier
from trove_upgrade import conf
from trove_upgrade.packaging import build
from trove_upgrade.packaging import keys
from trove_upgrade.tests.functional.trove import guest
from trove_upgrade.tests.functional import trove_release

RABBIT = 'rabbit://guest:guest@127.0.0.1:5672/'
FROM = '25.1.0'
TO = '26.0.0'
PING_TIMEOUT = 0.3
PINGERS = 3
WAIT = 300


class Pinger:
    """Pings the guest agent without pause; keeps every answer's time."""

    def __init__(self, exchange, guest_id):
        self.ping = trove_guest.RpcPing(RABBIT, exchange, guest_id,
                                        PING_TIMEOUT)
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


class TimedSupervisor(supervisor.GuestSupervisor):
    """Notes when the old process has gone."""

    stopped_at = None

    def stop(self):
        super().stop()
        if self.stopped_at is None:
            self.stopped_at = time.monotonic()


class CopyStrategy:
    def fetch(self, location, dest_path, max_bytes):
        shutil.copyfile(location, dest_path)
        return os.path.getsize(dest_path)


class Guest:
    """One Trove guest: layout, Docker API, install root, supervisor."""

    def __init__(self, work, name, cache):
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
        self.installs.install(FROM, guest.wheelhouse(FROM, cache))
        self.installs.switch(FROM)
        self.pinger = Pinger(self.exchange, self.guest_id)
        self.supervisor = TimedSupervisor(
            self.installs, self.layout.command('bin/trove-guestagent'),
            stop_timeout=30, probe=trove_guest.RpcPing(
                RABBIT, self.exchange, self.guest_id, 2))
        self.supervisor.restart(None, 0, WAIT, 1)
        self.pinger.start()
        self.pinger.first_after(0)

    def close(self):
        self.supervisor.stop()
        self.pinger.close()
        self.supervisor.probe.close()
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
        + datetime.timedelta(days=1))
    return path, sign_path, enc_path


def side_by_side(work, cache, package, sign_path, enc_path):
    box = Guest(work, 'side-by-side', cache)
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
        box.supervisor.stopped_at = None
        result = runner.run(entry)
        if result != 'SUCCESS':
            raise RuntimeError('side-by-side upgrade ended %s: %s'
                               % (result, box.journal.read()['outbox']))
        stopped = box.supervisor.stopped_at
        first_new = box.pinger.first_after(stopped)
        downtime = first_new - box.pinger.last_before(stopped)
        # The cold start of the new release, on the same guest.
        box.supervisor.stop()
        started = time.monotonic()
        box.supervisor.start()
        cold = box.pinger.first_after(started) - started
        return downtime, cold
    finally:
        box.close()


def in_place(work, cache):
    box = Guest(work, 'in-place', cache)
    try:
        box.supervisor.stopped_at = None
        began = time.monotonic()
        box.supervisor.stop()
        live = box.installs.path(FROM)
        house = os.path.dirname(guest.trove_wheel(TO, cache))
        box.installs._run(
            [box.installs.python, '-m', 'pip', '--python',
             os.path.join(live, 'bin', 'python'), 'install', '--no-index',
             '--disable-pip-version-check', '--quiet', '--find-links',
             house, 'trove==%s' % TO], 'pip install in place')
        box.supervisor.start()
        first_new = box.pinger.first_after(box.supervisor.stopped_at)
        return first_new - box.pinger.last_before(began)
    finally:
        box.close()


def main(work):
    cache = trove_release.cache_dir()
    print('preparing: wheels of trove %s and %s (cached in %s), package of '
          '%s' % (FROM, TO, cache, TO), flush=True)
    package, sign_path, enc_path = _package(work, cache)
    guest.wheelhouse(FROM, cache)
    down_sbs, cold = side_by_side(work, cache, package, sign_path, enc_path)
    down_in_place = in_place(work, cache)
    print('real trove-guestagent %s -> %s; downtime = last answer of the '
          'old release to first answer of the new one on '
          'guestagent.<guest_id> (ping resolution ~%.2fs)'
          % (FROM, TO, PING_TIMEOUT / PINGERS))
    print('%-28s %9.2fs' % ('side-by-side downtime', down_sbs))
    print('%-28s %9.2fs' % ('in-place downtime', down_in_place))
    print('%-28s %9.2fs' % ('cold start of %s' % TO, cold))
    print('target: side-by-side <= cold start + 0.5s (%.2fs): %s; below '
          'in place: %s' % (cold + 0.5,
                            'met' if down_sbs <= cold + 0.5 else 'NOT met',
                            'met' if down_sbs < down_in_place
                            else 'NOT met'))
