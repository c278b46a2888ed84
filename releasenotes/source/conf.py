"""Sphinx configuration of the trove-upgrade release notes."""

extensions = ['openstackdocstheme', 'reno.sphinxext']
openstackdocs_repo_name = 'openstack/trove-upgrade'
openstackdocs_use_storyboard = False
openstackdocs_auto_name = False
openstackdocs_bug_project = 'trove-upgrade'
openstackdocs_bug_tag = 'releasenotes'
project = 'trove-upgrade Release Notes'
copyright = '2026, OpenStack Foundation'
source_suffix = '.rst'
master_doc = 'index'
exclude_patterns = []
html_theme = 'openstackdocs'
html_static_path = ['_static']
