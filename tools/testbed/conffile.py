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

"""Configuration files for the services that tests and tools start."""

import os

# Seconds an unused reply or fanout queue of a service lives on. The
# processes tests and tools start are killed, not stopped; with
# oslo.messaging's default (30 minutes) their queues piled up by the
# thousand on the shared broker.
TRANSIENT_QUEUES_TTL = 60


def kombu_url(transport_url):
    """oslo.messaging's ``rabbit://`` URL as kombu takes it.

    Several hosts (``rabbit://u:p@h1:p1,u:p@h2:p2/vhost``) become kombu's
    failover list (``amqp://u:p@h1:p1/vhost;amqp://u:p@h2:p2/vhost``),
    so a clean-up reaches whichever node of a cluster is still up.
    """
    hosts, slash, vhost = transport_url.split('://', 1)[1].partition('/')
    return ';'.join('amqp://%s%s%s' % (host, slash, vhost)
                    for host in hosts.split(','))


def _with_short_lived_queues(sections):
    """``sections``, with short-lived reply and fanout queues by default."""
    if 'transport_url' not in sections.get('DEFAULT', {}) and \
            'control_exchange' not in sections.get('DEFAULT', {}):
        return sections
    rabbit = dict(sections.get('oslo_messaging_rabbit', {}))
    rabbit.setdefault('rabbit_transient_queues_ttl', TRANSIENT_QUEUES_TTL)
    return dict(sections, oslo_messaging_rabbit=rabbit)


def write_conf(path, sections):
    """Write ``{section: {option: value}}`` as an oslo.config file.

    Lists become comma-separated values and dicts ``key:value`` pairs, as
    oslo.config's ListOpt and DictOpt read them. Missing directories are
    made. A service on the bus gets reply and fanout queues that expire
    :data:`TRANSIENT_QUEUES_TTL` seconds after their last use.
    """
    os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
    with open(path, 'w') as f:
        for section, options in _with_short_lived_queues(sections).items():
            f.write('[%s]\n' % section)
            for name, value in options.items():
                if isinstance(value, (list, tuple)):
                    value = ','.join(value)
                elif isinstance(value, dict):
                    value = ','.join('%s:%s' % kv for kv in value.items())
                f.write('%s = %s\n' % (name, value))
            f.write('\n')
