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

"""Hot write statements run as their compiled text.

``Connection.execute`` of a Core statement looks its compiled form up in
the cache and builds an execution context around it at every call, work
of the same order as the driver's own for a short UPDATE or INSERT such
as a state report's. The conductor's report writer runs such statements for
every report. A :class:`DriverStatement` compiles its statement once per
dialect and runs the text with ``exec_driver_sql``, so that the
transaction, the engine's events and oslo.db's translation of errors
(deadlocks, lost connections, duplicates) stay as they were; each value
still goes through its column type's bind processor, as Core would send
it. Only for statements that return no rows: their results would skip
the types' result processors.
"""

import threading


class DriverStatement:
    """A Core INSERT, UPDATE or DELETE compiled once per dialect."""

    def __init__(self, statement):
        self._statement = statement
        self._compiled = {}
        self._lock = threading.Lock()

    def _for(self, dialect):
        """``(text, bind names in order, their processors)``."""
        compiled = self._compiled.get(dialect)
        if compiled is None:
            with self._lock:
                compiled = self._compiled.get(dialect)
                if compiled is None:
                    compiled = self._compiled[dialect] = self._compile(
                        dialect)
        return compiled

    def _compile(self, dialect):
        # As for executemany: no RETURNING of the new primary key.
        compiled = self._statement.compile(dialect=dialect,
                                           for_executemany=True)
        if compiled.escaped_bind_names or compiled.literal_execute_params \
                or compiled.post_compile_params:
            raise ValueError('%s needs Core at every execution'
                             % compiled.string)
        names = tuple(compiled.positiontup if dialect.positional
                      else compiled.binds)
        processors = tuple(
            compiled.binds[name].type.dialect_impl(dialect).bind_processor(
                dialect) for name in names)
        return compiled.string, names, processors

    def execute(self, connection, values):
        """Run the statement with ``values`` (one dict or a list of them).

        Every bind parameter of the statement must be in each dict.
        Returns the driver result: its ``rowcount`` is the rows matched.
        """
        text, names, processors = self._for(connection.dialect)
        positional = connection.dialect.positional

        def parameters(row):
            processed = [row[name] if process is None else process(row[name])
                         for name, process in zip(names, processors)]
            return tuple(processed) if positional else dict(
                zip(names, processed))
        if isinstance(values, dict):
            return connection.exec_driver_sql(text, parameters(values))
        return connection.exec_driver_sql(
            text, [parameters(row) for row in values])
