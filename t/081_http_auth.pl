# Authentication on the HTTP door: bearer JWTs (HS256 with a shared
# secret, RS256 and EdDSA with a public key file), each route's access
# level against the token's role (read-only, write-only, read-write,
# admin), 401 without a valid token (expired, not yet valid, wrong
# signature, issuer or audience, alg none, HS256 signed with the public
# key, a token in the query string) and 403 for a role that may not; the
# token's sub stamped on pushed messages as producerSub, whatever the
# client wrote.
use strict;
use warnings;

use Digest::SHA qw(hmac_sha256);
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueenHTTP;

my $secret = 'a-shared-secret-of-the-test';
my ($node, $port) = start_broker(name => 'auth', shards => 2,
	extra => "queen.jwt_secret = '$secret'\nqueen.jwt_issuer = 'queen-test'\nqueen.jwt_audience = 'queen'\n");
my $dir = $node->basedir;
my $json = JSON::PP->new->canonical;

# A token: header and claims (with defaults), signed by $sign over "h.c".
sub token
{
	my (%o) = @_;
	my %claims = (iss => 'queen-test', aud => 'queen', sub => 'svc-test',
		exp => time + 300, %{ $o{claims} // {} });
	delete $claims{$_} for grep { !defined $claims{$_} } keys %claims;
	my $h = QueenHTTP::b64url($json->encode({ alg => $o{alg} // 'HS256', typ => 'JWT' }));
	my $c = QueenHTTP::b64url($json->encode(\%claims));
	my $sign = $o{sign} // sub { hmac_sha256($_[0], $secret) };
	return "$h.$c." . QueenHTTP::b64url($sign->("$h.$c"));
}

sub call
{
	my ($method, $path, $token, $body) = @_;
	my %h;
	$h{Authorization} = "Bearer $token" if defined $token;
	my ($s, $content) = http_request($port, $method, $path,
		defined $body ? $json->encode($body) : undef, \%h);
	return wantarray ? ($s, $content) : $s;
}

my %tok = map { $_ => token(claims => { role => $_ }) } qw(read-only write-only read-write admin);
my $push = { items => [ { queue => 'authq', payload => { n => 1 } } ] };

# without a token: 401, except the public routes
is(call('POST', '/api/v1/push', undef, $push), 401, 'push without a token: 401');
is(call('GET', '/api/v1/pop/queue/authq', undef), 401, 'pop without a token: 401');
is(call('GET', '/api/v1/resources/queues', undef), 401, 'resources without a token: 401');
is(call('GET', '/health', undef), 200, '/health needs no token');
is(call('GET', '/metrics/prometheus', undef), 200, '/metrics/prometheus needs no token');
is(call('POST', "/api/v1/push?token=$tok{admin}", undef, $push), 401, 'a token in the query string is ignored');
is(call('POST', "/api/v1/push?access_token=$tok{admin}", undef, $push), 401, '... under either name');
is(call('POST', '/api/v1/push', 'not.a.token', $push), 401, 'garbage: 401');
is($node->safe_psql('postgres', q{SELECT count(*) FROM queen.queues WHERE name = 'authq'}), 0,
	'nothing refused was stored');

# roles against access levels: route families
my @matrix = (
	[ 'POST', '/api/v1/push', $push, { 'read-only' => 403, 'write-only' => 201, 'read-write' => 201, admin => 201 } ],
	[ 'GET', '/api/v1/pop/queue/authq?autoAck=true', undef, { 'read-only' => 403, 'write-only' => 403, 'read-write' => 200, admin => 200 } ],
	[ 'GET', '/api/v1/resources/queues', undef, { 'read-only' => 200, 'write-only' => 403, 'read-write' => 200, admin => 200 } ],
	[ 'GET', '/api/v1/consumer-groups', undef, { 'read-only' => 200, 'write-only' => 403, 'read-write' => 200, admin => 200 } ],
	[ 'GET', '/api/v1/dlq?queue=authq', undef, { 'read-only' => 200, 'write-only' => 403, 'read-write' => 200, admin => 200 } ],
	[ 'POST', '/api/v1/configure', { queue => 'authq2' }, { 'read-only' => 403, 'write-only' => 403, 'read-write' => 200, admin => 200 } ],
	[ 'GET', '/api/v1/system/maintenance', undef, { 'read-only' => 403, 'write-only' => 403, 'read-write' => 403, admin => 200 } ],
	[ 'POST', '/api/v1/stats/refresh', undef, { 'read-only' => 403, 'write-only' => 403, 'read-write' => 403, admin => 200 } ],
	[ 'DELETE', '/api/v1/dlq?queue=authq', undef, { 'read-only' => 403, 'write-only' => 403, 'read-write' => 403, admin => 200 } ],
	[ 'DELETE', '/api/v1/resources/queues/authq2', undef, { 'read-only' => 403, 'write-only' => 403, 'read-write' => 403, admin => 200 } ],
);
for my $m (@matrix)
{
	my ($method, $path, $body, $want) = @$m;
	for my $role (qw(read-only write-only read-write admin))
	{
		my $s = call($method, $path, $tok{$role}, $body);
		$s = 200 if $s == 204 && $want->{$role} == 200;	# an empty pop is allowed too
		is($s, $want->{$role}, "$method $path as $role: $want->{$role}");
	}
}
is(call('GET', '/api/v1/resources/queues', token(claims => { roles => ['read-only'] })), 200,
	'the role may come as the first of roles');
is(call('GET', '/api/v1/resources/queues', token(claims => { role => 'superuser' })), 403,
	'a role Queen does not know may call nothing');

# invalid tokens: 401
my %bad = (
	'expired' => token(claims => { role => 'admin', exp => time - 100 }),
	'not yet valid' => token(claims => { role => 'admin', nbf => time + 100 }),
	'wrong signature' => token(claims => { role => 'admin' }, sign => sub { hmac_sha256($_[0], 'another secret') }),
	'wrong issuer' => token(claims => { role => 'admin', iss => 'someone-else' }),
	'wrong audience' => token(claims => { role => 'admin', aud => 'another-service' }),
	'no audience' => token(claims => { role => 'admin', aud => undef }),
	'alg none' => token(alg => 'none', claims => { role => 'admin' }, sign => sub { '' }),
	'alg HS384 claimed, HS256 signed' => token(alg => 'HS384', claims => { role => 'admin' }),
	'RS256 claimed, no public key configured' => token(alg => 'RS256', claims => { role => 'admin' }),
);
for my $what (sort keys %bad)
{
	is(call('GET', '/api/v1/resources/queues', $bad{$what}), 401, "$what: 401");
}
is(call('GET', '/api/v1/resources/queues', token(claims => { role => 'admin', exp => time - 10 })), 200,
	'expired within the clock skew: accepted');
is(call('GET', '/api/v1/resources/queues', token(claims => { role => 'admin', aud => [ 'x', 'queen' ] })), 200,
	'an audience array naming queen: accepted');

# producerSub: the token's sub, never the client's
my ($s, $content) = call('POST', '/api/v1/push', token(claims => { role => 'read-write', sub => 'svc-orders' }),
	{ items => [ { queue => 'subq', payload => { n => 1 }, producerSub => 'forged' } ] });
is($s, 201, 'push with a subject');
($s, $content) = call('GET', '/api/v1/pop/queue/subq?autoAck=true', $tok{'read-write'});
my $popped = eval { $json->decode($content) };
is($popped->{messages}[0]{producerSub}, 'svc-orders', 'the popped message carries the token\'s sub');
($s, $content) = call('POST', '/api/v1/transaction', token(claims => { role => 'read-write', sub => 'svc-txn' }),
	{ operations => [ { type => 'push', items => [ { queue => 'subq', payload => { n => 2 } } ] } ] });
($s, $content) = call('GET', '/api/v1/pop/queue/subq?autoAck=true', $tok{'read-write'});
$popped = eval { $json->decode($content) };
is($popped->{messages}[0]{producerSub}, 'svc-txn', 'a transaction\'s push carries it too');

# a public key instead: RS256 and EdDSA, and algorithm confusion refused
# the keys and their tokens by the openssl command (scripts/install-deps)
{
	system("openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out $dir/rsa.pem 2>/dev/null") == 0 or die;
	system("openssl pkey -in $dir/rsa.pem -pubout -out $dir/rsa.pub 2>/dev/null") == 0 or die;
	system("openssl genpkey -algorithm ED25519 -out $dir/ed.pem 2>/dev/null") == 0 or die;
	system("openssl pkey -in $dir/ed.pem -pubout -out $dir/ed.pub 2>/dev/null") == 0 or die;
	my $sign_with = sub {
		my ($args) = @_;
		return sub {
			open(my $f, '>', "$dir/in") or die;
			print $f $_[0];
			close $f;
			(my $cmd = $args) =~ s/IN/$dir\/in/;
			$cmd =~ s/OUT/$dir\/sig/;
			system("openssl $cmd 2>/dev/null") == 0 or die "openssl $cmd";
			open($f, '<:raw', "$dir/sig") or die;
			local $/;
			return <$f>;
		};
	};
	my $rs = token(alg => 'RS256', claims => { role => 'admin' }, sign => $sign_with->("dgst -sha256 -sign $dir/rsa.pem -out OUT IN"));
	my $ed = token(alg => 'EdDSA', claims => { role => 'admin' }, sign => $sign_with->("pkeyutl -sign -rawin -inkey $dir/ed.pem -in IN -out OUT"));
	open(my $pf, '<', "$dir/rsa.pub") or die;
	my $pem = do { local $/; <$pf> };
	my $confused = token(alg => 'HS256', claims => { role => 'admin' }, sign => sub { hmac_sha256($_[0], $pem) });

	$node->safe_psql('postgres', "ALTER SYSTEM SET queen.jwt_secret = ''");
	$node->safe_psql('postgres', "ALTER SYSTEM SET queen.jwt_public_key_file = '$dir/rsa.pub'");
	$node->reload;
	ok(wait_for(sub { call('GET', '/api/v1/resources/queues', $rs) == 200 }, 60), 'RS256 with the RSA key: accepted');
	is(call('GET', '/api/v1/resources/queues', $confused), 401, 'HS256 signed with the public key: 401');
	is(call('GET', '/api/v1/resources/queues', $tok{admin}), 401, 'HS256 once no secret is set: 401');
	is(call('GET', '/api/v1/resources/queues',
			token(claims => { role => 'admin' }, sign => sub { hmac_sha256($_[0], '') })),
		401, 'HS256 signed with an empty secret, none set: 401');
	is(call('GET', '/api/v1/resources/queues', $ed), 401, 'EdDSA with an RSA key configured: 401');

	$node->safe_psql('postgres', "ALTER SYSTEM SET queen.jwt_public_key_file = '$dir/ed.pub'");
	$node->reload;
	ok(wait_for(sub { call('GET', '/api/v1/resources/queues', $ed) == 200 }, 60), 'EdDSA with the Ed25519 key: accepted');
	is(call('GET', '/api/v1/resources/queues', $rs), 401, 'RS256 with an Ed25519 key configured: 401');
	my $tampered = $ed;
	$tampered =~ s/\.([^.]+)\./'.' . QueenHTTP::b64url($json->encode({ role => 'admin', sub => 'mallory', iss => 'queen-test', aud => 'queen', exp => time + 300 })) . '.'/e;
	is(call('GET', '/api/v1/resources/queues', $tampered), 401, 'claims changed under an EdDSA signature: 401');
	is(call('GET', '/health', undef), 200, '/health still needs no token');
}

is(scalar(log_crashes($node)), 0, 'no worker crashed');
$node->stop;
done_testing();
