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

"""Print the last stestr run as one line: 'N passed, N failed, N skipped'."""

import sys

from stestr.repository import util
import testtools


def main():
    run = util.get_repo_open(repo_url=None).get_latest_run()
    summary = testtools.StreamSummary()
    summary.startTestRun()
    try:
        run.get_test().run(summary)
    finally:
        summary.stopTestRun()
    failed = len(summary.errors) + len(summary.failures)
    skipped = len(summary.skipped)
    passed = summary.testsRun - failed - skipped
    print(f'{passed} passed, {failed} failed, {skipped} skipped')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
