"""The one place that knows this package's own version."""

import pbr.version

version_info = pbr.version.VersionInfo('trove-upgrade')
version_string = version_info.version_string
