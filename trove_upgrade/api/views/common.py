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

"""What every resource's view shares: its links, pages and thresholds."""

import urllib.parse

MGMT_PATH = '/v1.0/%s/mgmt'


def url(req, tenant_id, *parts):
    """The URL of a management resource, ``parts`` after ``/mgmt``."""
    return '/'.join((req.application_url + MGMT_PATH % tenant_id,) + parts)


def links(req, tenant_id, *parts):
    return [{'rel': 'self', 'href': url(req, tenant_id, *parts)}]


def page(req, key, items, limit, marker_key):
    """A list body; a full page carries a ``next`` link to the next one."""
    body = {key: items}
    if items and len(items) == limit:
        params = [(name, value) for name, value in req.GET.items()
                  if name not in ('limit', 'marker')]
        params += [('limit', str(limit)), ('marker', items[-1][marker_key])]
        body['links'] = [{
            'rel': 'next',
            'href': req.path_url + '?' + urllib.parse.urlencode(params),
        }]
    return body


def threshold(value, kind):
    """A rollout's or a desired version's count, or its percent "10%"."""
    return '%d%%' % value if kind == 'percent' else value
