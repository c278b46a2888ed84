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
