/*
 * queen-park: keeps long-polls parked on Queen's broker, and times wake-ups.
 *
 * Parked pops are the load under study
 * (docs/benchmarks/2026-12-05-finding9-parked-pops.md): thousands of them
 * must stay parked for the whole of a measurement, each on a keep-alive
 * connection of its own, and be sent again the moment one is answered.
 * Perl's select() stops at 1,024 descriptors, so this is a small epoll
 * client like bench/queen-load.
 *
 *   queen-park --port P --path '/api/v1/pop/queue/q?wait=true&timeout=30000' --count N
 *       keeps N pops of the path outstanding until SIGTERM or SIGINT, then
 *       prints {"answers":{"200":n,"204":n,...},"reconnects":n}
 *
 *   queen-park ... --trials T --push-queue Q
 *       parks N pops, then T times: waits until /metrics/prometheus shows N
 *       parked (queen_parked_long_polls), pushes one message to Q on a
 *       connection of its own, and takes the time from the push's answer to
 *       the first 200 among the parked pops (0 if that came first); prints
 *       {"trials":T,"woken":n,"wake_ms":{"p50":..,"p90":..,"max":..},...}
 *
 * Exit status: 0 done, 1 a connection or the broker failed, 2 usage error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#define RBUF		65536
#define MAX_TRIALS	10000

static int	opt_port = 6632;
static const char *opt_path = NULL;
static int	opt_count = 1;
static int	opt_trials = 0;
static const char *opt_push_queue = NULL;
static double opt_trial_timeout = 30;

typedef struct Conn
{
	int			fd;
	char		buf[RBUF];
	size_t		len;
} Conn;

static Conn *conns;
static int	epfd;
static char *request;
static size_t request_len;
static unsigned long answers[600];
static unsigned long reconnects;
static volatile sig_atomic_t stop;

static void
die(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	fputs("queen-park: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

static int
connect_local(void)
{
	struct sockaddr_in sa;
	int			fd = socket(AF_INET, SOCK_STREAM, 0);
	int			one = 1;

	if (fd < 0)
		die("socket: %s", strerror(errno));
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((unsigned short) opt_port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) != 0)
		die("connect to port %d: %s", opt_port, strerror(errno));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static void
write_all(int fd, const char *p, size_t n)
{
	while (n > 0)
	{
		ssize_t		w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			die("write: %s", strerror(errno));
		p += w;
		n -= (size_t) w;
	}
}

/* (Re)open a parked pop's connection and send its request. */
static void
conn_send(Conn *c, int index, int reopen)
{
	struct epoll_event ev;

	if (reopen)
	{
		if (c->fd >= 0)
			close(c->fd);
		c->fd = connect_local();
		ev.events = EPOLLIN;
		ev.data.u32 = (unsigned) index;
		if (epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &ev) != 0)
			die("epoll_ctl: %s", strerror(errno));
	}
	c->len = 0;
	write_all(c->fd, request, request_len);
}

/*
 * A whole response in buf: its status, and whether the server closes;
 * 0 while incomplete.  A 204 has no body and no length for one.
 */
static int
response_complete(const char *buf, size_t len, int *closes)
{
	const char *end = memmem(buf, len, "\r\n\r\n", 4);
	const char *cl;
	int			status;
	size_t		body = 0;

	if (end == NULL || sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
		return 0;
	cl = strcasestr(buf, "\r\ncontent-length:");
	if (cl != NULL && cl < end)
		body = strtoul(cl + 17, NULL, 10);
	if ((size_t) (end + 4 - buf) + body > len)
		return 0;
	*closes = strcasestr(buf, "\r\nconnection: close") != NULL;
	return status;
}

/* One round trip on a fresh connection that the server closes; returns the body. */
static char *
http_once(const char *method, const char *path, const char *body, int *status)
{
	static char out[1 << 20];
	char		head[512];
	size_t		len = 0;
	int			fd = connect_local();
	char	   *p;

	snprintf(head, sizeof(head),
			 "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
			 "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
			 method, path, body ? strlen(body) : 0);
	write_all(fd, head, strlen(head));
	if (body)
		write_all(fd, body, strlen(body));
	for (;;)
	{
		ssize_t		r = read(fd, out + len, sizeof(out) - 1 - len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t) r;
	}
	close(fd);
	out[len] = '\0';
	if (sscanf(out, "HTTP/1.%*d %d", status) != 1)
		die("%s %s: no answer", method, path);
	p = strstr(out, "\r\n\r\n");
	return p ? p + 4 : out + len;
}

static long
parked_now(void)
{
	int			status;
	char	   *body = http_once("GET", "/metrics/prometheus", NULL, &status);
	char	   *line = strstr(body, "\nqueen_parked_long_polls ");

	if (status != 200 || line == NULL)
		die("no queen_parked_long_polls on /metrics/prometheus");
	return strtol(line + 25, NULL, 10);
}

/*
 * Serve the parked pops' answers for up to wait_ms: count each, send it
 * again.  Returns the time of the first 200 seen, or -1.
 */
static double
serve(int wait_ms)
{
	struct epoll_event evs[256];
	double		first200 = -1;
	int			n;
	int			i;

	n = epoll_wait(epfd, evs, 256, wait_ms);
	for (i = 0; i < n; i++)
	{
		int			k = (int) evs[i].data.u32;
		Conn	   *c = &conns[k];
		ssize_t		r = read(c->fd, c->buf + c->len, RBUF - 1 - c->len);
		int			closes = 0;
		int			status;

		if (r <= 0)
		{
			if (r < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			reconnects++;
			conn_send(c, k, 1);
			continue;
		}
		c->len += (size_t) r;
		c->buf[c->len] = '\0';
		status = response_complete(c->buf, c->len, &closes);
		if (status == 0)
		{
			if (c->len >= RBUF - 1)
				die("a response of more than %d bytes", RBUF);
			continue;
		}
		if (status == 200 && first200 < 0)
			first200 = now_ms();
		if (status > 0 && status < 600)
			answers[status]++;
		conn_send(c, k, closes);
	}
	return first200;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return (x > y) - (x < y);
}

static void
on_signal(int sig)
{
	(void) sig;
	stop = 1;
}

static void
print_answers(void)
{
	int			s;
	int			first = 1;

	printf("\"answers\":{");
	for (s = 100; s < 600; s++)
		if (answers[s])
		{
			printf("%s\"%d\":%lu", first ? "" : ",", s, answers[s]);
			first = 0;
		}
	printf("},\"reconnects\":%lu", reconnects);
}

/* Wait until the broker shows every pop parked; false if stopped. */
static int
wait_parked(void)
{
	double		deadline = now_ms() + 60000;

	while (!stop)
	{
		if (parked_now() >= opt_count)
			return 1;
		if (now_ms() > deadline)
			die("fewer than %d pops parked after 60 s", opt_count);
		(void) serve(20);
	}
	return 0;
}

static void
run_trials(void)
{
	static double lat[MAX_TRIALS];
	int			woken = 0;
	int			t;

	for (t = 0; t < opt_trials && wait_parked(); t++)
	{
		char		body[512];
		int			status;
		double		t0;
		double		deadline;

		snprintf(body, sizeof(body),
				 "{\"items\":[{\"queue\":\"%s\",\"payload\":{\"trial\":%d}}]}",
				 opt_push_queue, t);
		(void) http_once("POST", "/api/v1/push", body, &status);
		if (status != 200 && status != 201)
			die("push answered %d", status);
		t0 = now_ms();
		deadline = t0 + opt_trial_timeout * 1000;
		while (!stop && now_ms() < deadline)
		{
			double		t1 = serve(10);

			if (t1 >= 0)
			{
				lat[woken++] = t1 > t0 ? t1 - t0 : 0;
				break;
			}
		}
	}
	qsort(lat, woken, sizeof(double), cmp_double);
	printf("{\"trials\":%d,\"woken\":%d,\"wake_ms\":{\"p50\":%.3f,\"p90\":%.3f,\"max\":%.3f},",
		   t, woken, woken ? lat[woken / 2] : -1.0, woken ? lat[(int) (woken * 0.9)] : -1.0,
		   woken ? lat[woken - 1] : -1.0);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"port", required_argument, NULL, 'p'},
		{"path", required_argument, NULL, 'P'},
		{"count", required_argument, NULL, 'n'},
		{"trials", required_argument, NULL, 't'},
		{"push-queue", required_argument, NULL, 'q'},
		{"trial-timeout", required_argument, NULL, 'T'},
		{NULL, 0, NULL, 0}
	};
	struct rlimit rl;
	int			ch;
	int			i;

	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1)
	{
		switch (ch)
		{
			case 'p':
				opt_port = atoi(optarg);
				break;
			case 'P':
				opt_path = optarg;
				break;
			case 'n':
				opt_count = atoi(optarg);
				break;
			case 't':
				opt_trials = atoi(optarg);
				break;
			case 'q':
				opt_push_queue = optarg;
				break;
			case 'T':
				opt_trial_timeout = atof(optarg);
				break;
			default:
				fputs("usage: queen-park --port P --path PATH --count N [--trials T --push-queue Q]\n",
					  stderr);
				return 2;
		}
	}
	if (opt_path == NULL || opt_count < 1 || opt_trials < 0 || opt_trials > MAX_TRIALS ||
		(opt_trials > 0 && opt_push_queue == NULL))
	{
		fputs("queen-park: --path and --count are required; --trials (at most 10000) needs --push-queue\n",
			  stderr);
		return 2;
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t) opt_count + 64)
	{
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGPIPE, SIG_IGN);
	if (asprintf(&request, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", opt_path) < 0)
		die("out of memory");
	request_len = strlen(request);
	epfd = epoll_create1(0);
	conns = calloc(opt_count, sizeof(Conn));
	if (epfd < 0 || conns == NULL)
		die("setup failed");
	for (i = 0; i < opt_count; i++)
	{
		conns[i].fd = -1;
		conn_send(&conns[i], i, 1);
	}
	if (opt_trials > 0)
		run_trials();
	else
	{
		while (!stop)
			(void) serve(1000);
		printf("{");
	}
	print_answers();
	printf("}\n");
	return 0;
}
