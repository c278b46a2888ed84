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
