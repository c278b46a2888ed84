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

"""Create a Trove instance with Trove's own code, as Trove does.

Run by the python of a Trove virtualenv, as a process of its own: Trove
runs on eventlet and is never imported into trove-upgrade's tests. With
the trove.conf given (Trove's defaults but for ``[database]``), it does
what ``trove.instance.models.Instance.create`` and the task manager do
for one instance: ``DBInstance.create`` in the caller's project (which,
with Trove's default ``enable_secure_rpc_messaging``, generates the
instance's RPC key and stores it encrypted), its ``InstanceServiceStatus``,
then ``get_injected_files`` as the task manager calls it when it boots
the guest, and the task ``NONE`` Trove sets once the guest is up.

Prints one JSON object: the instance's ``id`` and the injected ``files``
(path on the guest -> content), ``guest_info.conf`` among them.

Usage: python create_instance.py TROVE_CONF PROJECT_ID NAME
       DATASTORE_VERSION_ID [INSTANCE_ID]
"""

import json
import sys


def main(conf_file, project_id, name, datastore_version_id,
         instance_id=None):
    from trove.common import cfg
    from trove.common import context
    from trove import db
    from trove.instance import models
    from trove.instance import service_status
    from trove.instance import tasks
    from trove.taskmanager import models as tm_models

    conf = cfg.CONF
    conf(['--config-file', conf_file], project='trove',
         default_config_files=[])
    db.get_db_api().configure_db()
    ctx = context.TroveContext(project_id=project_id, user_id='customer')
    values = dict(name=name, flavor_id='1', tenant_id=ctx.project_id,
                  volume_size=1, datastore_version_id=datastore_version_id,
                  task_status=tasks.InstanceTasks.BUILDING,
                  region_id=conf.service_credentials.region_name)
    if instance_id:
        # Trove generates the id; a test may fix it beforehand.
        values['id'] = instance_id
    db_info = models.DBInstance.create(**values)
    status = models.InstanceServiceStatus.create(
        instance_id=db_info.id,
        status=service_status.ServiceStatuses.NEW)
    # As FreshInstanceTasks.load makes it (load_instance), without Nova.
    instance = tm_models.FreshInstanceTasks(ctx, db_info, None, status)
    files = instance.get_injected_files(instance.datastore.name,
                                        instance.datastore_version.name)
    db_info.set_task_status(tasks.InstanceTasks.NONE)
    db_info.save()
    print(json.dumps({'id': db_info.id, 'files': files}))


if __name__ == '__main__':
    main(*sys.argv[1:])
