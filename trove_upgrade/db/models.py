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

"""SQLAlchemy models of the control plane's tables.

The migrations in ``migrations/versions`` create the same schema; a
functional test compares the two on every supported database.
"""

import datetime

from oslo_db.sqlalchemy import types as db_types
import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy import orm

# MySQL/MariaDB DATETIME keeps whole seconds unless asked for more; events
# recorded within one second would lose their order.
DateTime = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mysql',
                                      'mariadb')

# MySQL/MariaDB TEXT holds 64 KiB, less than an agent's error message or a
# request's metadata may need once JSON-escaped; MEDIUMTEXT holds 16 MiB.
Text = sa.Text().with_variant(mysql.MEDIUMTEXT(), 'mysql', 'mariadb')

TABLE_ARGS = {'mysql_engine': 'InnoDB', 'mysql_charset': 'utf8mb4'}


class JSONObject(db_types.JsonEncodedDict):
    """A dict stored as JSON in a ``Text`` column."""

    cache_ok = True

    def __init__(self):
        super().__init__()
        self.impl = Text


class Base(orm.DeclarativeBase):
    """Declarative base of every control-plane table."""


class Upgrade(Base):
    """One requested upgrade of one instance's guest agent."""

    __tablename__ = 'upgrades'
    __table_args__ = (
        sa.Index('upgrades_instance_id_idx', 'instance_id'),
        sa.Index('upgrades_status_idx', 'status'),
        sa.Index('upgrades_rollout_id_idx', 'rollout_id'),
        sa.Index('upgrades_created_at_idx', 'created_at'),
        TABLE_ARGS,
    )

    id: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    instance_id: orm.Mapped[str] = orm.mapped_column(sa.String(36))
    instance_version: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    from_version: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    strategy: orm.Mapped[str] = orm.mapped_column(sa.String(64))
    location: orm.Mapped[str] = orm.mapped_column(sa.String(2048))
    # "metadata" is reserved by the declarative base, so the attribute has
    # another name than its column.
    upgrade_metadata: orm.Mapped[dict] = orm.mapped_column(
        'metadata', JSONObject())
    allow_downgrade: orm.Mapped[bool] = orm.mapped_column(sa.Boolean)
    status: orm.Mapped[str] = orm.mapped_column(sa.String(32))
    status_detail: orm.Mapped[str | None] = orm.mapped_column(Text)
    project_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    user_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    request_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    rollout_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(36))
    created_at: orm.Mapped[datetime.datetime] = orm.mapped_column(DateTime)
    updated_at: orm.Mapped[datetime.datetime | None] = orm.mapped_column(
        DateTime)
    finished_at: orm.Mapped[datetime.datetime | None] = orm.mapped_column(
        DateTime)
    # DEFERRED by the control plane and not sent yet (trove_instances).
    held: orm.Mapped[bool] = orm.mapped_column(
        sa.Boolean, nullable=False, default=False,
        server_default=sa.false())
    # When the conductor casts the upgrade to its agent again unless the
    # agent has claimed it by then (trove_upgrade.services.resends); NULL while
    # there is nothing to send again: never sent, held, or in the agent's
    # hands. Read only while the upgrade is unclaimed.
    resend_at: orm.Mapped[datetime.datetime | None] = orm.mapped_column(
        DateTime)
    # Casts of the upgrade to its agent, made or begun.
    send_count: orm.Mapped[int] = orm.mapped_column(
        sa.Integer, nullable=False, default=0, server_default='0')
    # The manifest the agent must get (rpc_interface's expected_manifest):
    # its SHA-256 and signed package name, either NULL when not bound.
    expected_manifest_sha256: orm.Mapped[str | None] = orm.mapped_column(
        sa.String(64))
    expected_package: orm.Mapped[str | None] = orm.mapped_column(
        sa.String(255))


class UpgradeEvent(Base):
    """One recorded state change of an upgrade: its audit trail."""

    __tablename__ = 'upgrade_events'
    __table_args__ = (
        sa.Index('upgrade_events_upgrade_id_idx', 'upgrade_id'),
        TABLE_ARGS,
    )

    id: orm.Mapped[int] = orm.mapped_column(
        sa.Integer, primary_key=True, autoincrement=True)
    upgrade_id: orm.Mapped[str] = orm.mapped_column(
        sa.String(36),
        sa.ForeignKey('upgrades.id', name='upgrade_events_upgrade_id_fkey'))
    created_at: orm.Mapped[datetime.datetime] = orm.mapped_column(DateTime)
    source: orm.Mapped[str] = orm.mapped_column(sa.String(32))
    from_state: orm.Mapped[str | None] = orm.mapped_column(sa.String(32))
    to_state: orm.Mapped[str] = orm.mapped_column(sa.String(32))
    detail: orm.Mapped[str | None] = orm.mapped_column(Text)
    request_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))


class Agent(Base):
    """The last registration or heartbeat of one instance's agent."""

    __tablename__ = 'agents'
    __table_args__ = (TABLE_ARGS,)

    instance_id: orm.Mapped[str] = orm.mapped_column(
        sa.String(36), primary_key=True)
    agent_version: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    guest_version: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    rpc_api_version: orm.Mapped[str | None] = orm.mapped_column(
        sa.String(16))
    state: orm.Mapped[str | None] = orm.mapped_column(sa.String(32))
    labels: orm.Mapped[dict] = orm.mapped_column(JSONObject())
    host: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    created_at: orm.Mapped[datetime.datetime] = orm.mapped_column(DateTime)
    updated_at: orm.Mapped[datetime.datetime | None] = orm.mapped_column(
        DateTime)
    last_heartbeat_at: orm.Mapped[datetime.datetime | None] = (
        orm.mapped_column(DateTime))


class Rollout(Base):
    """A desired version for a selected group of agents.

    ``lease_owner`` and ``lease_until`` name the conductor whose reconciler
    acts on it for now, so that one conductor at a time counts what is in
    flight and dispatches.
    """

    __tablename__ = 'rollouts'
    __table_args__ = (
        sa.Index('rollouts_status_idx', 'status'),
        TABLE_ARGS,
    )

    id: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    instance_version: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    strategy: orm.Mapped[str] = orm.mapped_column(sa.String(64))
    location: orm.Mapped[str] = orm.mapped_column(sa.String(2048))
    selector: orm.Mapped[dict] = orm.mapped_column(JSONObject())
    canary: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    max_in_flight: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    max_in_flight_kind: orm.Mapped[str] = orm.mapped_column(sa.String(16))
    max_failures: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    max_failures_kind: orm.Mapped[str] = orm.mapped_column(sa.String(16))
    per_agent_retries: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    agent_deadline: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    start_at: orm.Mapped[datetime.datetime | None] = orm.mapped_column(
        DateTime)
    status: orm.Mapped[str] = orm.mapped_column(sa.String(32))
    status_detail: orm.Mapped[str | None] = orm.mapped_column(Text)
    failures_acknowledged: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    # Whether Trove's replication sets and clusters order the dispatches,
    # and whether a failed member holds the rest of its set (topology.py).
    order_by_topology: orm.Mapped[bool] = orm.mapped_column(
        sa.Boolean, nullable=False, default=True, server_default=sa.true())
    hold_set_on_failure: orm.Mapped[bool] = orm.mapped_column(
        sa.Boolean, nullable=False, default=True, server_default=sa.true())
    # The manifest each of its upgrades expects, as an upgrade's.
    expected_manifest_sha256: orm.Mapped[str | None] = orm.mapped_column(
        sa.String(64))
    expected_package: orm.Mapped[str | None] = orm.mapped_column(
        sa.String(255))
    lease_owner: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    lease_until: orm.Mapped[datetime.datetime | None] = orm.mapped_column(
        DateTime)
    project_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    user_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    created_at: orm.Mapped[datetime.datetime] = orm.mapped_column(DateTime)
    updated_at: orm.Mapped[datetime.datetime | None] = orm.mapped_column(
        DateTime)
    finished_at: orm.Mapped[datetime.datetime | None] = orm.mapped_column(
        DateTime)


class RolloutDispatch(Base):
    """One attempt of a rollout at one agent: the upgrade it created.

    The unique (rollout, instance, attempt) is the database's guard against
    double dispatch: of two conductors that decide on the same attempt,
    only the first insert succeeds, in the transaction that creates the
    upgrade.
    """

    __tablename__ = 'rollout_dispatches'
    __table_args__ = (
        sa.UniqueConstraint(
            'rollout_id', 'instance_id', 'attempt',
            name='uniq_rollout_dispatches0rollout_id0instance_id0attempt'),
        sa.Index('rollout_dispatches_instance_id_idx', 'instance_id'),
        TABLE_ARGS,
    )

    id: orm.Mapped[int] = orm.mapped_column(
        sa.Integer, primary_key=True, autoincrement=True)
    rollout_id: orm.Mapped[str] = orm.mapped_column(
        sa.String(36),
        sa.ForeignKey('rollouts.id',
                      name='rollout_dispatches_rollout_id_fkey'))
    instance_id: orm.Mapped[str] = orm.mapped_column(sa.String(36))
    attempt: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    canary: orm.Mapped[bool] = orm.mapped_column(sa.Boolean)
    upgrade_id: orm.Mapped[str] = orm.mapped_column(
        sa.String(36),
        sa.ForeignKey('upgrades.id',
                      name='rollout_dispatches_upgrade_id_fkey'))
    created_at: orm.Mapped[datetime.datetime] = orm.mapped_column(DateTime)


class InstanceKey(Base):
    """A key sealing the RPC messages of one instance (see ``sealing``).

    The newest unexpired key of an instance seals; all its unexpired keys
    open. ``wrapped`` says whether ``key_material`` is encrypted with the
    ``[conductor] instance_key_master_key_file`` key.
    """

    __tablename__ = 'instance_keys'
    __table_args__ = (
        sa.Index('instance_keys_instance_id_idx', 'instance_id'),
        TABLE_ARGS)

    key_id: orm.Mapped[str] = orm.mapped_column(
        sa.String(32), primary_key=True)
    instance_id: orm.Mapped[str] = orm.mapped_column(sa.String(36))
    key_material: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    wrapped: orm.Mapped[bool] = orm.mapped_column(sa.Boolean)
    created_at: orm.Mapped[datetime.datetime] = orm.mapped_column(DateTime)
    expires_at: orm.Mapped[datetime.datetime | None] = orm.mapped_column(
        DateTime)


class Package(Base):
    """A registered, verified package: a version that can be deployed.

    The manifest's facts are copied at registration, after the control
    plane verified the signed manifest, so a deploy by reference needs no
    fetch. ``state`` is active, deprecated or retired.
    """

    __tablename__ = 'packages'
    __table_args__ = (
        sa.UniqueConstraint('name', 'version',
                            name='uniq_packages0name0version'),
        TABLE_ARGS,
    )

    id: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    version: orm.Mapped[str] = orm.mapped_column(sa.String(64))
    strategy: orm.Mapped[str] = orm.mapped_column(sa.String(64))
    location: orm.Mapped[str] = orm.mapped_column(sa.String(2048))
    state: orm.Mapped[str] = orm.mapped_column(sa.String(32))
    size: orm.Mapped[int] = orm.mapped_column(sa.BigInteger)
    sha256: orm.Mapped[str] = orm.mapped_column(sa.String(64))
    min_upgrade_from: orm.Mapped[str | None] = orm.mapped_column(
        sa.String(64))
    signer_key_ids: orm.Mapped[str] = orm.mapped_column(sa.String(1024))
    manifest_created_at: orm.Mapped[datetime.datetime] = orm.mapped_column(
        DateTime)
    manifest_expires_at: orm.Mapped[datetime.datetime] = orm.mapped_column(
        DateTime)
    # The SHA-256 of the manifest file verified at registration, and the
    # package name it signs (NULL when it names none): what every upgrade
    # to this package expects. NULL for packages registered before.
    manifest_sha256: orm.Mapped[str | None] = orm.mapped_column(
        sa.String(64))
    manifest_package: orm.Mapped[str | None] = orm.mapped_column(
        sa.String(255))
    project_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    user_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    created_at: orm.Mapped[datetime.datetime] = orm.mapped_column(DateTime)
    updated_at: orm.Mapped[datetime.datetime | None] = orm.mapped_column(
        DateTime)


class DesiredVersion(Base):
    """A standing declaration: the agents a selector picks run a version.

    Unlike a rollout it never completes; the reconciler keeps converging
    agents that register later or come back on an older version, with
    the rollout's canary, in-flight and failure rules.
    """

    __tablename__ = 'desired_versions'
    __table_args__ = (TABLE_ARGS,)

    id: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    package_name: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    version: orm.Mapped[str] = orm.mapped_column(sa.String(64))
    selector: orm.Mapped[dict] = orm.mapped_column(JSONObject())
    canary: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    max_in_flight: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    max_in_flight_kind: orm.Mapped[str] = orm.mapped_column(sa.String(16))
    max_failures: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    max_failures_kind: orm.Mapped[str] = orm.mapped_column(sa.String(16))
    per_agent_retries: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    agent_deadline: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    status: orm.Mapped[str] = orm.mapped_column(sa.String(32))
    status_detail: orm.Mapped[str | None] = orm.mapped_column(Text)
    failures_acknowledged: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    lease_owner: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    lease_until: orm.Mapped[datetime.datetime | None] = orm.mapped_column(
        DateTime)
    project_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    user_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    created_at: orm.Mapped[datetime.datetime] = orm.mapped_column(DateTime)
    updated_at: orm.Mapped[datetime.datetime | None] = orm.mapped_column(
        DateTime)


class DesiredVersionEvent(Base):
    """Who created, changed, paused or resumed a desired version, and why.

    Kept after the desired version is deleted: the audit trail outlives
    what it audits.
    """

    __tablename__ = 'desired_version_events'
    __table_args__ = (
        sa.Index('desired_version_events_desired_version_id_idx',
                 'desired_version_id'),
        TABLE_ARGS,
    )

    id: orm.Mapped[int] = orm.mapped_column(
        sa.Integer, primary_key=True, autoincrement=True)
    desired_version_id: orm.Mapped[str] = orm.mapped_column(sa.String(36))
    created_at: orm.Mapped[datetime.datetime] = orm.mapped_column(DateTime)
    action: orm.Mapped[str] = orm.mapped_column(sa.String(32))
    detail: orm.Mapped[str | None] = orm.mapped_column(Text)
    source: orm.Mapped[str] = orm.mapped_column(sa.String(32))
    user_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    project_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    request_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))


class DesiredVersionDispatch(Base):
    """One attempt of a desired version at one agent: its upgrade.

    ``round`` counts the agent's earlier successful rounds: an agent
    rebuilt onto an old version after it converged starts a new round, so
    its attempts are counted afresh. The unique key guards against double
    dispatch as the rollouts' does.
    """

    __tablename__ = 'desired_version_dispatches'
    __table_args__ = (
        sa.UniqueConstraint(
            'desired_version_id', 'instance_id', 'round', 'attempt',
            name='uniq_desired_version_dispatches0dv0instance0round0attempt'),
        sa.Index('desired_version_dispatches_instance_id_idx',
                 'instance_id'),
        TABLE_ARGS,
    )

    id: orm.Mapped[int] = orm.mapped_column(
        sa.Integer, primary_key=True, autoincrement=True)
    desired_version_id: orm.Mapped[str] = orm.mapped_column(
        sa.String(36),
        sa.ForeignKey('desired_versions.id',
                      name='desired_version_dispatches_dv_id_fkey'))
    instance_id: orm.Mapped[str] = orm.mapped_column(sa.String(36))
    round: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    attempt: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    canary: orm.Mapped[bool] = orm.mapped_column(sa.Boolean)
    upgrade_id: orm.Mapped[str] = orm.mapped_column(
        sa.String(36),
        sa.ForeignKey('upgrades.id',
                      name='desired_version_dispatches_upgrade_id_fkey'))
    created_at: orm.Mapped[datetime.datetime] = orm.mapped_column(DateTime)
