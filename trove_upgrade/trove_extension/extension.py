"""The ExtensionDescriptor trove-api loads from ``trove.api.extensions``.

Trove wraps each resource's controller in its own ``wsgi.Resource``; the
deserializer and serializer given here leave the body and the response
alone, so trove-upgrade's handlers parse, validate and answer exactly as
on the standalone API (same JSON bodies and errors, same policy), and
every action of a resource goes to trove-upgrade's router, which also
answers 405 and 404 as the standalone API does.

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

# Collection -> member actions (name: method), as Trove's mapper takes them.
RESOURCES = {
    '{tenant_id}/mgmt/upgrades': {},
    '{tenant_id}/mgmt/agents': {},
    '{tenant_id}/mgmt/rollouts': {'pause': 'POST', 'resume': 'POST',
                                  'abort': 'POST'},
    TROVE_UPGRADE_ROUTE: {},
}


class PassThroughDeserializer:
    """Routing arguments only: the handlers read and validate the body."""

    def deserialize(self, request):
        args = dict(request.environ['wsgiorg.routing_args'][1])
        for name in ('controller', 'format'):
            args.pop(name, None)
        return args.pop('action', None), args, None


class PassThroughSerializer:
    """The handlers' response, as they made it."""

    def serialize(self, response, accept, action):
        return response


class DelegatingController:
    """Every action Trove's mapper names goes to trove-upgrade's router."""

    def __init__(self, application):
        self.application = application

    def validate_request(self, action, action_args):
        """Trove's hook; trove-upgrade's handlers validate for themselves."""

    def delegate(self, req, **routing_args):
        return webob.Request(req.environ).get_response(self.application)

    # The actions of routes' resource mapper, Trove's PATCH route, and the
    # rollouts' member actions.
    index = create = show = update = delete = new = edit = delegate
    pause = resume = abort = delegate


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
        return ('Guest-agent upgrades, agents and rollouts of '
                'trove-upgrade.')

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
            app.load(self.settings.config_files))
        return [
            extensions.BaseResourceExtension(
                collection, controller, member_actions=member_actions,
                deserializer=PassThroughDeserializer(),
                serializer=PassThroughSerializer())
            for collection, member_actions in RESOURCES.items()]
