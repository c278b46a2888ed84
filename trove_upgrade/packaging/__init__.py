"""Signed, encrypted upgrade packages: format, build and verification.

A package is an encrypted payload plus a signed manifest that travels beside
it as ``<location>.manifest``. Operators produce both with the
``trove-upgrade-package`` command (:mod:`trove_upgrade.packaging.build`); the
agent checks them with :mod:`trove_upgrade.packaging.verify`, which documents
its single entry point. ``doc/source/reference/package-format.rst`` specifies
the format and ``threat-model.rst`` the attacks it defeats.
"""
