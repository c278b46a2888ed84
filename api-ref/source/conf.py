"""Sphinx configuration of the trove-upgrade API reference."""

extensions = [
    'os_api_ref',
    'openstackdocstheme',
]

openstackdocs_repo_name = 'openstack/trove-upgrade'
openstackdocs_use_storyboard = False
openstackdocs_auto_name = False
openstackdocs_bug_project = 'trove-upgrade'
openstackdocs_bug_tag = 'api-ref'

project = 'trove-upgrade API Reference'
copyright = '2026, OpenStack Foundation'
source_suffix = '.rst'
master_doc = 'index'
pygments_style = 'native'
html_theme = 'openstackdocs'
html_theme_options = {
    'sidebar_mode': 'toc',
}
