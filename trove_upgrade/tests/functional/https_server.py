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

"""A real HTTPS file server on loopback, with its own certificate authority."""

import collections
import datetime
import email.utils
import http.server
import ipaddress
import os
import re
import socket
import ssl
import threading

from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import serialization
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID
from cryptography.x509.oid import NameOID
import fixtures

from trove_upgrade.tests.functional import servers

LOOPBACK = servers.LOOPBACK


class CertificateAuthority:
    """A CA of its own for tests, writing PEM files into ``directory``."""

    def __init__(self, directory, name='trove-upgrade test CA'):
        self.directory = directory
        self._key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        public = self._key.public_key()
        self._cert = (
            self._builder(subject, public)
            .issuer_name(subject)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None),
                           critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, content_commitment=False,
                key_encipherment=False, data_encipherment=False,
                key_agreement=False, key_cert_sign=True, crl_sign=True,
                encipher_only=False, decipher_only=False), critical=True)
            .sign(self._key, hashes.SHA256()))
        self.cert_file = self._write('ca.pem', self._cert.public_bytes(
            serialization.Encoding.PEM))

    def issue(self, common_name, server=True):
        """Return (cert_file, key_file) of a new leaf certificate."""
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                                common_name)])
        usage = (ExtendedKeyUsageOID.SERVER_AUTH if server
                 else ExtendedKeyUsageOID.CLIENT_AUTH)
        builder = (
            self._builder(subject, key.public_key())
            .issuer_name(self._cert.subject)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None),
                           critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(
                    self._key.public_key()), critical=False))
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName([
                x509.DNSName('localhost'),
                x509.IPAddress(ipaddress.ip_address(LOOPBACK))]),
                critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        cert_file = self._write('%s.pem' % common_name, cert.public_bytes(
            serialization.Encoding.PEM))
        key_file = self._write('%s.key' % common_name, key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()))
        return cert_file, key_file

    @staticmethod
    def _builder(subject, public_key):
        now = datetime.datetime.now(datetime.timezone.utc)
        return (x509.CertificateBuilder()
                .subject_name(subject)
                .public_key(public_key)
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=1))
                .add_extension(
                    x509.SubjectKeyIdentifier.from_public_key(public_key),
                    critical=False))

    def _write(self, name, data):
        path = os.path.join(self.directory, name)
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                          0o600), 'wb') as f:
            f.write(data)
        return path


class _Fault:
    """What the server does wrong when a path is requested."""

    def __init__(self, kind, after=0, remaining=None):
        self.kind = kind
        self.after = after
        self.remaining = remaining


class _FileHandler(http.server.BaseHTTPRequestHandler):
    """GET and HEAD of files under the server root, with single ranges."""

    protocol_version = 'HTTP/1.1'
    _RANGE = re.compile(r'^bytes=(\d+)-(\d*)$')

    def log_message(self, fmt, *args):
        pass

    def do_HEAD(self):
        self._serve(body=False)

    def do_GET(self):
        self._serve(body=True)

    def _serve(self, body):
        server = self.server.owner
        name = self.path.lstrip('/')
        server.record(self.command, name, self.headers.get('Range'))
        fault = server.take_fault(name)
        if fault is not None and fault.kind == 'status':
            return self._status(fault.after)
        if fault is not None and fault.kind in ('endless', 'lying_length'):
            return self._endless(fault, body)
        path = os.path.join(server.root, name)
        if not name or '..' in name.split('/') or not os.path.isfile(path):
            return self._status(404)
        with open(path, 'rb') as f:
            data = f.read()
        stat = os.stat(path)
        etag = '"%x-%x"' % (stat.st_mtime_ns, stat.st_size)
        start, end = self._range(etag, len(data))
        if start is not None and start >= len(data):
            self.send_response(416)
            self.send_header('Content-Range', 'bytes */%d' % len(data))
            self.send_header('Content-Length', '0')
            self.end_headers()
            return
        if start is None:
            self.send_response(200)
            start = 0
        else:
            self.send_response(206)
            self.send_header('Content-Range', 'bytes %d-%d/%d'
                             % (start, end - 1, len(data)))
        if fault is not None and fault.kind == 'shift':
            data = data[fault.after:]
        data = data[:end]
        self.send_header('Content-Length', str(len(data) - start))
        self.send_header('ETag', etag)
        self.send_header('Last-Modified',
                         email.utils.formatdate(stat.st_mtime, usegmt=True))
        self.send_header('Accept-Ranges', 'bytes')
        self.end_headers()
        if not body:
            return
        if fault is not None and fault.kind == 'stall':
            self.wfile.write(data[start:start + fault.after])
            self.wfile.flush()
            server.stalled.set()
            server.released.wait()
            self.close_connection = True
            return
        if fault is not None and fault.kind == 'drip':
            self.close_connection = True
            for i in range(start, len(data)):
                self.wfile.write(data[i:i + 1])
                self.wfile.flush()
                if server.released.wait(fault.after):
                    return
            return
        if fault is not None and fault.kind == 'drop':
            self.wfile.write(data[start:start + fault.after])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(data[start:])
        server.count_sent(name, len(data) - start)

    def _range(self, etag, size):
        """``(start, end)`` of the range asked, ``(None, size)`` if none."""
        match = self._RANGE.match(self.headers.get('Range', ''))
        if match is None:
            return None, size
        if_range = self.headers.get('If-Range')
        if if_range is not None and if_range != etag:
            return None, size
        last = match.group(2)
        return int(match.group(1)), min(size, int(last) + 1) if last \
            else size

    def _endless(self, fault, body):
        self.send_response(200)
        if fault.kind == 'lying_length':
            self.send_header('Content-Length', str(fault.after))
        self.send_header('Connection', 'close')
        self.end_headers()
        self.close_connection = True
        if not body:
            return
        chunk = b'\0' * 65536
        try:
            while True:
                self.wfile.write(chunk)
        except OSError:
            return

    def _status(self, status):
        self.send_response(status)
        self.send_header('Content-Length', '0')
        self.end_headers()


class _TLSServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def get_request(self):
        sock, address = self.socket.accept()
        if self.owner.ssl_context is not None:
            sock = self.owner.ssl_context.wrap_socket(
                sock, server_side=True, do_handshake_on_connect=False)
        return sock, address

    def handle_error(self, request, client_address):
        """Clients that fail TLS or hang up are part of the tests."""


class HttpsFileServer(fixtures.Fixture):
    """Serve the files of ``root`` over HTTPS on loopback.

    ``client_ca`` (a CertificateAuthority) makes the server require a client
    certificate it issued. ``tls=False`` serves plain HTTP. Faults are set
    per file name with :meth:`drop_after`, :meth:`stall_after`, :meth:`drip`,
    :meth:`fail_with`, :meth:`send_endless`, :meth:`lie_about_length` and
    :meth:`shift_ranges`; ``requests`` lists (method, name, Range header)
    of every request received, ``sent`` the body bytes sent per name.
    """

    def __init__(self, root, ca=None, client_ca=None, tls=True):
        super().__init__()
        self.root = root
        self.ca = ca
        self.client_ca = client_ca
        self.tls = tls

    def _setUp(self):
        self.requests = []
        self.sent = collections.Counter()
        self._faults = {}
        self._lock = threading.Lock()
        self.stalled = threading.Event()
        self.released = threading.Event()
        self.ssl_context = None
        if self.tls:
            self.ssl_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.ssl_context.load_cert_chain(*self.ca.issue('localhost'))
            if self.client_ca is not None:
                self.ssl_context.verify_mode = ssl.CERT_REQUIRED
                self.ssl_context.load_verify_locations(
                    self.client_ca.cert_file)
        self._server = _TLSServer((LOOPBACK, 0), _FileHandler)
        self._server.owner = self
        self.port = self._server.server_address[1]
        thread = threading.Thread(target=self._server.serve_forever,
                                  name='https-file-server', daemon=True)
        thread.start()
        self.addCleanup(thread.join, 10)
        self.addCleanup(self._server.server_close)
        self.addCleanup(self._server.shutdown)
        self.addCleanup(self.released.set)

    def url(self, name):
        return '%s://%s:%d/%s' % ('https' if self.tls else 'http', LOOPBACK,
                                  self.port, name)

    def drop_after(self, name, nbytes, times=1):
        """Close the connection after ``nbytes`` of the body, ``times``."""
        self._set_fault(name, _Fault('drop', nbytes, times))

    def stall_after(self, name, nbytes, times=1):
        """Send ``nbytes`` of the body, set ``stalled``, wait for ``released``.

        The connection stays open and silent meanwhile, as a server that
        hangs mid-transfer; once released, it closes.
        """
        self._set_fault(name, _Fault('stall', nbytes, times))

    def drip(self, name, interval, times=1):
        """Send the body a byte every ``interval`` seconds, until released."""
        self._set_fault(name, _Fault('drip', interval, times))

    def fail_with(self, name, status, times=None):
        """Answer ``status`` to ``times`` requests (all when None)."""
        self._set_fault(name, _Fault('status', status, times))

    def send_endless(self, name):
        """Answer with a body that never ends and no Content-Length."""
        self._set_fault(name, _Fault('endless'))

    def lie_about_length(self, name, length):
        """Announce ``length`` bytes, then send endless data."""
        self._set_fault(name, _Fault('lying_length', length))

    def shift_ranges(self, name, by):
        """Answer each range ``A-B`` with the bytes ``by`` later, as ``A-B``.

        A server (or a man in the middle) returning other bytes of the
        same object than those asked for.
        """
        self._set_fault(name, _Fault('shift', by))

    def count_sent(self, name, nbytes):
        with self._lock:
            self.sent[name] += nbytes

    def clear_faults(self):
        with self._lock:
            self._faults.clear()
            self.requests = []

    def record(self, method, name, range_header):
        with self._lock:
            self.requests.append((method, name, range_header))

    def take_fault(self, name):
        with self._lock:
            fault = self._faults.get(name)
            if fault is None or fault.remaining is None:
                return fault
            fault.remaining -= 1
            if fault.remaining <= 0:
                del self._faults[name]
            return fault

    def _set_fault(self, name, fault):
        with self._lock:
            self._faults[name] = fault
