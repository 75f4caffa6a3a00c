/*
 * queen-load: a small closed-loop HTTP load generator for Queen's broker.
 *
 * Drives POST /api/v1/push with C concurrent keep-alive connections from one
 * process (epoll, non-blocking sockets, no threads).  Each connection sends a
 * request, waits for the whole response, and sends the next one.  Request
 * bodies are built in a per-connection buffer that is allocated once; the
 * responses are parsed just enough to count HTTP codes and per-item statuses.
 *
 *   make -C bench
 *   bench/queen-load --connections 64 --items 100 --partitions 16 --duration 10
 *   bench/queen-load --requests 1000 --results /tmp/r.tsv --txn-prefix run1
 *
 * Body of each request (one object per item, K = --items):
 *   {"items":[{"queue":"Q","partition":"p<k>","payload":{"n":<seq>,"pad":"xx.."},
 *              "transactionId":"<prefix>-<conn>-<seq>"}, ...]}
 *
 * At the end one line of JSON goes to stdout:
 *   {"connections":C,"items_per_request":K,"partitions":P,"seconds":S,
 *    "requests":R,"items":I,"requests_per_s":..,"items_per_s":..,
 *    "latency_ms":{"p50":..,"p90":..,"p99":..,"max":..},
 *    "http":{"201":n,...},"status":{"queued":n,"duplicate":n,"buffered":n,
 *    "failed":n,"other":n},"errors":{"connect":n,"reset":n,"timeout":n,
 *    "protocol":n},"connects":n}
 *
 * Statistics cover requests started after --warmup; "items" counts the items
 * of requests answered 2xx.  --results writes one line per answered item
 * (warmup included): <transaction_id>\t<status>\t<message_id>\t<partition>.
 *
 * Exit status: 0 the run completed (even with error responses), 1 nothing
 * could connect, 2 usage error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NS_PER_SEC		1000000000ULL
#define DUP_RING		1024	/* remembered txns per connection for --dup-every */
#define RBUF_INIT		16384
#define MAX_HEADER		65536	/* response header larger than this is a protocol error */

/* ---------- options ---------- */

static const char *opt_host = "127.0.0.1";
static int	opt_port = 6632;
static const char *opt_path = "/api/v1/push";
static const char *opt_queue = "bench";
static int	opt_partitions = 1;
static int	opt_part_random = 1;
static int	opt_items = 1;
static int	opt_payload_bytes = 64;
static int	opt_pad_random = 0;
static char *opt_txn_prefix = NULL;
static int	opt_no_txn = 0;
static long opt_dup_every = 0;
static double opt_duration = 0;
static long long opt_requests = 0;
static double opt_warmup = 0;
static double opt_timeout = 0;
static double opt_connect_timeout = 5;
static int	opt_connections = 1;
static const char *opt_results = NULL;
static const char *opt_body_file = NULL;
static double opt_rate = 0;
static unsigned long long opt_seed = 12345;
static int	opt_consume = 0;
static const char *opt_group = NULL;

/* ---------- statistics ---------- */

/*
 * Latency histogram in microseconds, log-linear: values below 128 have their
 * own bucket, above that every power of two is split into 64 buckets
 * (relative error under 1.6%).
 */
#define HB		7
#define HSUB	(1 << HB)
#define HHALF	(HSUB / 2)
#define HBUCKETS (64 * HHALF + HSUB)

static uint64_t hist[HBUCKETS];
static uint64_t hist_count;
static uint64_t hist_max;

static uint64_t st_requests;	/* measured responses */
static uint64_t st_items;		/* items in measured 2xx responses */
static uint64_t st_http[1000];
static uint64_t st_queued, st_duplicate, st_buffered, st_failed, st_other;
static uint64_t err_connect, err_reset, err_timeout, err_protocol;
static uint64_t n_connects;
static uint64_t issued_measured;
static int	ever_connected;

/* ---------- connections ---------- */

enum
{
	C_OFF,						/* no socket, not coming back */
	C_RETRY,					/* no socket, reconnect at retry_at */
	C_CONNECTING,
	C_SENDING,
	C_RECEIVING,
	C_WAITING					/* connected, --rate pacing until next_send */
};

typedef struct Conn
{
	int			id;
	int			fd;
	int			state;
	int			want_out;		/* EPOLLOUT currently registered */
	uint64_t	served;			/* responses on the current socket */
	uint64_t	backoff_ns;
	uint64_t	retry_at;
	uint64_t	next_send;

	/* request */
	char	   *reqbuf;			/* owned buffer (NULL with --body-file) */
	const char *req;
	size_t		req_len;
	size_t		req_off;
	uint64_t	t_start;
	int			measured;
	int			nitems;			/* items in the request in flight */
	int		   *item_part;		/* partition of each item in flight */

	/* response */
	char	   *rbuf;
	size_t		rcap;
	size_t		rlen;
	size_t		hdr_scanned;
	size_t		hdr_len;		/* 0 until the header is complete */
	long long	body_len;		/* -1: until close */
	int			status;
	int			close_after;

	/* item generation */
	uint64_t	seq;
	uint64_t	rng;
	uint64_t	rr;
	char	   *txnpfx;			/* escaped "<prefix>-<conn>-" */
	size_t		txnpfx_len;
	uint64_t   *ring_seq;
	int		   *ring_part;
	uint64_t	ring_n;

	/* --consume: the acknowledgements of the last pop, sent next */
	int			acking;			/* the request in flight is an ack */
	char	   *ackbuf;
	size_t		ackcap;
	size_t		acklen;
	int			nacks;
} Conn;

static Conn *conns;
static int	epfd;
static struct sockaddr_storage srv_addr;
static socklen_t srv_addrlen;

static uint64_t t_begin, t_measure, t_issue_end, t_hard_end;
static uint64_t t_first_start, t_last_done;	/* of measured requests */
static int	stopping;
static int	inflight;
static int	pending_timers;		/* connections in C_RETRY */
static volatile sig_atomic_t got_signal;

/* request pieces, built once */
static char *hdr_prefix;		/* "POST ... Content-Length: " */
static size_t hdr_prefix_len;
static size_t hdr_reserve;
static char *item_head;			/* {"queue":"Q","partition":"p */
static size_t item_head_len;
static char *pad_src;
#define PAD_POOL 65536
static size_t reqbuf_cap;
static char *fixed_req;			/* --body-file: whole request */
static size_t fixed_req_len;

static FILE *results_fp;

/* ---------- small helpers ---------- */

static void
die_usage(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	fputs("queen-load: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputs("\nTry 'queen-load --help'.\n", stderr);
	va_end(ap);
	exit(2);
}

static void *
xmalloc(size_t n)
{
	void	   *p = malloc(n ? n : 1);

	if (p == NULL)
	{
		fprintf(stderr, "queen-load: out of memory\n");
		exit(1);
	}
	return p;
}

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * NS_PER_SEC + (uint64_t) ts.tv_nsec;
}

static uint64_t
xorshift(uint64_t *s)
{
	uint64_t	x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* Writes v in decimal at p, returns the end. */
static char *
put_u64(char *p, uint64_t v)
{
	char		tmp[20];
	int			n = 0;

	do
	{
		tmp[n++] = (char) ('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*p++ = tmp[--n];
	return p;
}

static int
digits_u64(uint64_t v)
{
	int			n = 1;

	while (v >= 10)
	{
		v /= 10;
		n++;
	}
	return n;
}

/* JSON-escapes s (without quotes) into a new string. */
static char *
json_escape(const char *s)
{
	char	   *out = xmalloc(strlen(s) * 6 + 1);
	char	   *p = out;

	for (; *s; s++)
	{
		unsigned char c = (unsigned char) *s;

		if (c == '"' || c == '\\')
		{
			*p++ = '\\';
			*p++ = (char) c;
		}
		else if (c < 0x20)
			p += sprintf(p, "\\u%04x", c);
		else
			*p++ = (char) c;
	}
	*p = '\0';
	return out;
}

static void
hist_add(uint64_t us)
{
	int			i;

	if (us < HSUB)
		i = (int) us;
	else
	{
		int			shift = 63 - __builtin_clzll(us) - (HB - 1);

		i = shift * HHALF + (int) (us >> shift);
	}
	hist[i]++;
	hist_count++;
	if (us > hist_max)
		hist_max = us;
}

/* Value (us) at quantile q: midpoint of the bucket holding it. */
static double
hist_quantile(double q)
{
	uint64_t	want,
				cum = 0;

	if (hist_count == 0)
		return 0;
	want = (uint64_t) (q * (double) hist_count + 0.999999);
	if (want < 1)
		want = 1;
	for (int i = 0; i < HBUCKETS; i++)
	{
		cum += hist[i];
		if (cum >= want)
		{
			uint64_t	low,
						width;
			double		v;

			if (i < HSUB)
			{
				low = (uint64_t) i;
				width = 1;
			}
			else
			{
				int			shift = i / HHALF - 1;

				low = (uint64_t) (i - shift * HHALF) << shift;
				width = 1ULL << shift;
			}
			v = (double) low + (double) (width - 1) / 2.0;
			return v > (double) hist_max ? (double) hist_max : v;
		}
	}
	return (double) hist_max;
}

/* ---------- request building ---------- */

static char *
append(char *p, const char *s, size_t n)
{
	memcpy(p, s, n);
	return p + n;
}

#define APPEND_LIT(p, lit) append((p), (lit), sizeof(lit) - 1)

static int
pick_partition(Conn *c)
{
	if (opt_partitions <= 1)
		return 0;
	if (opt_part_random)
		return (int) (xorshift(&c->rng) % (uint64_t) opt_partitions);
	return (int) (c->rr++ % (uint64_t) opt_partitions);
}

/* Builds the next push request into c->reqbuf; sets req/req_len/nitems. */
static void
build_request(Conn *c)
{
	char	   *body = c->reqbuf + hdr_reserve;
	char	   *p = body;
	char	   *h;
	size_t		body_len,
				hl;

	int			request_part = opt_part_random == 2 ? pick_partition(c) : -1;

	p = APPEND_LIT(p, "{\"items\":[");
	for (int i = 0; i < opt_items; i++)
	{
		uint64_t	seq = c->seq++;
		uint64_t	txn = seq;
		int			part;
		int			pad;

		if (opt_dup_every > 0 && (seq + 1) % (uint64_t) opt_dup_every == 0 && c->ring_n > 0)
		{
			uint64_t	n = c->ring_n < DUP_RING ? c->ring_n : DUP_RING;
			uint64_t	slot = xorshift(&c->rng) % n;

			txn = c->ring_seq[slot];
			part = c->ring_part[slot];
		}
		else
		{
			part = request_part >= 0 ? request_part : pick_partition(c);
			if (opt_dup_every > 0)
			{
				c->ring_seq[c->ring_n % DUP_RING] = seq;
				c->ring_part[c->ring_n % DUP_RING] = part;
				c->ring_n++;
			}
		}
		c->item_part[i] = part;

		if (i > 0)
			*p++ = ',';
		p = append(p, item_head, item_head_len);
		p = put_u64(p, (uint64_t) part);
		p = APPEND_LIT(p, "\",\"payload\":{\"n\":");
		p = put_u64(p, seq);
		pad = opt_payload_bytes - 15 - digits_u64(seq);
		if (opt_payload_bytes > 0)
		{
			p = APPEND_LIT(p, ",\"pad\":\"");
			/* a random pad starts somewhere else in its pool for every message */
			if (pad > 0)
				p = append(p, pad_src + (opt_pad_random ? (seq * 2654435761u) % PAD_POOL : 0),
						   (size_t) pad);
			*p++ = '"';
		}
		*p++ = '}';
		if (!opt_no_txn)
		{
			p = APPEND_LIT(p, ",\"transactionId\":\"");
			p = append(p, c->txnpfx, c->txnpfx_len);
			p = put_u64(p, txn);
			*p++ = '"';
		}
		*p++ = '}';
	}
	p = APPEND_LIT(p, "]}");
	body_len = (size_t) (p - body);

	/* header goes right before the body */
	hl = hdr_prefix_len + (size_t) digits_u64(body_len) + 4;
	h = body - hl;
	p = append(h, hdr_prefix, hdr_prefix_len);
	p = put_u64(p, body_len);
	APPEND_LIT(p, "\r\n\r\n");

	c->req = h;
	c->req_len = hl + body_len;
	c->nitems = opt_items;
}

/* ---------- consumer mode (--consume), below ---------- */

static void build_consume_request(Conn *c);
static int	scan_consume_response(Conn *c, const char *p, const char *e, int count);

/* ---------- connection lifecycle ---------- */

static void start_request(Conn *c, uint64_t now);
static void conn_fail(Conn *c, uint64_t now, uint64_t *counter);

static void
conn_close(Conn *c)
{
	if (c->fd >= 0)
	{
		close(c->fd);			/* also removes it from epoll */
		c->fd = -1;
	}
	if (c->state == C_SENDING || c->state == C_RECEIVING)
		inflight--;
	if (c->state == C_RETRY)
		pending_timers--;
	c->state = C_OFF;
	c->want_out = 0;
}

static void
schedule_retry(Conn *c, uint64_t now)
{
	conn_close(c);
	if (stopping)
		return;
	c->state = C_RETRY;
	c->retry_at = now + c->backoff_ns;
	pending_timers++;
}

static void
conn_open(Conn *c, uint64_t now)
{
	int			fd,
				one = 1;
	struct epoll_event ev;

	fd = socket(srv_addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
	{
		fprintf(stderr, "queen-load: socket: %s\n", strerror(errno));
		c->served = 0;
		conn_fail(c, now, &err_connect);
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->fd = fd;
	c->served = 0;
	c->state = C_CONNECTING;
	c->want_out = 1;
	ev.events = EPOLLOUT;
	ev.data.ptr = c;
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
	{
		fprintf(stderr, "queen-load: epoll_ctl: %s\n", strerror(errno));
		exit(1);
	}
	if (connect(fd, (struct sockaddr *) &srv_addr, srv_addrlen) < 0 && errno != EINPROGRESS)
		conn_fail(c, now, &err_connect);
}

static void
set_out(Conn *c, int want)
{
	struct epoll_event ev;

	if (c->want_out == want)
		return;
	ev.events = EPOLLIN | (want ? EPOLLOUT : 0);
	ev.data.ptr = c;
	epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
	c->want_out = want;
}

/*
 * The connection broke, or the response could not be understood, while a
 * request was in flight: count it and reconnect.
 */
static void
conn_fail(Conn *c, uint64_t now, uint64_t *counter)
{
	(*counter)++;
	/* back off only if this socket never completed a response */
	if (c->served > 0)
		c->backoff_ns = 0;
	else
	{
		c->backoff_ns = c->backoff_ns ? c->backoff_ns * 2 : 20000000;
		if (c->backoff_ns > NS_PER_SEC)
			c->backoff_ns = NS_PER_SEC;
	}
	schedule_retry(c, now);
}

static void
do_write(Conn *c, uint64_t now)
{
	while (c->req_off < c->req_len)
	{
		ssize_t		n = send(c->fd, c->req + c->req_off, c->req_len - c->req_off, MSG_NOSIGNAL);

		if (n > 0)
			c->req_off += (size_t) n;
		else if (n < 0 && errno == EINTR)
			continue;
		else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		{
			set_out(c, 1);
			return;
		}
		else
		{
			conn_fail(c, now, &err_reset);
			return;
		}
	}
	if (c->state == C_SENDING)
		c->state = C_RECEIVING;
	set_out(c, 0);
}

/* Is issuing another request allowed? */
static int
may_issue(uint64_t now)
{
	if (stopping)
		return 0;
	if (opt_duration > 0 && now >= t_issue_end)
		return 0;
	if (opt_requests > 0 && issued_measured >= (uint64_t) opt_requests)
		return 0;
	return 1;
}

static void
start_request(Conn *c, uint64_t now)
{
	/* a consumer acknowledges what it holds even after the run's end */
	if (!may_issue(now) && !(opt_consume && c->nacks > 0 && !got_signal))
	{
		conn_close(c);
		return;
	}
	if (opt_rate > 0)
	{
		uint64_t	interval = (uint64_t) ((double) NS_PER_SEC * opt_connections / opt_rate);

		if (now < c->next_send)
		{
			c->state = C_WAITING;
			return;
		}
		c->next_send += interval;
		if (c->next_send + NS_PER_SEC < now)
			c->next_send = now;	/* far behind: do not burst to catch up */
	}
	if (opt_consume)
		build_consume_request(c);
	else if (fixed_req)
	{
		c->req = fixed_req;
		c->req_len = fixed_req_len;
		c->nitems = opt_items;
	}
	else
		build_request(c);
	c->req_off = 0;
	c->rlen = 0;
	c->hdr_scanned = 0;
	c->hdr_len = 0;
	c->body_len = -1;
	c->status = 0;
	c->close_after = 0;
	c->measured = now >= t_measure;
	if (c->measured)
		issued_measured++;
	c->state = C_SENDING;
	inflight++;
	c->t_start = now_ns();
	if (c->measured && t_first_start == 0)
		t_first_start = c->t_start;
	do_write(c, now);
}

/* ---------- response handling ---------- */

static const char *
skip_ws(const char *p, const char *e)
{
	while (p < e && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
		p++;
	return p;
}

/* p at '"'; returns position after the closing quote, or NULL. */
static const char *
scan_string(const char *p, const char *e, const char **s, size_t *len)
{
	const char *start = ++p;

	while (p < e && *p != '"')
		p += (*p == '\\') ? 2 : 1;
	if (p >= e)
		return NULL;
	*s = start;
	*len = (size_t) (p - start);
	return p + 1;
}

/* Skips any JSON value (non-string scalars, nested objects and arrays). */
static const char *
skip_value(const char *p, const char *e)
{
	int			depth = 0;

	while (p < e)
	{
		char		ch = *p;

		if (ch == '"')
		{
			const char *s;
			size_t		l;

			p = scan_string(p, e, &s, &l);
			if (p == NULL)
				return NULL;
			if (depth == 0)
				return p;
			continue;
		}
		if (ch == '{' || ch == '[')
			depth++;
		else if (ch == '}' || ch == ']')
		{
			if (depth == 0)
				return p;
			if (--depth == 0)
				return p + 1;
		}
		else if (depth == 0 && (ch == ',' || ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n'))
			return p;
		p++;
	}
	return depth == 0 ? p : NULL;
}

#define KEY_IS(s, l, lit) ((l) == sizeof(lit) - 1 && memcmp((s), (lit), (l)) == 0)

/*
 * Scans a push response (a JSON array of flat objects), counting statuses
 * and writing --results lines.  Returns the number of objects, -1 on a
 * malformed body.
 */
static int
scan_push_response(Conn *c, const char *p, const char *e, int count)
{
	int			n = 0;

	p = skip_ws(p, e);
	if (p >= e || *p != '[')
		return -1;
	p = skip_ws(p + 1, e);
	if (p < e && *p == ']')
		return 0;
	for (;;)
	{
		const char *txn = "",
				   *st = "",
				   *mid = "";
		size_t		txn_l = 0,
					st_l = 0,
					mid_l = 0;

		if (p >= e || *p != '{')
			return -1;
		p = skip_ws(p + 1, e);
		if (p < e && *p == '}')
			p++;
		else
			for (;;)
			{
				const char *k;
				size_t		kl;

				if (p >= e || *p != '"' || (p = scan_string(p, e, &k, &kl)) == NULL)
					return -1;
				p = skip_ws(p, e);
				if (p >= e || *p != ':')
					return -1;
				p = skip_ws(p + 1, e);
				if (p < e && *p == '"')
				{
					const char *v;
					size_t		vl;

					if ((p = scan_string(p, e, &v, &vl)) == NULL)
						return -1;
					if (KEY_IS(k, kl, "status"))
						st = v, st_l = vl;
					else if (KEY_IS(k, kl, "transaction_id"))
						txn = v, txn_l = vl;
					else if (KEY_IS(k, kl, "message_id"))
						mid = v, mid_l = vl;
				}
				else if ((p = skip_value(p, e)) == NULL)
					return -1;
				p = skip_ws(p, e);
				if (p < e && *p == ',')
				{
					p = skip_ws(p + 1, e);
					continue;
				}
				if (p < e && *p == '}')
				{
					p++;
					break;
				}
				return -1;
			}

		if (count)
		{
			if (KEY_IS(st, st_l, "queued"))
				st_queued++;
			else if (KEY_IS(st, st_l, "duplicate"))
				st_duplicate++;
			else if (KEY_IS(st, st_l, "buffered"))
				st_buffered++;
			else if (KEY_IS(st, st_l, "failed"))
				st_failed++;
			else
				st_other++;
		}
		if (results_fp)
		{
			fwrite(txn, 1, txn_l, results_fp);
			fputc('\t', results_fp);
			fwrite(st, 1, st_l, results_fp);
			fputc('\t', results_fp);
			fwrite(mid, 1, mid_l, results_fp);
			if (!fixed_req && n < c->nitems)
				fprintf(results_fp, "\tp%d\n", c->item_part[n]);
			else
				fputs("\t-\n", results_fp);
		}
		n++;

		p = skip_ws(p, e);
		if (p < e && *p == ',')
		{
			p = skip_ws(p + 1, e);
			continue;
		}
		if (p < e && *p == ']')
			return n;
		return -1;
	}
}

/* ---------- consumer mode (--consume) ----------
 *
 * Each connection pops (GET --path, a pop route with its query string) and
 * acknowledges what it got as completed in one POST /api/v1/ack/batch before
 * its next pop.  Every delivery is checked against the ones before it: a
 * transactionId "<prefix>-<producer>-<seq>" of one producer connection
 * must arrive in ascending seq within one partition (a producer waits for
 * each answer, so its pushes commit in seq order), so a seq at or below the
 * last one seen is a duplicate or an order violation.  --results writes one
 * line per delivered message: txn\tpartitionId\tleaseId.
 */

static uint64_t st_pops, st_pops_empty, st_delivered, st_acks, st_acked, st_ack_failed,
			st_order_violations;

/* last seq seen per (partitionId, producer): open addressing, grown at half full */
typedef struct SeenSlot
{
	char	   *key;
	uint64_t	seq;
} SeenSlot;

static SeenSlot *seen;
static size_t seen_cap, seen_n;

static uint64_t
hash_bytes(const char *p, size_t n)
{
	uint64_t	h = 1469598103934665603ULL;

	while (n--)
		h = (h ^ (unsigned char) *p++) * 1099511628211ULL;
	return h;
}

static SeenSlot *
seen_slot(const char *key, size_t len)
{
	size_t		i;

	if (seen_n * 2 >= seen_cap)
	{
		SeenSlot   *old = seen;
		size_t		oldcap = seen_cap;

		seen_cap = seen_cap ? seen_cap * 2 : 4096;
		seen = calloc(seen_cap, sizeof(SeenSlot));
		if (seen == NULL)
		{
			fprintf(stderr, "queen-load: out of memory\n");
			exit(1);
		}
		for (size_t j = 0; j < oldcap; j++)
			if (old[j].key)
			{
				i = hash_bytes(old[j].key, strlen(old[j].key)) & (seen_cap - 1);
				while (seen[i].key)
					i = (i + 1) & (seen_cap - 1);
				seen[i] = old[j];
			}
		free(old);
	}
	i = hash_bytes(key, len) & (seen_cap - 1);
	while (seen[i].key)
	{
		if (strlen(seen[i].key) == len && memcmp(seen[i].key, key, len) == 0)
			return &seen[i];
		i = (i + 1) & (seen_cap - 1);
	}
	seen[i].key = xmalloc(len + 1);
	memcpy(seen[i].key, key, len);
	seen[i].key[len] = '\0';
	seen[i].seq = UINT64_MAX;
	seen_n++;
	return &seen[i];
}

/* One delivery: in order after the last one of its producer in its partition? */
static void
check_delivery(const char *txn, size_t txn_l, const char *pid, size_t pid_l)
{
	const char *dash = NULL;
	char		key[512];
	uint64_t	seq = 0;
	SeenSlot   *slot;

	for (size_t i = txn_l; i > 0; i--)
		if (txn[i - 1] == '-')
		{
			dash = txn + i - 1;
			break;
		}
	if (dash == NULL || pid_l + (size_t) (dash - txn) + 1 > sizeof(key))
		return;					/* not one of ours */
	for (const char *d = dash + 1; d < txn + txn_l; d++)
	{
		if (*d < '0' || *d > '9')
			return;
		seq = seq * 10 + (uint64_t) (*d - '0');
	}
	memcpy(key, pid, pid_l);
	key[pid_l] = '|';
	memcpy(key + pid_l + 1, txn, (size_t) (dash - txn));
	slot = seen_slot(key, pid_l + 1 + (size_t) (dash - txn));
	if (slot->seq != UINT64_MAX && seq <= slot->seq)
		st_order_violations++;
	else
		slot->seq = seq;
}

static void
ack_append(Conn *c, const char *s, size_t n)
{
	if (c->acklen + n > c->ackcap)
	{
		while (c->acklen + n > c->ackcap)
			c->ackcap = c->ackcap ? c->ackcap * 2 : 65536;
		c->ackbuf = realloc(c->ackbuf, c->ackcap);
		if (c->ackbuf == NULL)
		{
			fprintf(stderr, "queen-load: out of memory\n");
			exit(1);
		}
	}
	memcpy(c->ackbuf + c->acklen, s, n);
	c->acklen += n;
}

#define ACK_LIT(c, lit) ack_append((c), (lit), sizeof(lit) - 1)

/* The pop (no acknowledgements pending) or the ack batch of the last pop. */
static void
build_consume_request(Conn *c)
{
	char	   *p = c->reqbuf;
	size_t		hl;

	c->acking = c->nacks > 0;
	if (!c->acking)
	{
		c->req = fixed_req;
		c->req_len = fixed_req_len;
		c->nitems = 0;
		return;
	}
	ACK_LIT(c, "]}");
	hl = (size_t) snprintf(p, reqbuf_cap,
						   "POST /api/v1/ack/batch HTTP/1.1\r\nHost: %s:%d\r\n"
						   "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
						   opt_host, opt_port, c->acklen);
	if (hl + c->acklen > reqbuf_cap)
	{
		reqbuf_cap = (hl + c->acklen) * 2;
		for (int i = 0; i < opt_connections; i++)
		{
			conns[i].reqbuf = realloc(conns[i].reqbuf, reqbuf_cap);
			if (conns[i].reqbuf == NULL)
			{
				fprintf(stderr, "queen-load: out of memory\n");
				exit(1);
			}
		}
		p = c->reqbuf;
	}
	memcpy(p + hl, c->ackbuf, c->acklen);
	c->req = p;
	c->req_len = hl + c->acklen;
	c->nitems = c->nacks;
	c->nacks = 0;
	c->acklen = 0;
}

/* One message object of a pop body: record it and queue its ack. */
static const char *
scan_popped_message(Conn *c, const char *p, const char *e, int count)
{
	const char *txn = "",
			   *pid = "",
			   *lease = "";
	size_t		txn_l = 0,
				pid_l = 0,
				lease_l = 0;

	if (p >= e || *p != '{')
		return NULL;
	p = skip_ws(p + 1, e);
	while (p < e && *p != '}')
	{
		const char *k;
		size_t		kl;

		if (*p != '"' || (p = scan_string(p, e, &k, &kl)) == NULL)
			return NULL;
		p = skip_ws(p, e);
		if (p >= e || *p != ':')
			return NULL;
		p = skip_ws(p + 1, e);
		if (p < e && *p == '"')
		{
			const char *v;
			size_t		vl;

			if ((p = scan_string(p, e, &v, &vl)) == NULL)
				return NULL;
			if (KEY_IS(k, kl, "transactionId"))
				txn = v, txn_l = vl;
			else if (KEY_IS(k, kl, "partitionId"))
				pid = v, pid_l = vl;
			else if (KEY_IS(k, kl, "leaseId"))
				lease = v, lease_l = vl;
		}
		else if ((p = skip_value(p, e)) == NULL)
			return NULL;
		p = skip_ws(p, e);
		if (p < e && *p == ',')
			p = skip_ws(p + 1, e);
	}
	if (p >= e)
		return NULL;
	if (count)
	{
		st_delivered++;
		st_items++;
	}
	check_delivery(txn, txn_l, pid, pid_l);
	if (results_fp)
		fprintf(results_fp, "%.*s\t%.*s\t%.*s\n", (int) txn_l, txn, (int) pid_l, pid,
				(int) lease_l, lease);
	if (lease_l > 0)
	{
		if (c->nacks)
			ACK_LIT(c, ",");
		ACK_LIT(c, "{\"transactionId\":\"");
		ack_append(c, txn, txn_l);
		ACK_LIT(c, "\",\"partitionId\":\"");
		ack_append(c, pid, pid_l);
		ACK_LIT(c, "\",\"leaseId\":\"");
		ack_append(c, lease, lease_l);
		ACK_LIT(c, "\",\"status\":\"completed\"}");
		c->nacks++;
	}
	return p + 1;
}

/* A pop's body (200), its emptiness (204), or an ack batch's answer. */
static int
scan_consume_response(Conn *c, const char *p, const char *e, int count)
{
	const char *m;

	if (c->acking)
	{
		uint64_t	ok = 0;

		if (c->status != 200)
		{
			if (count)
				st_ack_failed += (uint64_t) c->nitems;
			return 0;
		}
		for (m = p; (m = memmem(m, (size_t) (e - m), "\"success\":true", 14)) != NULL; m += 14)
			ok++;
		if (count)
		{
			st_acks++;
			st_acked += ok;
			st_ack_failed += (uint64_t) c->nitems - (ok < (uint64_t) c->nitems ? ok : (uint64_t) c->nitems);
		}
		return 0;
	}
	if (count)
		st_pops++;
	if (c->status == 204)
	{
		if (count)
			st_pops_empty++;
		return 0;
	}
	if (c->status != 200)
		return 0;
	c->acklen = 0;
	c->nacks = 0;
	if (opt_group)
	{
		ACK_LIT(c, "{\"consumerGroup\":\"");
		ack_append(c, opt_group, strlen(opt_group));
		ACK_LIT(c, "\",\"acknowledgments\":[");
	}
	else
		ACK_LIT(c, "{\"acknowledgments\":[");
	m = memmem(p, (size_t) (e - p), "\"messages\":", 11);
	if (m == NULL)
		return -1;
	p = skip_ws(m + 11, e);
	if (p >= e || *p != '[')
		return -1;
	p = skip_ws(p + 1, e);
	while (p < e && *p != ']')
	{
		if ((p = scan_popped_message(c, p, e, count)) == NULL)
			return -1;
		p = skip_ws(p, e);
		if (p < e && *p == ',')
			p = skip_ws(p + 1, e);
	}
	return 0;
}

/* The pop request, fixed: --path with consumerGroup added. */
static void
setup_consume(void)
{
	char	   *path = xmalloc(strlen(opt_path) + (opt_group ? strlen(opt_group) : 0) + 32);
	size_t		cap;

	strcpy(path, opt_path);
	if (opt_group)
	{
		strcat(path, strchr(path, '?') ? "&consumerGroup=" : "?consumerGroup=");
		strcat(path, opt_group);
	}
	cap = strlen(path) + strlen(opt_host) + 64;
	fixed_req = xmalloc(cap);
	fixed_req_len = (size_t) snprintf(fixed_req, cap, "GET %s HTTP/1.1\r\nHost: %s:%d\r\n\r\n",
									  path, opt_host, opt_port);
	free(path);
	reqbuf_cap = 1 << 20;
	for (int i = 0; i < opt_connections; i++)
		conns[i].reqbuf = xmalloc(reqbuf_cap);
}

static void
report_consume(void)
{
	if (!opt_consume)
		return;
	printf("\"consume\":{\"pops\":%llu,\"empty\":%llu,\"delivered\":%llu,\"acks\":%llu,"
		   "\"acked\":%llu,\"ack_failed\":%llu,\"order_violations\":%llu,\"producers_seen\":%llu},",
		   (unsigned long long) st_pops, (unsigned long long) st_pops_empty,
		   (unsigned long long) st_delivered, (unsigned long long) st_acks,
		   (unsigned long long) st_acked, (unsigned long long) st_ack_failed,
		   (unsigned long long) st_order_violations, (unsigned long long) seen_n);
}

static void
finish_response(Conn *c, uint64_t now)
{
	const char *body = c->rbuf + c->hdr_len;
	size_t		blen = c->rlen - c->hdr_len;

	if (c->body_len >= 0)
		blen = (size_t) c->body_len;
	c->served++;
	c->backoff_ns = 0;
	inflight--;
	c->state = C_OFF;			/* not in flight any more */

	if (c->measured)
	{
		st_requests++;
		hist_add((now - c->t_start) / 1000);
		if (c->status >= 0 && c->status < 1000)
			st_http[c->status]++;
		if (c->status >= 200 && c->status < 300 && !opt_consume)
			st_items += (uint64_t) c->nitems;
		t_last_done = now;
	}
	if (opt_consume)
	{
		if (scan_consume_response(c, body, body + blen, c->measured) < 0)
			err_protocol++;
	}
	else if (c->status >= 200 && c->status < 300 && (c->measured || results_fp))
	{
		int			n = scan_push_response(c, body, body + blen, c->measured);

		/* for our own bodies the answer must have one object per item */
		if (n < 0 ? !fixed_req : (!fixed_req && n != c->nitems))
			err_protocol++;
	}

	if (c->close_after || c->req_off < c->req_len)
	{
		conn_close(c);
		if (may_issue(now))
			conn_open(c, now);
		return;
	}
	start_request(c, now);
}

static int
header_is(const char *line, size_t len, const char *name)
{
	size_t		nl = strlen(name);

	return len > nl && strncasecmp(line, name, nl) == 0;
}

/*
 * Parses as much of the response as has arrived.  Returns 1 when it is
 * complete, 0 when more is needed, -1 on a protocol error.
 */
static int
parse_response(Conn *c)
{
	if (c->hdr_len == 0)
	{
		size_t		from = c->hdr_scanned > 3 ? c->hdr_scanned - 3 : 0;
		char	   *end = memmem(c->rbuf + from, c->rlen - from, "\r\n\r\n", 4);
		char	   *p,
				   *hend;

		c->hdr_scanned = c->rlen;
		if (end == NULL)
			return c->rlen > MAX_HEADER ? -1 : 0;
		hend = end + 2;			/* end of the last header line's CRLF */
		c->hdr_len = (size_t) (end + 4 - c->rbuf);

		/* status line: HTTP/1.x NNN */
		p = c->rbuf;
		if (c->hdr_len < 12 || memcmp(p, "HTTP/1.", 7) != 0 || p[8] != ' ')
			return -1;
		if (p[7] == '0')
			c->close_after = 1;
		if (p[9] < '0' || p[9] > '9' || p[10] < '0' || p[10] > '9' || p[11] < '0' || p[11] > '9')
			return -1;
		c->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
		if (c->status < 200 && c->status >= 100)
		{
			/* 1xx interim response: drop it and wait for the real one */
			memmove(c->rbuf, c->rbuf + c->hdr_len, c->rlen - c->hdr_len);
			c->rlen -= c->hdr_len;
			c->hdr_len = 0;
			c->hdr_scanned = 0;
			c->close_after = 0;
			return c->rlen ? -2 : 0;
		}

		p = memchr(p, '\n', (size_t) (hend - p));
		while (p && ++p < hend)
		{
			char	   *eol = memchr(p, '\n', (size_t) (hend - p));
			size_t		len = eol ? (size_t) (eol - p) : (size_t) (hend - p);

			if (header_is(p, len, "content-length:"))
				c->body_len = strtoll(p + 15, NULL, 10);
			else if (header_is(p, len, "connection:"))
			{
				if (memmem(p, len, "close", 5) || memmem(p, len, "Close", 5))
					c->close_after = 1;
				else if (memmem(p, len, "keep-alive", 10) || memmem(p, len, "Keep-Alive", 10))
					c->close_after = 0;
			}
			else if (header_is(p, len, "transfer-encoding:"))
				return -1;		/* chunked is not supported; Queen sends Content-Length */
			p = eol;
		}
		if (c->status == 204 || c->status == 304)
			c->body_len = 0;
		if (c->body_len < 0)
			c->close_after = 1; /* body runs until the server closes */
		else if (c->hdr_len + (size_t) c->body_len > c->rcap)
		{
			c->rcap = c->hdr_len + (size_t) c->body_len;
			c->rbuf = realloc(c->rbuf, c->rcap);
			if (c->rbuf == NULL)
			{
				fprintf(stderr, "queen-load: out of memory\n");
				exit(1);
			}
		}
	}
	if (c->body_len >= 0 && c->rlen >= c->hdr_len + (size_t) c->body_len)
		return 1;
	return 0;
}

static void
do_read(Conn *c, uint64_t now)
{
	for (;;)
	{
		ssize_t		n;
		size_t		space;
		int			r;

		if (c->rcap - c->rlen < 4096)
		{
			c->rcap *= 2;
			c->rbuf = realloc(c->rbuf, c->rcap);
			if (c->rbuf == NULL)
			{
				fprintf(stderr, "queen-load: out of memory\n");
				exit(1);
			}
		}
		space = c->rcap - c->rlen;
		n = read(c->fd, c->rbuf + c->rlen, space);
		if (n < 0)
		{
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			if (c->state == C_SENDING || c->state == C_RECEIVING)
				conn_fail(c, now, &err_reset);
			else
				schedule_retry(c, now);
			return;
		}
		if (n == 0)
		{
			if (c->state != C_SENDING && c->state != C_RECEIVING)
			{
				/* idle keep-alive connection closed by the server */
				c->backoff_ns = 0;
				schedule_retry(c, now);
			}
			else if (c->hdr_len > 0 && c->body_len < 0)
			{
				/* response delimited by close */
				c->body_len = (long long) (c->rlen - c->hdr_len);
				finish_response(c, now_ns());
			}
			else
				conn_fail(c, now, &err_reset);
			return;
		}
		if (c->state != C_SENDING && c->state != C_RECEIVING)
		{
			/* unsolicited bytes: the stream is out of sync */
			err_protocol++;
			schedule_retry(c, now);
			return;
		}
		c->rlen += (size_t) n;
		while ((r = parse_response(c)) == -2)
			;
		if (r < 0)
		{
			conn_fail(c, now, &err_protocol);
			return;
		}
		if (r == 1)
		{
			finish_response(c, now_ns());
			return;
		}
		if ((size_t) n < space)
			return;				/* drained; level-triggered epoll calls again */
	}
}

static void
on_event(Conn *c, uint32_t events, uint64_t now)
{
	if (c->state == C_CONNECTING)
	{
		int			err = 0;
		socklen_t	len = sizeof(err);
		struct epoll_event ev;

		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			err = errno;
		if (err == 0 && (events & (EPOLLERR | EPOLLHUP)))
			err = ECONNREFUSED;
		if (err != 0)
		{
			c->served = 0;
			conn_fail(c, now, &err_connect);
			return;
		}
		if (!(events & EPOLLOUT))
			return;
		ever_connected = 1;
		n_connects++;
		ev.events = EPOLLIN;
		ev.data.ptr = c;
		epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
		c->want_out = 0;
		c->state = C_OFF;
		start_request(c, now);
		return;
	}
	if ((events & EPOLLOUT) && c->state == C_SENDING)
	{
		do_write(c, now);
		if (c->fd < 0)
			return;
	}
	if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
		do_read(c, now);
}

/* ---------- setup and main loop ---------- */

static void
on_signal(int sig)
{
	got_signal = sig;
}

static void
usage(FILE *f)
{
	fputs(
		  "Usage: queen-load (--duration SECONDS | --requests N) [options]\n"
		  "Closed-loop HTTP load for Queen's POST /api/v1/push (one line of JSON on stdout).\n"
		  "\n"
		  "  --host HOST            server (127.0.0.1)\n"
		  "  --port PORT            (6632)\n"
		  "  --path PATH            (/api/v1/push)\n"
		  "  --connections C        concurrent keep-alive connections (1)\n"
		  "  --duration SECONDS     measured run time, after --warmup\n"
		  "  --requests N           stop after N measured requests\n"
		  "  --warmup SECONDS       run first without measuring (0)\n"
		  "  --timeout SECONDS      hard stop (warmup + duration + 30, or 300 with --requests only)\n"
		  "  --connect-timeout S    give up (exit 1) if nothing connected within S (5)\n"
		  "  --queue NAME           (bench)\n"
		  "  --partitions P         items go to partitions p0..p<P-1> (1)\n"
		  "  --partition-mode M     rr | random | request: per item in turn, per item at random,\n"
		  "                         or one random partition for all items of a request\n"
		  "                         (random; seeds fixed per connection)\n"
		  "  --items K              items per request (1)\n"
		  "  --payload-bytes B      payload {\"n\":seq,\"pad\":\"xx..\"} of about B bytes (64)\n"
		  "  --pad-random           the pad in random hex digits, different per message (about\n"
		  "                         2x compressible, where x's compress to nothing)\n"
		  "  --txn-prefix S         transactionId = S-<conn>-<seq> (t<pid>)\n"
		  "  --no-txn               omit transactionId (the server mints one)\n"
		  "  --dup-every N          every Nth item reuses an earlier txn+partition of its connection\n"
		  "  --results FILE         one line per answered item: txn\\tstatus\\tmessage_id\\tpartition\n"
		  "  --body-file FILE       send this fixed body instead (items counted as --items)\n"
		  "  --rate R               pace to at most R requests/s in total (open loop per connection)\n"
		  "  --seed N               random seed (12345)\n"
		  "  --consume              consume instead: GET --path (a pop route with its query),\n"
		  "                         acknowledge each delivery in one POST /api/v1/ack/batch,\n"
		  "                         check per-partition order of each producer's seq\n"
		  "  --group G              consumer group of --consume (queue mode)\n"
		  "  --help\n", f);
}

static double
parse_double(const char *name, const char *s, double min)
{
	char	   *end;
	double		v = strtod(s, &end);

	if (*s == '\0' || *end != '\0' || !(v >= min))
		die_usage("bad value for --%s: '%s'", name, s);
	return v;
}

static long long
parse_int(const char *name, const char *s, long long min, long long max)
{
	char	   *end;
	long long	v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (*s == '\0' || *end != '\0' || errno != 0 || v < min || v > max)
		die_usage("bad value for --%s: '%s'", name, s);
	return v;
}

static void
parse_args(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"host", required_argument, NULL, 'h'},
		{"port", required_argument, NULL, 'p'},
		{"path", required_argument, NULL, 'P'},
		{"queue", required_argument, NULL, 'q'},
		{"partitions", required_argument, NULL, 'n'},
		{"partition-mode", required_argument, NULL, 'm'},
		{"items", required_argument, NULL, 'k'},
		{"consume", no_argument, NULL, 'C'},
		{"group", required_argument, NULL, 'g'},
		{"payload-bytes", required_argument, NULL, 'b'},
		{"pad-random", no_argument, NULL, 'Z'},
		{"txn-prefix", required_argument, NULL, 'x'},
		{"no-txn", no_argument, NULL, 'X'},
		{"dup-every", required_argument, NULL, 'D'},
		{"duration", required_argument, NULL, 'd'},
		{"requests", required_argument, NULL, 'r'},
		{"warmup", required_argument, NULL, 'w'},
		{"timeout", required_argument, NULL, 't'},
		{"connect-timeout", required_argument, NULL, 'T'},
		{"connections", required_argument, NULL, 'c'},
		{"results", required_argument, NULL, 'o'},
		{"body-file", required_argument, NULL, 'B'},
		{"rate", required_argument, NULL, 'R'},
		{"seed", required_argument, NULL, 's'},
		{"help", no_argument, NULL, '?' + 256},
		{NULL, 0, NULL, 0}
	};
	int			ch;

	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1)
	{
		switch (ch)
		{
			case 'h':
				opt_host = optarg;
				break;
			case 'p':
				opt_port = (int) parse_int("port", optarg, 1, 65535);
				break;
			case 'P':
				if (optarg[0] != '/' || strpbrk(optarg, " \r\n"))
					die_usage("--path must start with / and contain no spaces");
				opt_path = optarg;
				break;
			case 'q':
				opt_queue = optarg;
				break;
			case 'n':
				opt_partitions = (int) parse_int("partitions", optarg, 1, INT_MAX);
				break;
			case 'm':
				if (strcmp(optarg, "rr") == 0)
					opt_part_random = 0;
				else if (strcmp(optarg, "random") == 0)
					opt_part_random = 1;
				else if (strcmp(optarg, "request") == 0)
					opt_part_random = 2;
				else
					die_usage("--partition-mode must be rr, random or request");
				break;
			case 'k':
				opt_items = (int) parse_int("items", optarg, 1, 1000000);
				break;
			case 'b':
				opt_payload_bytes = (int) parse_int("payload-bytes", optarg, 0, 64 * 1024 * 1024);
				break;
			case 'Z':
				opt_pad_random = 1;
				break;
			case 'x':
				opt_txn_prefix = optarg;
				break;
			case 'C':
				opt_consume = 1;
				break;
			case 'g':
				opt_group = optarg;
				break;
			case 'X':
				opt_no_txn = 1;
				break;
			case 'D':
				opt_dup_every = (long) parse_int("dup-every", optarg, 1, LONG_MAX);
				break;
			case 'd':
				opt_duration = parse_double("duration", optarg, 0);
				if (opt_duration <= 0)
					die_usage("--duration must be positive");
				break;
			case 'r':
				opt_requests = parse_int("requests", optarg, 1, LLONG_MAX);
				break;
			case 'w':
				opt_warmup = parse_double("warmup", optarg, 0);
				break;
			case 't':
				opt_timeout = parse_double("timeout", optarg, 0);
				break;
			case 'T':
				opt_connect_timeout = parse_double("connect-timeout", optarg, 0);
				break;
			case 'c':
				opt_connections = (int) parse_int("connections", optarg, 1, 1000000);
				break;
			case 'o':
				opt_results = optarg;
				break;
			case 'B':
				opt_body_file = optarg;
				break;
			case 'R':
				opt_rate = parse_double("rate", optarg, 0);
				break;
			case 's':
				opt_seed = (unsigned long long) parse_int("seed", optarg, 0, LLONG_MAX);
				break;
			case '?' + 256:
				usage(stdout);
				exit(0);
			default:
				fputs("Try 'queen-load --help'.\n", stderr);
				exit(2);
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'", argv[optind]);
	if (opt_duration <= 0 && opt_requests <= 0)
		die_usage("one of --duration or --requests is required");
	if (opt_dup_every > 0 && opt_no_txn)
		die_usage("--dup-every needs transactionIds (drop --no-txn)");
	if (opt_body_file && (opt_dup_every > 0))
		die_usage("--dup-every does not apply to --body-file");
	if (opt_timeout <= 0)
		opt_timeout = opt_duration > 0 ? opt_warmup + opt_duration + 30 : opt_warmup + 300;
}

static void
setup_requests(void)
{
	char		buf[1024];
	char	   *q = json_escape(opt_queue);
	char		pid_prefix[32];
	char	   *pfx;
	size_t		item_max;

	if (opt_txn_prefix == NULL)
	{
		snprintf(pid_prefix, sizeof(pid_prefix), "t%d", (int) getpid());
		opt_txn_prefix = pid_prefix;
	}
	pfx = json_escape(opt_txn_prefix);
	if (opt_consume)
	{
		setup_consume();
		free(q);
		free(pfx);
		return;
	}

	snprintf(buf, sizeof(buf),
			 "POST %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\nContent-Length: ",
			 opt_path, opt_host, opt_port);
	hdr_prefix = strdup(buf);
	hdr_prefix_len = strlen(hdr_prefix);
	hdr_reserve = hdr_prefix_len + 32;

	if (opt_body_file)
	{
		FILE	   *f = fopen(opt_body_file, "rb");
		struct stat sb;
		size_t		blen;
		char	   *p;

		if (f == NULL || fstat(fileno(f), &sb) < 0)
			die_usage("cannot read --body-file %s: %s", opt_body_file, strerror(errno));
		blen = (size_t) sb.st_size;
		fixed_req = xmalloc(hdr_reserve + blen);
		p = append(fixed_req, hdr_prefix, hdr_prefix_len);
		p = put_u64(p, blen);
		p = APPEND_LIT(p, "\r\n\r\n");
		if (fread(p, 1, blen, f) != blen)
			die_usage("cannot read --body-file %s", opt_body_file);
		fclose(f);
		fixed_req_len = (size_t) (p - fixed_req) + blen;
		free(q);
		free(pfx);
		return;
	}

	item_head_len = strlen(q) + 64;
	item_head = xmalloc(item_head_len);
	item_head_len = (size_t) snprintf(item_head, item_head_len,
									  "{\"queue\":\"%s\",\"partition\":\"p", q);
	pad_src = xmalloc((size_t) opt_payload_bytes + PAD_POOL + 1);
	if (opt_pad_random)
	{
		/* hex digits: 4 bits each, so a pad compresses about 2x, as ids do */
		for (size_t i = 0; i < (size_t) opt_payload_bytes + PAD_POOL; i++)
			pad_src[i] = "0123456789abcdef"[rand() & 15];
	}
	else
		memset(pad_src, 'x', (size_t) opt_payload_bytes);

	/* generous upper bound of one item: fixed text + numbers + pad + txn */
	item_max = item_head_len + 128 + (size_t) opt_payload_bytes + strlen(pfx) + 3 * 20;
	reqbuf_cap = hdr_reserve + 16 + (size_t) opt_items * item_max;

	for (int i = 0; i < opt_connections; i++)
	{
		Conn	   *c = &conns[i];
		char		tail[32];

		c->reqbuf = xmalloc(reqbuf_cap);
		c->item_part = xmalloc(sizeof(int) * (size_t) opt_items);
		snprintf(tail, sizeof(tail), "-%d-", i);
		c->txnpfx_len = strlen(pfx) + strlen(tail);
		c->txnpfx = xmalloc(c->txnpfx_len + 1);
		strcpy(c->txnpfx, pfx);
		strcat(c->txnpfx, tail);
		if (opt_dup_every > 0)
		{
			c->ring_seq = xmalloc(sizeof(uint64_t) * DUP_RING);
			c->ring_part = xmalloc(sizeof(int) * DUP_RING);
		}
		c->rng = opt_seed * 0x9E3779B97F4A7C15ULL + (uint64_t) i * 0xBF58476D1CE4E5B9ULL + 1;
		for (int j = 0; j < 4; j++)
			xorshift(&c->rng);
		c->rr = (uint64_t) i;
	}
	free(q);
	free(pfx);
}

static void
resolve(void)
{
	struct addrinfo hints,
			   *res;
	char		port[16];
	int			rc;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	snprintf(port, sizeof(port), "%d", opt_port);
	rc = getaddrinfo(opt_host, port, &hints, &res);
	if (rc != 0)
	{
		fprintf(stderr, "queen-load: cannot resolve %s: %s\n", opt_host, gai_strerror(rc));
		exit(1);
	}
	memcpy(&srv_addr, res->ai_addr, res->ai_addrlen);
	srv_addrlen = res->ai_addrlen;
	freeaddrinfo(res);
}

static void
raise_nofile(void)
{
	struct rlimit rl;
	rlim_t		want = (rlim_t) opt_connections + 64;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want)
		return;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want)
	{
		struct rlimit both = {want, want};

		/* raising the hard limit works only when privileged */
		if (setrlimit(RLIMIT_NOFILE, &both) == 0)
			return;
		want = rl.rlim_max;
	}
	rl.rlim_cur = want;
	setrlimit(RLIMIT_NOFILE, &rl);
	getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur < (rlim_t) opt_connections + 16)
		fprintf(stderr, "queen-load: warning: open files limit %llu is low for %d connections\n",
				(unsigned long long) rl.rlim_cur, opt_connections);
}

static void
report(uint64_t t_end)
{
	uint64_t	t0 = t_first_start ? t_first_start : t_measure;
	uint64_t	t_stop = t_last_done > t0 ? t_last_done : t_end;
	double		secs = t_stop > t0 ? (double) (t_stop - t0) / 1e9 : 0;
	int			first = 1;

	printf("{\"connections\":%d,\"items_per_request\":%d,\"partitions\":%d,\"seconds\":%.3f,"
		   "\"requests\":%llu,\"items\":%llu,\"requests_per_s\":%.1f,\"items_per_s\":%.1f,",
		   opt_connections, opt_items, opt_partitions, secs,
		   (unsigned long long) st_requests, (unsigned long long) st_items,
		   secs > 0 ? (double) st_requests / secs : 0,
		   secs > 0 ? (double) st_items / secs : 0);
	printf("\"latency_ms\":{\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f,\"max\":%.3f},",
		   hist_quantile(0.50) / 1000, hist_quantile(0.90) / 1000,
		   hist_quantile(0.99) / 1000, (double) hist_max / 1000);
	printf("\"http\":{");
	for (int i = 0; i < 1000; i++)
		if (st_http[i])
		{
			printf("%s\"%d\":%llu", first ? "" : ",", i, (unsigned long long) st_http[i]);
			first = 0;
		}
	printf("},\"status\":{\"queued\":%llu,\"duplicate\":%llu,\"buffered\":%llu,\"failed\":%llu,\"other\":%llu},",
		   (unsigned long long) st_queued, (unsigned long long) st_duplicate,
		   (unsigned long long) st_buffered, (unsigned long long) st_failed,
		   (unsigned long long) st_other);
	report_consume();
	printf("\"errors\":{\"connect\":%llu,\"reset\":%llu,\"timeout\":%llu,\"protocol\":%llu},\"connects\":%llu}\n",
		   (unsigned long long) err_connect, (unsigned long long) err_reset,
		   (unsigned long long) err_timeout, (unsigned long long) err_protocol,
		   (unsigned long long) n_connects);
	fflush(stdout);
}

int
main(int argc, char **argv)
{
	struct epoll_event *events;
	int			maxev;
	uint64_t	now;
	int			aborted = 0;

	parse_args(argc, argv);
	conns = calloc((size_t) opt_connections, sizeof(Conn));
	if (conns == NULL)
	{
		fprintf(stderr, "queen-load: out of memory\n");
		return 1;
	}
	setup_requests();
	resolve();
	raise_nofile();
	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	if (opt_results)
	{
		results_fp = fopen(opt_results, "w");
		if (results_fp == NULL)
			die_usage("cannot open --results %s: %s", opt_results, strerror(errno));
		setvbuf(results_fp, NULL, _IOFBF, 1 << 20);
	}

	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0)
	{
		perror("queen-load: epoll_create1");
		return 1;
	}
	maxev = opt_connections < 1024 ? opt_connections : 1024;
	events = xmalloc(sizeof(struct epoll_event) * (size_t) maxev);

	t_begin = now_ns();
	t_measure = t_begin + (uint64_t) (opt_warmup * 1e9);
	t_issue_end = t_measure + (uint64_t) (opt_duration * 1e9);
	t_hard_end = t_begin + (uint64_t) (opt_timeout * 1e9);
	for (int i = 0; i < opt_connections; i++)
	{
		Conn	   *c = &conns[i];

		c->id = i;
		c->fd = -1;
		c->rcap = RBUF_INIT;
		c->rbuf = xmalloc(c->rcap);
		if (opt_rate > 0)
			c->next_send = t_begin + (uint64_t) ((double) NS_PER_SEC * i / opt_rate);
		conn_open(c, t_begin);
	}

	for (;;)
	{
		uint64_t	next;
		int			n,
					timeout_ms;

		now = now_ns();
		if (got_signal || now >= t_hard_end)
		{
			aborted = 1;
			break;
		}
		if (!ever_connected && now >= t_begin + (uint64_t) (opt_connect_timeout * 1e9))
		{
			fprintf(stderr, "queen-load: could not connect to %s:%d\n", opt_host, opt_port);
			aborted = 1;
			break;
		}
		if (!stopping && !may_issue(now))
		{
			/* no new requests: close everything that is not in flight */
			stopping = 1;
			for (int i = 0; i < opt_connections; i++)
				if (conns[i].state != C_SENDING && conns[i].state != C_RECEIVING)
					conn_close(&conns[i]);
		}
		if (stopping && inflight == 0)
			break;

		/* timers: reconnects and --rate pacing */
		next = t_hard_end;
		if (!stopping && opt_duration > 0 && t_issue_end < next)
			next = t_issue_end;
		if (!ever_connected && now + 50000000 < next)
			next = now + 50000000;
		if (pending_timers > 0 || opt_rate > 0)
		{
			for (int i = 0; i < opt_connections; i++)
			{
				Conn	   *c = &conns[i];

				if (c->state == C_RETRY)
				{
					if (c->retry_at <= now)
					{
						pending_timers--;
						c->state = C_OFF;
						conn_open(c, now);
					}
					else if (c->retry_at < next)
						next = c->retry_at;
				}
				else if (c->state == C_WAITING)
				{
					if (c->next_send <= now)
						start_request(c, now);
					else if (c->next_send < next)
						next = c->next_send;
				}
			}
		}
		timeout_ms = next > now ? (int) ((next - now + 999999) / 1000000) : 0;
		if (timeout_ms > 1000)
			timeout_ms = 1000;

		n = epoll_wait(epfd, events, maxev, timeout_ms);
		if (n < 0)
		{
			if (errno == EINTR)
				continue;
			perror("queen-load: epoll_wait");
			return 1;
		}
		now = now_ns();
		for (int i = 0; i < n; i++)
		{
			Conn	   *c = events[i].data.ptr;

			/* a previous event in this batch may have closed it */
			if (c->fd < 0)
				continue;
			on_event(c, events[i].events, now);
		}
	}

	now = now_ns();
	if (aborted)
		for (int i = 0; i < opt_connections; i++)
			if (conns[i].state == C_SENDING || conns[i].state == C_RECEIVING)
				err_timeout++;
	if (results_fp)
		fclose(results_fp);
	free(events);
	report(now);
	return ever_connected ? 0 : 1;
}
