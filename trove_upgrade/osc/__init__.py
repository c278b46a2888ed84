"""The ``openstack database upgrade|agent`` commands (an OSC plugin)."""
