"""The request context that travels from the API through RPC to the agents."""

from oslo_context import context


class RequestContext(context.RequestContext):
    """oslo.context's context; its request_id follows a request end to end."""


def get_admin_context(request_id=None):
    """A context for work the services start themselves (periodic tasks)."""
    return RequestContext(is_admin=True, request_id=request_id,
                          overwrite=False)
