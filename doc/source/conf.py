"""Sphinx configuration of the trove-upgrade documentation."""

extensions = [
    'openstackdocstheme',
    'oslo_config.sphinxext',
    'oslo_config.sphinxconfiggen',
    'oslo_policy.sphinxext',
    'oslo_policy.sphinxpolicygen',
]

config_generator_config_file = [
    ('../../tools/config/trove-upgrade-config-generator.conf',
     '_static/trove-upgrade'),
]
policy_generator_config_file = [
    ('../../tools/config/trove-upgrade-policy-generator.conf',
     '_static/trove-upgrade'),
]

openstackdocs_repo_name = 'openstack/trove-upgrade'
openstackdocs_use_storyboard = False
openstackdocs_auto_name = False
openstackdocs_bug_project = 'trove-upgrade'
openstackdocs_bug_tag = 'doc'

project = 'trove-upgrade'
copyright = '2026, OpenStack Foundation'
source_suffix = '.rst'
master_doc = 'index'
exclude_patterns = []
pygments_style = 'native'
html_theme = 'openstackdocs'
html_static_path = ['_static']
