# The dashboard (web/, served by src/broker/listener/dashboard.c) in a real
# browser: headless Chromium through ChromeDriver (t/QueenBrowser.pm)
# against a broker with real queues, consumer groups and dead letters.  The
# overview lists them with the numbers the API gives; a replay from the DLQ
# view moves the message back; a seek from a group rewinds it; the message
# view shows the payload; the page says when the broker is unreachable; with
# auth on it asks for a token and nothing works without one.  Screenshots
# of each view at 1280x800 go to tmp_check/dashboard/ (the README shows
# copies from docs/dashboard/).  The static files: content types, ETag and
# 304, the security headers, and no path outside the installed directory.
use strict;
use warnings;

use File::Path qw(make_path);
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use QueenHTTP;
use QueenBrowser;

my ($node, $port) = start_broker(name => 'dash',
	extra => "queen.stats_interval = 1\nqueen.consumer_lag_interval = 1\n");
my $base = "http://127.0.0.1:$port";
my $shots = "$PostgreSQL::Test::Utils::tmp_check/dashboard";
make_path($shots);

# ---- the static files ------------------------------------------------------------
my ($s, $body, $h) = http_request($port, 'GET', '/');
is($s, 200, '/ serves the page');
like($h->{'content-type'}, qr{^text/html; charset=utf-8}, '... as HTML');
like($body, qr{<script[^>]+src="/ui/}, '... which loads its scripts from /ui/');
like($h->{'content-security-policy'}, qr{default-src 'none'; script-src 'self'}, 'a content security policy');
is($h->{'x-content-type-options'}, 'nosniff', 'nosniff');
is($h->{'cache-control'}, 'no-cache', 'revalidated on every load');
my $etag = $h->{etag};
like($etag, qr/^"[0-9a-f]{16}"$/, 'a strong ETag');
($s, $body) = http_request($port, 'GET', '/', undef, { 'If-None-Match' => $etag });
is($s, 304, 'If-None-Match with it: 304');
ok(!length($body // ''), '... without a body');
($s, $body, $h) = http_request($port, 'HEAD', '/');
is($s, 200, 'HEAD /');
($s, $body, $h) = http_request($port, 'GET', '/ui/app.js');
is($s, 200, 'the application script');
like($h->{'content-type'}, qr{^text/javascript}, '... as JavaScript');
($s, $body, $h) = http_request($port, 'GET', '/ui/uPlot.iife.min.js');
is($s, 200, 'the chart library, vendored');
for my $path ('/ui/..%2fqueen.control', '/ui/%2e%2e%2f%2e%2e%2fpostgresql.conf', '/ui/../queen.control',
	'/ui/.hidden', '/ui/index.html%00.js', '/ui/nothing.js', '/ui/queen--1.0.sql', '/ui/', '/ui/a/b')
{
	($s, $body) = http_request($port, 'GET', $path);
	ok($s == 404 || $s == 400, "$path: not served ($s)");
	unlike($body, qr/CREATE|default_version|shared_preload/, "... and nothing of a file outside");
}
($s) = http_request($port, 'POST', '/', '{}');
is($s, 405, 'POST / is not allowed');

# ---- queues, groups and dead letters to look at --------------------------------------
sub post { my ($st, $j) = http_json($port, 'POST', $_[0], $_[1] // {}); return ($st, $j); }
sub get { my ($st, $j) = http_json($port, 'GET', $_[0]); return ($st, $j); }
post('/api/v1/configure', { queue => 'shop.orders', namespace => 'shop', task => 'orders',
	options => { retryLimit => 0 } });
push_items($port, map { { queue => 'shop.orders', partition => 'p' . ($_ % 3), transactionId => "o$_",
	payload => { order => $_, customer => "c$_", total => 10 * $_ } } } 1 .. 30);
push_items($port, map { { queue => 'shop.invoices', payload => { invoice => $_ } } } 1 .. 7);
push_items($port, map { { queue => 'audit.log', partition => "u$_", payload => { event => 'login', user => $_ } } } 1 .. 12);
# names and payloads are the clients': shown as text, never markup
my $evil = 'x<b id="pwn">q</b>"\'&';
push_items($port, { queue => $evil, payload => { note => '<img id="pwn2" src="x">' } });
# billing consumed part of p0; a failed message of p1 is a dead letter
my ($ps, $pop) = pop($port, '/api/v1/pop/queue/shop.orders/partition/p0?batch=4&autoAck=true&consumerGroup=billing');
is(scalar @{ $pop->{messages} }, 4, 'billing consumed four');
($ps, $pop) = pop($port, '/api/v1/pop/queue/shop.orders/partition/p1?batch=1');
my $dead = $pop->{messages}[0];
my ($as, $aj) = post('/api/v1/ack', { transactionId => $dead->{transactionId}, partitionId => $dead->{partitionId},
	leaseId => $dead->{leaseId}, status => 'failed', error => 'card declined' });
ok($aj->[0]{dlq}, 'a failed message went to the DLQ');
my $dlq_count = sub { my ($st, $j) = get('/api/v1/dlq?queue=shop.orders'); return $j->{total} // scalar @{ $j->{messages} // [] }; };
is($dlq_count->(), 1, 'one dead letter');

my $b = QueenBrowser->new(log => "$PostgreSQL::Test::Utils::tmp_check/chromedriver.log");

# An action asks first, in the page's own dialog; say yes.
sub confirm
{
	my ($what) = @_;
	my $yes = $b->wait_element('[data-testid="confirm-yes"]');
	ok($yes, "$what asks for confirmation");
	$b->click($yes) if $yes;
}

# ---- the overview --------------------------------------------------------------------
my $t0 = time;
$b->go("$base/#/");
ok($b->wait_ready, 'the overview rendered');
diag(sprintf('first overview (a cold browser) rendered in %.0f ms', (time - $t0) * 1000));
my $row = $b->wait_element('[data-testid="queue-row"][data-queue="shop.orders"]');
ok($row, 'shop.orders is listed');
ok($b->find('[data-testid="queue-row"][data-queue="shop.invoices"]'), 'shop.invoices is listed');
ok($b->find('[data-testid="queue-row"][data-queue="audit.log"]'), 'audit.log is listed');
# the numbers, as the API gives them (stats are sampled: wait for them to settle)
# every row's depth, DLQ and partitions as /api/v1/resources/queues gives them at that moment
ok($b->wait_for('every row to match the API', sub {
	my ($qs, $queues) = get('/api/v1/resources/queues');
	for my $q (@{ $queues->{queues} // [] })
	{
		my $shown = $b->js('const r = [...document.querySelectorAll(\'[data-testid="queue-row"]\')]'
			. '.find(r => r.dataset.queue === arguments[0]); if (!r) return null;'
			. ' const v = t => r.querySelector(`[data-testid="${t}"]`).dataset.value;'
			. ' return [v("depth"), v("dlq")].join(" ");', $q->{name});
		return 0 unless defined $shown
		  && $shown eq join(' ', $q->{messages}{pending} // 0, $q->{messages}{deadLetter} // 0);
	}
	return scalar @{ $queues->{queues} // [] } == 4;
}, 30), "each queue's depth and dead letters as the API says");
ok($b->wait_for('the invoices depth', sub {
	my $r = $b->find('[data-testid="queue-row"][data-queue="shop.invoices"]');
	my $d = $b->find('[data-testid="depth"]', $r);
	return $b->text($d) =~ /^\s*7\b/;
}, 30), 'shop.invoices shows a depth of 7');
ok($b->wait_for('the orders DLQ', sub {
	my $r = $b->find('[data-testid="queue-row"][data-queue="shop.orders"]');
	return $b->text($b->find('[data-testid="dlq"]', $r)) =~ /^\s*1\b/;
}, 30), 'shop.orders shows one dead letter');
ok($b->find('[data-testid="maintenance-state"]'), 'the broker state shows maintenance mode');
ok($b->wait_for('the hostile name', sub {
	$b->js('return [...document.querySelectorAll(\'[data-testid="queue-row"]\')].some(r => r.dataset.queue === arguments[0]'
		. ' && r.textContent.includes(arguments[0]))', $evil) }, 30), 'a queue name with markup is listed as text');
ok(!$b->js('return document.getElementById("pwn") !== null'), '... and made no element');
$b->screenshot("$shots/overview.png");
$b->js('document.querySelector(\'[data-testid="queues-table"]\').scrollIntoView()');
$b->screenshot("$shots/overview-queues.png");
is(scalar($b->console_errors), 0, 'no console errors (CSP included)')
  or diag(explain([ $b->console_errors ]));

# maintenance mode from the overview: on, as the API then says, and off again
my $maint = sub { my ($st, $j) = get('/api/v1/system/maintenance'); return $j->{maintenanceMode} ? 1 : 0; };
for my $want (1, 0)
{
	$b->click($b->wait_element('[data-testid="maintenance-toggle"]'));
	confirm('maintenance mode');
	ok(wait_for(sub { $maint->() == $want }, 30), "the toggle turned maintenance mode " . ($want ? 'on' : 'off'));
	ok($b->wait_for('the state shown', sub {
		$b->attr($b->find('[data-testid="maintenance-state"]'), 'data-state') eq ($want ? 'on' : 'off') }, 30),
		'... and the page says so');
}

# 200% zoom: a 640 x 400 CSS-pixel viewport; the page reflows, only tables scroll sideways
$b->viewport(640, 400);
for my $view ('#/', '#/queues/shop.orders')
{
	$b->go("$base/$view");
	$b->wait_ready;
	ok($b->js('return document.documentElement.scrollWidth <= window.innerWidth + 1'),
		"$view at 200% zoom: no sideways scrolling of the page");
}
$b->screenshot("$shots/overview-200.png");
$b->viewport(1280, 800);

# keyboard: Tab reaches a queue link and Enter opens it
$b->go("$base/#/");
$b->wait_ready;
my $reached = 0;
for (1 .. 60)
{
	$b->press("\x{E004}");
	my $href = $b->js('return document.activeElement && document.activeElement.getAttribute("href")');
	if (defined $href && $href =~ m{#/queues/shop\.orders$})
	{
		$reached = 1;
		last;
	}
}
ok($reached, 'Tab reaches the link of a queue');
$b->press("\x{E007}");
ok($b->wait_for('the queue view', sub { $b->url =~ m{#/queues/shop\.orders$} }), 'Enter opens it');

# ---- a queue: a seek from the group view rewinds it ------------------------------------
$b->go("$base/#/queues/shop.orders");
ok($b->wait_ready, 'the queue view rendered');
my $group = $b->wait_element('[data-testid="group-row"][data-group="billing"]');
ok($group, 'the billing group is listed');
ok($b->wait_element('[data-testid="throughput-chart"] canvas'), 'the throughput chart is drawn');
$b->screenshot("$shots/queue.png");
my $pending = sub {
	my $v = $node->safe_psql('postgres', q{SELECT coalesce(sum(messages_pending), 0) FROM queen.consumer_lag WHERE queue = 'shop.orders' AND consumer_group = 'billing'});
	return $v;
};
my $before = $pending->();
$b->type($b->find('[data-testid="seek-time"]', $group), '2000-01-01T00:00');
$b->click($b->find('[data-testid="seek-at"]', $group));
confirm('the seek');
ok(wait_for(sub { $pending->() > $before }, 30), "a seek to 2000 rewound billing ($before pending before)");

# ---- the DLQ: a replay moves the message back ------------------------------------------
$b->go("$base/#/dlq/shop.orders");
$b->reload;
ok($b->wait_ready, 'the DLQ view rendered');
my $entry = $b->wait_element('[data-testid="dlq-row"]');
ok($entry, 'the dead letter is listed');
like($b->text($entry), qr/card declined/, '... with its error');
$b->screenshot("$shots/dlq.png");
$b->click($b->find('[data-testid="dlq-replay"]', $entry));
confirm('the replay');
ok(wait_for(sub { $dlq_count->() == 0 }, 30), 'the replay emptied the DLQ');
like($node->safe_psql('postgres', q{SELECT string_agg(transaction_id, ',') FROM queen.read('shop.orders', 'p1', 0, 1000)}),
	qr/dlq:/, '... and the message is back in its partition');

# ---- a message ----------------------------------------------------------------------
$b->go("$base/#/messages/$dead->{partitionId}/" . $dead->{transactionId});
$b->reload;
ok($b->wait_ready, 'the message view rendered');
my $payload = $b->wait_element('[data-testid="message-payload"]');
like($b->text($payload), qr/"customer":\s*"c\d+"/, 'the payload, pretty-printed');
$b->screenshot("$shots/message.png");

# ---- 1,000 queues: how long the overview takes to show them all (a figure, not a test) -------
push_items($port, map { { queue => sprintf('bulk.q%04d', $_), payload => { n => $_ } } } 1 .. 997);
ok(wait_for(sub { my ($st, $j) = get('/api/v1/resources/queues?limit=1'); ($j->{total} // 0) >= 1000 }, 60),
	'1,000 queues');
$b->go("$base/#/");
$b->reload;
my $ms = $b->wait_for('1,000 rows', sub {
	my $r = $b->js('const n = document.querySelectorAll(\'[data-testid="queue-row"]\').length;'
		. ' return n >= 1000 ? performance.now() : 0;');
	return $r;
}, 60);
ok($ms, 'the overview lists 1,000 queues');
diag(sprintf('overview with 1,000 queues: every row rendered %.0f ms after navigation start', $ms // -1));

# ---- unreachable --------------------------------------------------------------------
$b->go("$base/#/");
$b->wait_ready;
$node->safe_psql('postgres', 'SELECT 1');
$node->stop('fast');
ok($b->wait_element('[data-testid="unreachable"]', 30), 'the page says the broker is unreachable');
$b->screenshot("$shots/unreachable.png");
$node->start;
wait_healthy($port, 60);
ok($b->wait_for('the banner to go', sub {
	my $e = $b->find('[data-testid="unreachable"]');
	return !$e || !$b->js('const e = arguments[0]; return e.offsetParent !== null && !e.hidden;', $b->element_arg($e));
}, 30), '... and stops saying it once it answers');

# ---- auth on: the token prompt ------------------------------------------------------------
my $secret = 'dashboard-test-secret';
$node->append_conf('postgresql.conf', "queen.jwt_secret = '$secret'\n");
$node->reload;
ok(wait_for(sub { (http_request($port, 'GET', '/api/v1/resources/queues'))[0] == 401 }, 30), 'auth is on');
is((http_request($port, 'GET', '/'))[0], 200, '... and the page itself needs no token');
$b->go("$base/#/");
$b->reload;
my $form = $b->wait_element('[data-testid="token-form"]', 30);
ok($form, 'the page asks for a token');
ok(!grep({ $b->displayed($_) } $b->find_all('[data-testid="queue-row"]')), '... and shows no queue without one');
$b->screenshot("$shots/token.png");
$b->type($b->find('[data-testid="token-input"]'), QueenHTTP::jwt_hs256($secret, { role => 'admin', sub => 'dash' }));
$b->press("\x{E007}");
ok($b->wait_element('[data-testid="queue-row"][data-queue="shop.orders"]', 30), 'with an admin token the queues show');

$b->quit;
ok(!log_crashes($node), 'no worker crashed');
$node->stop;
done_testing();
