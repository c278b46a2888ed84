"""The OpenStackClient plugin hooks, as python-troveclient registers them.

OSC finds this module through the ``openstack.cli.extension`` entry point,
adds the global options from ``build_option_parser``, loads the commands of
the ``openstack.guest_upgrade.v<major>`` entry-point group and calls
``make_client`` the first time a command uses ``client_manager.
guest_upgrade``.

With ``--os-auth-type none`` the client speaks to an API running under
``noauth2`` and sends the admin identity headers it trusts.
"""

import logging

from osc_lib import utils
from oslo_utils import importutils

LOG = logging.getLogger(__name__)

API_NAME = 'guest_upgrade'
API_VERSION_OPTION = 'os_guest_upgrade_api_version'
DEFAULT_API_VERSION = '1'
API_VERSIONS = {
    '1': 'trove_upgrade.osc.client.Client',
}


def make_client(instance):
    """The guest-upgrade client on OSC's authenticated session."""
    # OSC loads the commands of the major version only, so a minor part
    # ("1.0") names the same client.
    major = instance._api_version[API_NAME].split('.')[0]
    client_class = importutils.import_class(API_VERSIONS[major])
    LOG.debug('Instantiating guest-upgrade client: %s', client_class)
    config = instance._cli_options.config
    return client_class(
        session=instance.session,
        interface=instance.interface,
        region_name=instance.region_name,
        endpoint_override=config.get('guest_upgrade_url'),
        noauth=config.get('auth_type') == 'none',
        service_type=config.get('guest_upgrade_service_type'))


def build_option_parser(parser):
    """Add the plugin's global options to the ``openstack`` parser."""
    parser.add_argument(
        '--os-guest-upgrade-api-version',
        metavar='<guest-upgrade-api-version>',
        default=utils.env('OS_GUEST_UPGRADE_API_VERSION',
                          default=DEFAULT_API_VERSION),
        help='Guest-upgrade API version, default=%s '
             '(Env: OS_GUEST_UPGRADE_API_VERSION)' % DEFAULT_API_VERSION)
    parser.add_argument(
        '--os-guest-upgrade-url',
        metavar='<url>',
        default=utils.env('OS_GUEST_UPGRADE_URL'),
        help='Guest-upgrade API endpoint, instead of the service catalog '
             'entry of type guest-upgrade: the API root, or '
             '<root>/v1.0/<project_id> (Env: OS_GUEST_UPGRADE_URL)')
    parser.add_argument(
        '--os-guest-upgrade-service-type',
        metavar='<service-type>',
        default=utils.env('OS_GUEST_UPGRADE_SERVICE_TYPE'),
        help='Catalog service type of the API: guest-upgrade (the '
             'standalone trove-upgrade-api) or database (trove-api with '
             'the trove-upgrade extension). Default: guest-upgrade when '
             'the catalog has it, else database '
             '(Env: OS_GUEST_UPGRADE_SERVICE_TYPE)')
    return parser
