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

"""A small client for the guest-upgrade management API.

It rides on the keystoneauth session that OpenStackClient already built, so
the token, TLS settings, timeouts and the service catalog all come from the
``openstack`` command line; this module only knows the API's URLs and how to
turn its JSON errors into one readable line.
"""

import re
from urllib import parse

from keystoneauth1 import adapter
from keystoneauth1 import exceptions as ksa_exc
from osc_lib import exceptions

from trove_upgrade.common import exception as package_exc

# The service type of the standalone API (trove-upgrade-api) in the
# catalog, and Trove's own, whose trove-api serves the same API when its
# trove-upgrade extension is enabled. Without --os-guest-upgrade-service-type
# the client takes the first of them the catalog has.
SERVICE_TYPE = 'guest-upgrade'
TROVE_SERVICE_TYPE = 'database'
SERVICE_TYPES = (SERVICE_TYPE, TROVE_SERVICE_TYPE)

API_PREFIX = 'v1.0'

# A Trove-style endpoint already names the project: .../v1.0/<project>.
_PROJECT_SCOPED = re.compile(r'/%s/([^/]+)$' % re.escape(API_PREFIX))

# The identity an API under noauth2 trusts, sent only with
# ``--os-auth-type none``: the management API is admin-only.
NOAUTH_USER_ID = 'admin'
NOAUTH_ROLES = 'admin'


def _text(value):
    """``value`` as text; CommandError naming it when it is not UTF-8.

    The shell passes bytes that are not UTF-8 as they are: such an
    argument ended the command with the codec's message, naming nothing.
    """
    text = str(value)
    try:
        text.encode('utf-8')
    except UnicodeEncodeError:
        raise exceptions.CommandError(
            'The argument %s is not UTF-8 text.' % package_exc.quoted(text))
    return text


def _api_url(url):
    """``--os-guest-upgrade-url``, or CommandError naming it and why.

    A value urllib cannot split ended the command with its terse message
    (``Invalid IPv6 URL``), and one without a scheme or a host, or with a
    port out of range, with a request error about a URL the client built.
    """
    option = '--os-guest-upgrade-url (or OS_GUEST_UPGRADE_URL)'
    try:
        url.encode('utf-8')
        parts = parse.urlsplit(url)
        # Raises ValueError for a port that is no number or out of range.
        parts.port
    except UnicodeEncodeError:
        reason = 'it is not UTF-8 text'
    except ValueError as exc:
        reason = str(exc)
    else:
        if parts.scheme.lower() not in ('http', 'https'):
            reason = 'it must start with http:// or https://'
        elif not parts.hostname:
            reason = 'it names no host'
        elif re.search(r'\s', parts.netloc):
            reason = 'its host holds white space'
        else:
            return url
    raise exceptions.CommandError('%s %s is not a URL of the API: %s.'
                                  % (option, package_exc.quoted(url),
                                     reason))


def _quote(path_part):
    return parse.quote(_text(path_part), safe='')


class APIError(exceptions.CommandError):
    """The API refused a request; the message is the API's own."""

    def __init__(self, status_code, message, request_id=None):
        self.status_code = status_code
        self.request_id = request_id
        text = '%s (HTTP %s)' % (message, status_code)
        if request_id:
            text += ' (Request-ID: %s)' % request_id
        super().__init__(text)


def _error_from(response):
    """The APIError for an error response, with its most specific message.

    The API answers ``{"errors": [{"title", "detail", "request_id"}]}``;
    keystonemiddleware and older OpenStack services answer
    ``{"<name>": {"message": ...}}``. Anything else (a proxy's HTML page)
    falls back to the HTTP reason.
    """
    request_id = response.headers.get('x-openstack-request-id')
    message = None
    try:
        body = response.json()
    # RecursionError: a body nested thousands deep.
    except (ValueError, RecursionError):
        body = None
    if isinstance(body, dict):
        errors = [e for e in body.get('errors') or () if isinstance(e, dict)]
        if errors:
            message = '; '.join(str(e.get('detail') or e.get('title'))
                                for e in errors)
            request_id = request_id or errors[0].get('request_id')
        else:
            message = next((str(v['message']) for v in body.values()
                            if isinstance(v, dict) and v.get('message')),
                           None)
    message = message or response.reason or 'HTTP error'
    return APIError(response.status_code, message, request_id)


class Client:
    """The ``/v1.0/{project}/mgmt`` calls, one method each."""

    def __init__(self, session, interface=None, region_name=None,
                 endpoint_override=None, noauth=False, service_type=None):
        if endpoint_override is not None:
            endpoint_override = _api_url(endpoint_override)
        self._service_types = (service_type,) if service_type else (
            SERVICE_TYPES)
        self._adapters = [adapter.Adapter(
            session, service_type=name, interface=interface,
            region_name=region_name, endpoint_override=endpoint_override)
            for name in self._service_types]
        self._adapter = self._adapters[0]
        self._noauth = noauth
        self._mgmt_url = None
        self._headers = {'Accept': 'application/json'}

    def _mgmt(self):
        if self._mgmt_url is None:
            self._mgmt_url = self._find_mgmt_url()
        return self._mgmt_url

    def _find_endpoint(self):
        """The first endpoint found, trying the service types in order."""
        for candidate in self._adapters:
            try:
                endpoint = candidate.get_endpoint()
            except ksa_exc.EndpointNotFound:
                endpoint = None
            if endpoint:
                self._adapter = candidate
                return endpoint
        raise exceptions.CommandError(
            'No %(interface)s endpoint of service type %(types)s in the '
            'service catalog; register one or pass '
            '--os-guest-upgrade-url.' % {
                'interface': self._adapter.interface or 'public',
                'types': ' or '.join(self._service_types)})

    def _find_mgmt_url(self):
        endpoint = self._find_endpoint()
        endpoint = endpoint.rstrip('/')
        scoped = _PROJECT_SCOPED.search(endpoint)
        if scoped:
            project_id = parse.unquote(scoped.group(1))
        else:
            project_id = None if self._noauth else (
                self._adapter.get_project_id())
            if not project_id:
                raise exceptions.CommandError(
                    'The credentials name no project, so the API path '
                    'cannot be built: use a project-scoped token or give '
                    '--os-guest-upgrade-url as '
                    '<root>/%s/<project_id>.' % API_PREFIX)
            endpoint = '%s/%s/%s' % (endpoint, API_PREFIX,
                                     _quote(project_id))
        if self._noauth:
            self._headers.update({'X-User-Id': NOAUTH_USER_ID,
                                  'X-Project-Id': project_id,
                                  'X-Roles': NOAUTH_ROLES})
        return endpoint + '/mgmt'

    def _request(self, method, path, **kwargs):
        url = self._mgmt() + path
        if 'params' in kwargs:
            kwargs['params'] = {name: _text(value)
                                for name, value in kwargs['params'].items()}
        try:
            response = self._adapter.request(
                url, method, raise_exc=False, headers=self._headers,
                **kwargs)
        except ksa_exc.ConnectionError as exc:
            raise exceptions.CommandError(
                'Cannot reach the guest-upgrade API: %s' % exc)
        if response.status_code >= 400:
            raise _error_from(response)
        if not response.content:
            return {}
        try:
            return response.json()
        except ValueError:
            raise exceptions.CommandError(
                'The guest-upgrade API answered %s %s with a body that is '
                'not JSON.' % (method, url))
        except RecursionError:
            raise exceptions.CommandError(
                'The guest-upgrade API answered %s %s with JSON nested too '
                'deeply to read.' % (method, url))

    def _list(self, path, key, marker_key, params, limit, marker):
        """One page when ``limit`` is given, otherwise every page."""
        params = {k: v for k, v in params.items() if v is not None}
        if limit is not None:
            params['limit'] = limit
        items = []
        while True:
            if marker is not None:
                params['marker'] = marker
            body = self._request('GET', path, params=params)
            items.extend(body[key])
            has_next = any(link.get('rel') == 'next'
                           for link in body.get('links') or ())
            if limit is not None or not has_next or not body[key]:
                return items
            marker = body[key][-1][marker_key]

    def create_upgrade(self, instance_id, instance_version, strategy,
                       location, metadata=None, allow_downgrade=None,
                       package=None, expected_manifest=None):
        """Ask for an upgrade; return the recorded upgrade.

        ``package`` names a registered package instead of ``strategy``
        and ``location`` (None then). ``expected_manifest``
        (``{'sha256': ..., 'package': ...}``) binds the upgrade to one
        manifest.
        """
        body = {'instance_id': instance_id,
                'instance_version': instance_version}
        for name, value in (('strategy', strategy), ('location', location),
                            ('metadata', metadata),
                            ('allow_downgrade', allow_downgrade),
                            ('package', package),
                            ('expected_manifest', expected_manifest)):
            if value is not None:
                body[name] = value
        return self._request('POST', '/upgrades', json=body)['upgrade']

    def list_upgrades(self, instance_id=None, status=None,
                      instance_version=None, limit=None, marker=None):
        """Upgrades, newest first, filtered by what is given."""
        return self._list(
            '/upgrades', 'upgrades', 'id',
            {'instance_id': instance_id, 'status': status,
             'instance_version': instance_version}, limit, marker)

    def get_upgrade(self, upgrade_id):
        """One upgrade with its event history."""
        path = '/upgrades/%s' % _quote(upgrade_id)
        return self._request('GET', path)['upgrade']

    def cancel_upgrade(self, upgrade_id):
        """Cancel an upgrade the agent has not started; return it."""
        path = '/upgrades/%s' % _quote(upgrade_id)
        return self._request('DELETE', path)['upgrade']

    def list_agents(self, guest_version=None, state=None,
                    rpc_api_version=None, limit=None, marker=None):
        """Registered agents, by instance ID."""
        return self._list(
            '/agents', 'agents', 'instance_id',
            {'guest_version': guest_version, 'state': state,
             'rpc_api_version': rpc_api_version}, limit, marker)

    def get_agent(self, instance_id):
        """The agent of one instance."""
        path = '/agents/%s' % _quote(instance_id)
        return self._request('GET', path)['agent']

    def delete_agent(self, instance_id):
        """Forget the agent of an instance; a live one registers again."""
        self._request('DELETE', '/agents/%s' % _quote(instance_id))

    def create_rollout(self, body):
        """Create a rollout from the API's request body; return it."""
        return self._request('POST', '/rollouts',
                             json={'rollout': body})['rollout']

    def list_rollouts(self, status=None, name=None, limit=None,
                      marker=None):
        """Rollouts, newest first, filtered by what is given."""
        return self._list('/rollouts', 'rollouts', 'id',
                          {'status': status, 'name': name}, limit, marker)

    def get_rollout(self, rollout_id):
        """One rollout with its counters and each agent's state."""
        return self._request('GET', '/rollouts/%s' % _quote(rollout_id))[
            'rollout']

    def act_on_rollout(self, rollout_id, action):
        """Pause, resume or abort a rollout; return it."""
        return self._request('POST', '/rollouts/%s/%s' % (
            _quote(rollout_id), _quote(action)))['rollout']

    def delete_rollout(self, rollout_id):
        """Delete a finished rollout."""
        self._request('DELETE', '/rollouts/%s' % _quote(rollout_id))

    def create_package(self, name, version, strategy, location):
        """Register a package; the API verifies its manifest first."""
        return self._request('POST', '/packages', json={'package': {
            'name': name, 'version': version, 'strategy': strategy,
            'location': location}})['package']

    def list_packages(self, name=None, version=None, state=None):
        """Packages; ``version`` is a version, a wildcard or a range."""
        params = {k: v for k, v in (('name', name), ('version', version),
                                    ('state', state)) if v is not None}
        return self._request('GET', '/packages', params=params)['packages']

    def get_package(self, package_id):
        """One package, with what uses it."""
        return self._request('GET', '/packages/%s' % _quote(package_id))[
            'package']

    def set_package_state(self, package_id, state):
        """Mark a package active, deprecated or retired; return it."""
        return self._request('PATCH', '/packages/%s' % _quote(package_id),
                             json={'package': {'state': state}})['package']

    def delete_package(self, package_id):
        """Delete a package nothing uses."""
        self._request('DELETE', '/packages/%s' % _quote(package_id))

    def package_fleet(self, limit=None, marker=None):
        """Per version, oldest first: agents running it, targeted, failed."""
        return self._list('/packages/fleet', 'versions', 'version', {},
                          limit, marker)

    def create_desired_version(self, body):
        """Declare a desired version from the API's request body."""
        return self._request('POST', '/desired-versions', json={
            'desired_version': body})['desired_version']

    def list_desired_versions(self, status=None, name=None):
        """Desired versions, oldest (first in precedence) first."""
        params = {k: v for k, v in (('status', status), ('name', name))
                  if v is not None}
        return self._request('GET', '/desired-versions', params=params)[
            'desired_versions']

    def get_desired_version(self, desired_id):
        return self._request('GET', '/desired-versions/%s' % _quote(
            desired_id))['desired_version']

    def update_desired_version(self, desired_id, body):
        return self._request('PATCH', '/desired-versions/%s' % _quote(
            desired_id), json={'desired_version': body})['desired_version']

    def act_on_desired_version(self, desired_id, action):
        """Pause or resume a desired version; return it."""
        return self._request('POST', '/desired-versions/%s/%s' % (
            _quote(desired_id), _quote(action)))['desired_version']

    def delete_desired_version(self, desired_id):
        self._request('DELETE', '/desired-versions/%s' % _quote(desired_id))

    def list_targets(self, instance_id=None, limit=None, marker=None):
        """Each selected instance's target, owner and why, by instance."""
        return self._list('/targets', 'targets', 'instance_id',
                          {'instance_id': instance_id}, limit, marker)
