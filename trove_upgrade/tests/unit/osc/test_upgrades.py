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

"""``openstack database upgrade ...`` against a faked API."""

import json

import fixtures

from trove_upgrade.tests.unit.osc import base

UPGRADES = base.MGMT + '/upgrades'
ONE = UPGRADES + '/' + base.UPGRADE_ID


class TestCreateUpgrade(base.OSCTestCase):

    def create(self, *extra):
        return self.openstack(
            'database', 'upgrade', 'create', base.INSTANCE_ID,
            '--instance-version', 'v1.0.1', '--strategy', 'swift',
            '--location', 'guest-packages/guest-agent-v1.0.1.tar.gz',
            *extra)

    def test_create_sends_the_body_with_the_token(self):
        self.requests.post(UPGRADES, status_code=202,
                           json={'upgrade': base.upgrade(
                               metadata={'ticket': 'OPS-1', 'why': 'cve'},
                               allow_downgrade=True)})

        code, out, err = self.create('--metadata', 'ticket=OPS-1',
                                     '--metadata', 'why=cve',
                                     '--allow-downgrade', '-f', 'json')

        self.assertEqual(0, code, err)
        (request,) = self.api_requests()
        self.assertEqual('POST', request.method)
        self.assertEqual(base.TOKEN, request.headers['X-Auth-Token'])
        self.assertNotIn('X-Roles', request.headers)
        self.assertEqual({'instance_id': base.INSTANCE_ID,
                          'instance_version': 'v1.0.1',
                          'strategy': 'swift',
                          'location': 'guest-packages/'
                                      'guest-agent-v1.0.1.tar.gz',
                          'metadata': {'ticket': 'OPS-1', 'why': 'cve'},
                          'allow_downgrade': True}, request.json())
        shown = json.loads(out)
        self.assertEqual(base.UPGRADE_ID, shown['id'])
        self.assertEqual('SENT', shown['status'])
        self.assertEqual({'ticket': 'OPS-1', 'why': 'cve'},
                         shown['metadata'])
        self.assertNotIn('links', shown)

    def test_create_leaves_out_options_not_given(self):
        self.requests.post(UPGRADES, status_code=202,
                           json={'upgrade': base.upgrade()})

        code, out, err = self.create()

        self.assertEqual(0, code, err)
        body = self.api_requests()[0].json()
        self.assertNotIn('metadata', body)
        self.assertNotIn('allow_downgrade', body)
        self.assertIn(base.UPGRADE_ID, out)

    def test_create_without_a_required_option_sends_nothing(self):
        code, out, err = self.openstack(
            'database', 'upgrade', 'create', base.INSTANCE_ID,
            '--instance-version', 'v1.0.1', '--strategy', 'swift')

        self.assertEqual(1, code)
        self.assertIn('Give either --package, or both --strategy and '
                      '--location.', err)
        self.assertEqual([], self.api_requests())

    def test_create_by_package_sends_its_name_only(self):
        self.requests.post(UPGRADES, status_code=202,
                           json={'upgrade': base.upgrade()})

        code, out, err = self.openstack(
            'database', 'upgrade', 'create', base.INSTANCE_ID,
            '--instance-version', 'v1.0.1', '--package', 'trove-guestagent')

        self.assertEqual(0, code, err)
        self.assertEqual({'instance_id': base.INSTANCE_ID,
                          'instance_version': 'v1.0.1',
                          'package': 'trove-guestagent'},
                         self.api_requests()[0].json())

    def test_package_with_strategy_or_location_sends_nothing(self):
        for extra in (['--strategy', 'swift'], ['--location', 'x'],
                      ['--strategy', 'swift', '--location', 'x']):
            code, out, err = self.openstack(
                'database', 'upgrade', 'create', base.INSTANCE_ID,
                '--instance-version', 'v1.0.1', '--package', 'guest',
                *extra)

            self.assertEqual(1, code)
            self.assertIn('--package names a registered package, which '
                          'gives the strategy and the location: do not '
                          'also give %s.' % ' and '.join(
                              e for e in extra if e.startswith('--')), err)
        self.assertEqual([], self.api_requests())

    def test_metadata_that_is_not_key_value_is_refused(self):
        code, out, err = self.create('--metadata', 'ticket')

        self.assertEqual(2, code)
        self.assertIn("Expected 'key=value' type, but got: ticket", err)
        self.assertEqual([], self.api_requests())

    def test_api_error_is_the_apis_message_not_a_traceback(self):
        detail = ("Invalid JSON body: 'ftp' is not one of ['http', "
                  "'local', 'rsync', 'swift'] (at $.strategy)")
        self.requests.post(UPGRADES, status_code=400,
                           json=base.error(400, 'Bad Request', detail))

        code, out, err = self.create()

        self.assertEqual(1, code)
        self.assertEqual('', out)
        self.assertEqual(detail + ' (HTTP 400) (Request-ID: req-error)\n',
                         err)


class TestCreateAndWait(base.OSCTestCase):
    """``--wait`` prints each stage once, then the final upgrade."""

    def setUp(self):
        super().setUp()
        self.sleep = self.useFixture(fixtures.MockPatch(
            'trove_upgrade.osc.v1.upgrades.time.sleep')).mock
        self.requests.post(UPGRADES, status_code=202,
                           json={'upgrade': base.upgrade()})

    def polls(self, *upgrades):
        self.requests.get(ONE, [{'json': {'upgrade': u}} for u in upgrades])

    def wait(self):
        return self.openstack(
            'database', 'upgrade', 'create', base.INSTANCE_ID,
            '--instance-version', 'v1.0.1', '--strategy', 'swift',
            '--location', 'guest-packages/guest-agent-v1.0.1.tar.gz',
            '--wait', '-f', 'json')

    def test_success_shows_every_stage_once_in_order(self):
        sent = [base.event(None, 'PENDING', source='api'),
                base.event('PENDING', 'SENT', 'cast to the agent',
                           source='api')]
        downloading = sent + [base.event('SENT', 'DOWNLOADING',
                                         'from swift', second=1)]
        # Two stages pass between two polls: both are still shown.
        restarting = downloading + [
            base.event('DOWNLOADING', 'VERIFYING', second=2),
            base.event('VERIFYING', 'INSTALLING', second=3),
            base.event('INSTALLING', 'RESTARTING', second=4)]
        done = restarting + [base.event('RESTARTING', 'SUCCESS',
                                        'v1.0.1 is running', second=5)]
        self.polls(base.upgrade(events=sent),
                   base.upgrade(events=sent),
                   base.upgrade(status='DOWNLOADING', events=downloading),
                   base.upgrade(status='RESTARTING', events=restarting),
                   base.upgrade(status='SUCCESS', from_version='v1.0.0',
                                status_detail='v1.0.1 is running',
                                events=done))

        code, out, err = self.wait()

        self.assertEqual(0, code, err)
        self.assertEqual([
            'Waiting for upgrade %s of instance %s to v1.0.1'
            % (base.UPGRADE_ID, base.INSTANCE_ID),
            '2026-11-29T18:00:00Z - -> PENDING (api)',
            '2026-11-29T18:00:00Z PENDING -> SENT (api): cast to the agent',
            '2026-11-29T18:00:01Z SENT -> DOWNLOADING (conductor): '
            'from swift',
            '2026-11-29T18:00:02Z DOWNLOADING -> VERIFYING (conductor)',
            '2026-11-29T18:00:03Z VERIFYING -> INSTALLING (conductor)',
            '2026-11-29T18:00:04Z INSTALLING -> RESTARTING (conductor)',
            '2026-11-29T18:00:05Z RESTARTING -> SUCCESS (conductor): '
            'v1.0.1 is running'], err.splitlines())
        shown = json.loads(out)
        self.assertEqual('SUCCESS', shown['status'])
        self.assertEqual(done, shown['events'])
        self.assertEqual(4, self.sleep.call_count)

    def test_each_unsuccessful_end_exits_non_zero_with_the_reason(self):
        for status in ('FAILED', 'ROLLED_BACK', 'TIMED_OUT', 'CANCELLED'):
            detail = 'health check failed: agent did not start'
            events = [base.event('SENT', status, detail)]
            self.polls(base.upgrade(status=status, status_detail=detail,
                                    events=events))

            code, out, err = self.wait()

            self.assertEqual(1, code, status)
            self.assertEqual(status, json.loads(out)['status'])
            self.assertIn('SENT -> %s (conductor): %s' % (status, detail),
                          err)
            self.assertTrue(err.endswith(
                'Upgrade %s ended %s: %s\n' % (base.UPGRADE_ID, status,
                                               detail)), err)

    def test_status_changes_are_shown_when_the_api_sends_no_events(self):
        self.polls(base.upgrade(),
                   base.upgrade(status='INSTALLING'),
                   base.upgrade(status='INSTALLING'),
                   base.upgrade(status='ROLLED_BACK',
                                status_detail='restored v1.0.0'))

        code, out, err = self.wait()

        self.assertEqual(1, code)
        self.assertEqual(['SENT', 'INSTALLING',
                          'ROLLED_BACK: restored v1.0.0'],
                         err.splitlines()[1:4])

    def test_an_error_while_polling_is_shown_and_exits_non_zero(self):
        self.requests.get(ONE, status_code=503, json=base.error(
            503, 'Service Unavailable', 'The database is unavailable.'))

        code, out, err = self.wait()

        self.assertEqual(1, code)
        self.assertEqual('', out)
        self.assertIn('The database is unavailable. (HTTP 503)', err)

    def test_interrupt_says_the_upgrade_goes_on(self):
        self.polls(base.upgrade(status='DOWNLOADING'))
        self.sleep.side_effect = KeyboardInterrupt

        code, out, err = self.wait()

        self.assertEqual(1, code)
        self.assertIn('Stopped waiting; upgrade %s is DOWNLOADING and goes '
                      'on without the client.' % base.UPGRADE_ID, err)


class TestListUpgrades(base.OSCTestCase):

    def test_filters_and_columns(self):
        self.requests.get(UPGRADES, json={'upgrades': [
            base.upgrade(status='SUCCESS', from_version='v1.0.0')]})

        code, out, err = self.openstack(
            'database', 'upgrade', 'list', '--instance', base.INSTANCE_ID,
            '--status', 'success', '--instance-version', 'v1.0.1',
            '--limit', '5', '--marker', base.UPGRADE_ID, '-f', 'json')

        self.assertEqual(0, code, err)
        (request,) = self.api_requests()
        self.assertEqual({'instance_id': [base.INSTANCE_ID],
                          'status': ['success'],
                          'instance_version': ['v1.0.1'],
                          'limit': ['5'],
                          'marker': [base.UPGRADE_ID]}, request.qs)
        self.assertIn('status=SUCCESS', request.url)
        self.assertEqual([{'ID': base.UPGRADE_ID,
                           'Instance ID': base.INSTANCE_ID,
                           'Instance Version': 'v1.0.1',
                           'Strategy': 'swift',
                           'Status': 'SUCCESS',
                           'Created At': '2026-11-29T18:00:00Z'}],
                         json.loads(out))

    def test_long_adds_the_detail_columns(self):
        self.requests.get(UPGRADES, json={'upgrades': [
            base.upgrade(status='FAILED', status_detail='bad checksum')]})

        code, out, err = self.openstack('database', 'upgrade', 'list',
                                        '--long', '-f', 'json')

        self.assertEqual(0, code, err)
        (row,) = json.loads(out)
        self.assertEqual('bad checksum', row['Status Detail'])
        self.assertEqual(['ID', 'Instance ID', 'Instance Version',
                          'Strategy', 'Status', 'Created At',
                          'From Version', 'Status Detail', 'Location',
                          'Updated At'], list(row))

    def test_without_limit_every_page_is_fetched(self):
        first = [base.upgrade(id='00000000-0000-4000-8000-00000000000%d' % i)
                 for i in (1, 2)]
        last = [base.upgrade(id='00000000-0000-4000-8000-000000000003')]
        self.requests.get(UPGRADES, [
            {'json': {'upgrades': first,
                      'links': [{'rel': 'next', 'href': 'ignored'}]}},
            {'json': {'upgrades': last}}])

        code, out, err = self.openstack('database', 'upgrade', 'list',
                                        '-f', 'value', '-c', 'ID')

        self.assertEqual(0, code, err)
        self.assertEqual([u['id'] for u in first + last], out.split())
        second = self.api_requests()[1]
        self.assertEqual({'marker': [first[-1]['id']]}, second.qs)

    def test_an_unknown_state_is_refused_before_any_request(self):
        code, out, err = self.openstack('database', 'upgrade', 'list',
                                        '--status', 'DONE')

        self.assertEqual(2, code)
        self.assertIn("unknown state 'DONE'; choose from PENDING, SENT", err)
        self.assertEqual([], self.api_requests())


class TestShowUpgrade(base.OSCTestCase):

    def setUp(self):
        super().setUp()
        self.events = [
            base.event(None, 'PENDING', source='api'),
            base.event('PENDING', 'SENT', 'cast to the agent', source='api'),
            base.event('SENT', 'FAILED', 'checksum mismatch', second=9)]
        self.requests.get(ONE, json={'upgrade': base.upgrade(
            status='FAILED', status_detail='checksum mismatch',
            metadata={'ticket': 'OPS-1'}, events=self.events)})

    def test_json_has_the_full_event_history(self):
        code, out, err = self.openstack('database', 'upgrade', 'show',
                                        base.UPGRADE_ID, '-f', 'json')

        self.assertEqual(0, code, err)
        shown = json.loads(out)
        self.assertEqual(self.events, shown['events'])
        self.assertEqual({'ticket': 'OPS-1'}, shown['metadata'])
        self.assertEqual('FAILED', shown['status'])
        self.assertNotIn('links', shown)

    def test_table_shows_one_line_per_event(self):
        code, out, err = self.openstack('database', 'upgrade', 'show',
                                        base.UPGRADE_ID, '-c', 'events')

        self.assertEqual(0, code, err)
        cells = [line.strip('| ') for line in out.splitlines()]
        for line in (
                'events | 2026-11-29T18:00:00Z - -> PENDING (api)',
                '2026-11-29T18:00:00Z PENDING -> SENT (api): cast to the '
                'agent',
                '2026-11-29T18:00:09Z SENT -> FAILED (conductor): checksum '
                'mismatch'):
            self.assertIn(line, cells)

    def test_unknown_upgrade_is_the_apis_404(self):
        missing = '11111111-2222-4333-8444-555555555555'
        self.requests.get(UPGRADES + '/' + missing, status_code=404,
                          json=base.error(404, 'Not Found',
                                          'Upgrade %s could not be found.'
                                          % missing),
                          headers={'x-openstack-request-id': 'req-404'})

        code, out, err = self.openstack('database', 'upgrade', 'show',
                                        missing)

        self.assertEqual(1, code)
        self.assertEqual('Upgrade %s could not be found. (HTTP 404) '
                         '(Request-ID: req-404)\n' % missing, err)

    def test_an_id_is_one_path_segment(self):
        self.requests.get(UPGRADES + '/a%2Fb', status_code=404,
                          json=base.error(404, 'Not Found', 'no a/b'))

        code, out, err = self.openstack('database', 'upgrade', 'show', 'a/b')

        self.assertEqual(1, code)
        self.assertIn('no a/b (HTTP 404)', err)


class TestCancelUpgrade(base.OSCTestCase):

    def test_cancel_prints_nothing(self):
        self.requests.delete(ONE, json={'upgrade': base.upgrade(
            status='CANCELLED')})

        code, out, err = self.openstack('database', 'upgrade', 'cancel',
                                        base.UPGRADE_ID)

        self.assertEqual(0, code, err)
        self.assertEqual(('', ''), (out, err))
        self.assertEqual(['DELETE'],
                         [r.method for r in self.api_requests()])

    def test_each_upgrade_is_tried_and_failures_are_counted(self):
        started = '11111111-2222-4333-8444-555555555555'
        message = ('Upgrade %s is DOWNLOADING: the agent has started it, '
                   'too late to cancel.' % started)
        self.requests.delete(UPGRADES + '/' + started, status_code=409,
                             json=base.error(409, 'Conflict', message))
        self.requests.delete(ONE, json={'upgrade': base.upgrade(
            status='CANCELLED')})

        code, out, err = self.openstack('database', 'upgrade', 'cancel',
                                        started, base.UPGRADE_ID)

        self.assertEqual(1, code)
        self.assertEqual(2, len(self.api_requests()))
        self.assertEqual([
            'Failed to cancel upgrade %s: %s (HTTP 409) '
            '(Request-ID: req-error)' % (started, message),
            '1 of 2 upgrades could not be cancelled.'], err.splitlines())
