# A headless Chromium for the dashboard's TAP tests, driven through
# ChromeDriver's W3C WebDriver protocol (plain HTTP and JSON, so HTTP::Tiny
# and JSON::PP are the whole client).  Debian's chromium and chromium-driver
# (scripts/install-deps).  Every wait polls with a deadline: the page
# refreshes on its own clock.
package QueenBrowser;

use strict;
use warnings;

use HTTP::Tiny;
use IPC::Run;
use JSON::PP;
use MIME::Base64;
use Time::HiRes qw(time sleep);
use PostgreSQL::Test::Cluster;
use Test::More;

my $json = JSON::PP->new->utf8->canonical->allow_nonref;
our $W3C_ELEMENT = 'element-6066-11e4-a52e-4f735466cecf';

sub chromium_binary
{
	for my $b ('/usr/bin/chromium', '/usr/bin/chromium-browser')
	{
		return $b if -x $b;
	}
	return undef;
}

# Start ChromeDriver and a browser session of width x height.
sub new
{
	my ($class, %opt) = @_;
	my $binary = chromium_binary();
	my $driver = -x '/usr/bin/chromedriver' ? '/usr/bin/chromedriver' : undef;
	die "Debian's chromium and chromium-driver are needed (scripts/install-deps)\n"
	  unless $binary && $driver;
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my $self = bless {
		port => $port,
		http => HTTP::Tiny->new(timeout => 60),
		log => $opt{log} // '/dev/null',
	}, $class;
	# the browser is not ours to sanitize (scripts/sanitize preloads ASan)
	local $ENV{LD_PRELOAD};
	delete $ENV{LD_PRELOAD};
	$self->{run} = IPC::Run::start([ $driver, "--port=$port" ],
		'>', $self->{log}, '2>', $self->{log});
	my $deadline = time + 30;
	until ($self->_ok('GET', '/status') && $self->{last}{value}{ready})
	{
		die "chromedriver did not start\n" if time > $deadline;
		sleep 0.1;
	}
	my ($w, $h) = ($opt{width} // 1280, $opt{height} // 800);
	my @args = ('--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
		'--hide-scrollbars', "--window-size=$w,$h", '--force-device-scale-factor=1');
	my $s = $self->_cmd('POST', '/session', {
		capabilities => { alwaysMatch => {
			browserName => 'chrome',
			'goog:chromeOptions' => { binary => $binary, args => \@args },
		} } });
	$self->{session} = $s->{sessionId};
	$self->viewport($w, $h);
	return $self;
}

# The viewport itself w x h CSS pixels (the window size includes the
# browser's own frame); half the width is what 200% zoom leaves a page.
sub viewport
{
	my ($self, $w, $h) = @_;
	$self->_cmd('POST', $self->_s('/goog/cdp/execute'), {
		cmd => 'Emulation.setDeviceMetricsOverride',
		params => { width => $w + 0, height => $h + 0, deviceScaleFactor => 1, mobile => JSON::PP::false } });
}

sub _ok
{
	my ($self, $method, $path, $body) = @_;
	my $r = $self->{http}->request($method, "http://127.0.0.1:$self->{port}$path",
		defined $body
		? { content => $json->encode($body), headers => { 'Content-Type' => 'application/json' } }
		: {});
	$self->{last} = eval { $json->decode($r->{content}) } // {};
	return $r->{success};
}

sub _cmd
{
	my ($self, $method, $path, $body) = @_;
	return $self->{last}{value} if $self->_ok($method, $path, $body);
	my $v = $self->{last}{value} // {};
	die "webdriver $method $path: " . ($v->{error} // '?') . ': ' . ($v->{message} // '') . "\n";
}

sub _s { my ($self, $path) = @_; return "/session/$self->{session}$path"; }

sub go { my ($self, $url) = @_; $self->_cmd('POST', $self->_s('/url'), { url => $url }); }

sub url { my ($self) = @_; return $self->_cmd('GET', $self->_s('/url')); }

# Run a script in the page (its return value, JSON-decoded).
sub js
{
	my ($self, $script, @args) = @_;
	return $self->_cmd('POST', $self->_s('/execute/sync'), { script => $script, args => \@args });
}

# Element ids for a CSS selector (empty list when none).
sub find_all
{
	my ($self, $css, $from) = @_;
	my $path = defined $from ? $self->_s("/element/$from/elements") : $self->_s('/elements');
	my $els = $self->_cmd('POST', $path, { using => 'css selector', value => $css });
	return map { $_->{$W3C_ELEMENT} } @$els;
}

sub find { my ($self, $css, $from) = @_; my @e = $self->find_all($css, $from); return $e[0]; }

# An element id as a script argument (arguments[i] is then the element).
sub element_arg { my ($self, $el) = @_; return { $W3C_ELEMENT => $el }; }

sub click { my ($self, $el) = @_; $self->_cmd('POST', $self->_s("/element/$el/click"), {}); }

sub text { my ($self, $el) = @_; return $self->_cmd('GET', $self->_s("/element/$el/text")); }

sub attr
{
	my ($self, $el, $name) = @_;
	return $self->_cmd('GET', $self->_s("/element/$el/attribute/$name"));
}

sub type
{
	my ($self, $el, $text) = @_;
	$self->_cmd('POST', $self->_s("/element/$el/clear"), {});
	$self->_cmd('POST', $self->_s("/element/$el/value"), { text => $text });
}

# Keys to the focused element (WebDriver key codes, e.g. "\x{E004}" for Tab).
sub press
{
	my ($self, $keys) = @_;
	my @actions = map { ({ type => 'keyDown', value => $_ }, { type => 'keyUp', value => $_ }) }
	  split //, $keys;
	$self->_cmd('POST', $self->_s('/actions'),
		{ actions => [ { type => 'key', id => 'keyboard', actions => \@actions } ] });
}

# The first element matching css whose condition holds, waiting up to timeout s.
sub wait_for
{
	my ($self, $what, $cond, $timeout) = @_;
	my $deadline = time + ($timeout // 30);
	while (1)
	{
		my $v = eval { $cond->() };
		return $v if $v;
		if (time > $deadline)
		{
			diag("timed out waiting for $what" . ($@ ? ": $@" : ''));
			return undef;
		}
		sleep 0.1;
	}
}

# Is the element rendered (not hidden, not display: none)?
sub displayed
{
	my ($self, $el) = @_;
	return $self->_cmd('GET', $self->_s("/element/$el/displayed"));
}

# Wait for css to match a displayed element; its id.
sub wait_element
{
	my ($self, $css, $timeout) = @_;
	return $self->wait_for($css, sub {
		for my $el ($self->find_all($css))
		{
			return $el if $self->displayed($el);
		}
		return undef;
	}, $timeout);
}

# Load the current page again (a hash change alone does not).
sub reload { my ($self) = @_; $self->_cmd('POST', $self->_s('/refresh'), {}); }

# The current view rendered its first data (main[data-ready="true"]).
sub wait_ready
{
	my ($self, $timeout) = @_;
	return $self->wait_element('main[data-ready="true"]', $timeout);
}

sub screenshot
{
	my ($self, $file) = @_;
	my $png = decode_base64($self->_cmd('GET', $self->_s('/screenshot')));
	open(my $f, '>:raw', $file) or die "$file: $!";
	print $f $png;
	close $f;
	return length $png;
}

# What the page logged to its console (errors, CSP violations).
sub console_errors
{
	my ($self) = @_;
	my $logs = eval { $self->_cmd('POST', $self->_s('/se/log'), { type => 'browser' }) } // [];
	return grep { ($_->{level} // '') eq 'SEVERE' } @$logs;
}

sub quit
{
	my ($self) = @_;
	eval { $self->_cmd('DELETE', $self->_s('')) } if $self->{session};
	delete $self->{session};
	if ($self->{run})
	{
		$self->{run}->kill_kill;
		delete $self->{run};
	}
}

sub DESTROY { my ($self) = @_; $self->quit; }

1;
