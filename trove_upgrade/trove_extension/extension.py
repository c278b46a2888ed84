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

"""The ExtensionDescriptor trove-api loads from ``trove.api.extensions``.

Trove wraps each resource's controller in its own ``wsgi.Resource``; the
deserializer and serializer given here leave the body and the response
alone, so trove-upgrade's handlers parse, validate and answer exactly as
on the standalone API (same JSON bodies and errors, same policy), and
every action of a resource, whatever Trove's mapper names it, goes to
trove-upgrade's router, which also answers 405 and 404 as the standalone
API does. The resources are the router's own routes (``app.resources``),
each with every standard method, so that a method a path does not serve
gets the router's 405 rather than Trove's 404.

Trove's own ``Mgmt`` extension routes ``POST {tenant_id}/mgmt/instances/
{instance_id}/upgrade`` to a controller that only casts to the guest.
Extensions are loaded in the order their packages happen to be found, and
the first route wins, so when enabled this extension drops that one
resource from ``Mgmt``'s list as the extensions load: the route is then
trove-upgrade's whatever the order.
"""

from oslo_config import cfg
from oslo_log import log as logging
from trove.common import extensions
from trove.extensions.routes import mgmt
import webob

from trove_upgrade.trove_extension import app
from trove_upgrade.trove_extension import opts

LOG = logging.getLogger(__name__)

TROVE_UPGRADE_ROUTE = '{tenant_id}/mgmt/instances/{instance_id}/upgrade'


class PassThroughDeserializer:
    """Routing arguments only: the handlers read and validate the body."""

    def deserialize(self, request):
        args = dict(request.environ['wsgiorg.routing_args'][1])
        for name in ('controller', 'format', 'action'):
            args.pop(name, None)
        # Whichever action Trove's mapper found, the router chooses.
        return 'delegate', args, None


class PassThroughSerializer:
    """The handlers' response, as they made it."""

    def serialize(self, response, accept, action):
        return response


class DelegatingController:
    """Every request Trove's mapper routes goes to trove-upgrade's router."""

    def __init__(self, application):
        self.application = application

    def validate_request(self, action, action_args):
        """Trove's hook; trove-upgrade's handlers validate for themselves."""

    def delegate(self, req, **routing_args):
        return webob.Request(req.environ).get_response(self.application)


def _drop_trove_upgrade_route():
    """Leave Trove's upgrade route to this extension; see the docstring."""
    original = mgmt.Mgmt.get_resources
    if getattr(original, 'trove_upgrade_route_dropped', False):
        return

    def get_resources(self):
        return [resource for resource in original(self)
                if resource.collection != TROVE_UPGRADE_ROUTE]

    get_resources.trove_upgrade_route_dropped = True
    mgmt.Mgmt.get_resources = get_resources


class TroveUpgradeExtension(extensions.ExtensionDescriptor):
    """The ``trove_upgrade`` extension: serves when trove.conf enables it."""

    def __init__(self):
        opts.register_opts(cfg.CONF)
        self.settings = cfg.CONF.trove_upgrade
        if self.settings.enabled:
            # Now, as extensions load, before any lists its resources.
            _drop_trove_upgrade_route()

    def get_name(self):
        return 'TroveUpgrade'

    def get_alias(self):
        return 'TroveUpgrade'

    def get_description(self):
        return ('Guest-agent upgrades, agents, rollouts, packages and '
                'desired versions of trove-upgrade.')

    def get_namespace(self):
        return 'https://docs.openstack.org/trove-upgrade/latest/'

    def get_updated(self):
        return '2026-12-01T00:00:00+00:00'

    def get_resources(self):
        if not self.settings.enabled:
            LOG.info('trove-upgrade API extension installed but not '
                     'enabled ([trove_upgrade] enabled = false).')
            return []
        controller = DelegatingController(
            app.load(self.settings.config_files, self.settings.config_dirs))
        return [
            extensions.BaseResourceExtension(
                collection, controller,
                collection_actions=collection_actions,
                deserializer=PassThroughDeserializer(),
                serializer=PassThroughSerializer())
            for collection, collection_actions in app.resources().items()]
