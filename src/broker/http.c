/*-------------------------------------------------------------------------
 *
 * http.c
 *	  The broker's HTTP/1.1 connection layer: accepting, reading, parsing
 *	  (libhttp-parser), dispatching one request at a time per connection,
 *	  and writing responses, without ever blocking the worker.
 *
 * Every socket sits in one inner epoll fd (see http.h for why); epoll is
 * level-triggered, so whatever a poll leaves undone is reported again by the
 * next one and no event can be lost.  The interest of each connection is
 * recomputed after every change: EPOLLIN only while we are willing to take
 * more input, EPOLLOUT only while output is pending.
 *
 * Ordering.  A connection hands its handler one request at a time: the
 * parser is paused when a message completes, and the bytes behind it (a
 * pipelined request) stay buffered until the response is queued.  Responses
 * are therefore appended to the output buffer in request order.  A handler
 * may answer at once (the parse loop then simply continues) or later;
 * queen_http_respond() never calls the handler itself, it queues the
 * connection on a ready list that the next poll works through, so the
 * caller's code is never re-entered.
 *
 * Memory.  The server owns a context; each connection and each request
 * gets a child of it.  A request's context is not under its connection's,
 * because a client may vanish while its request is with the handler: the
 * request is then orphaned and lives until queen_http_respond() frees it.
 * Per-connection memory stays bounded: at most QUEEN_HTTP_MAX_PENDING_IN
 * unparsed bytes, the current request (body up to max_body_bytes), and
 * output; the parse loop stops taking requests while more than
 * QUEEN_HTTP_MAX_PENDING_OUT bytes are unsent, so a client that pipelines
 * but never reads cannot make us buffer its answers without limit.  Reads
 * go to one server-wide scratch buffer and are parsed straight from it, so
 * an idle keep-alive connection holds no buffers at all.
 *
 * Closing.  A connection freed while a poll is running (the event batch may
 * still point at it) is only marked dead and freed at the end of the poll.
 * After an error response or "Connection: close" we shut down our sending
 * side and keep reading for a moment (lingering close): closing a socket
 * with unread input makes the kernel send a reset, which can destroy the
 * response before the client reads it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <linux/sockios.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <http_parser.h>

#include "lib/ilist.h"
#include "utils/memutils.h"

#include "http.h"

/* One recv() into the server's scratch buffer. */
#define QUEEN_HTTP_SCRATCH			(64 * 1024)
/* Unparsed input kept per connection while its request is being handled. */
#define QUEEN_HTTP_MAX_PENDING_IN	(64 * 1024)
/* Unsent output above which no further pipelined request is parsed. */
#define QUEEN_HTTP_MAX_PENDING_OUT	(64 * 1024)
/* Emptied buffers larger than this are given back. */
#define QUEEN_HTTP_KEEP_BUF			(16 * 1024)
/* recv() calls per readable event, so one busy client cannot starve others. */
#define QUEEN_HTTP_READ_ROUNDS		4
#define QUEEN_HTTP_EVENTS			64
/* epoll_wait batches per poll; the rest waits for the next poll. */
#define QUEEN_HTTP_BATCHES			4
#define QUEEN_HTTP_ACCEPTS			256
/* Connections worked from the ready list per poll. */
#define QUEEN_HTTP_READY_STEPS		4096
#define QUEEN_HTTP_LINGER_MS		2000
#define QUEEN_HTTP_ACCEPT_BACKOFF_MS 100
#define QUEEN_HTTP_LOG_EVERY_MS		10000
#define QUEEN_HTTP_MAX_LISTENERS	16
#define QUEEN_HTTP_BACKLOG			1024
/* length of the body of the 503 sent over max_connections */
#define QUEEN_HTTP_BUSY_LEN			37
/* Descriptors kept free beyond the connections (logs, the spool, a spare). */
#define QUEEN_HTTP_FD_RESERVE		64

/* What an epoll event's data.ptr points at: both structs start with it. */
typedef enum QueenHttpKind
{
	QUEEN_HTTP_KIND_LISTENER,
	QUEEN_HTTP_KIND_CONN
} QueenHttpKind;

typedef enum QueenHttpTimer
{
	QUEEN_HTTP_TIMER_NONE,
	QUEEN_HTTP_TIMER_IDLE,
	QUEEN_HTTP_TIMER_LINGER,
	QUEEN_HTTP_TIMER_HEADER,	/* a request began; its header is not complete */
	QUEEN_HTTP_TIMER_BODY		/* its header is complete, its body is not */
} QueenHttpTimer;

/* Which header callback came last: fields and values arrive in pieces. */
typedef enum QueenHttpHdrState
{
	QUEEN_HTTP_HDR_NONE,
	QUEEN_HTTP_HDR_FIELD,
	QUEEN_HTTP_HDR_VALUE
} QueenHttpHdrState;

/* Bytes data[off, len) are live; grows without ever raising ERROR. */
typedef struct QueenHttpBuf
{
	char	   *data;
	size_t		off;
	size_t		len;
	size_t		cap;
} QueenHttpBuf;

typedef struct QueenHttpListener
{
	QueenHttpKind kind;
	int			fd;
} QueenHttpListener;

/* Offsets into QueenHttpReq.hdrs, which moves as it grows. */
typedef struct QueenHttpHeader
{
	size_t		name;
	size_t		value;
} QueenHttpHeader;

struct QueenHttpConn;

typedef struct QueenHttpReq
{
	QueenHttpRequest pub;		/* must be first: the handler sees this */
	QueenHttpServer *srv;
	struct QueenHttpConn *conn; /* NULL once the client is gone */
	bool		keep_alive;
	QueenHttpBuf url;
	QueenHttpBuf hdrs;			/* "name\0value\0" for every header */
	QueenHttpBuf body;
	QueenHttpHeader *headers;
	int			nheaders;
	int			maxheaders;
	QueenHttpHdrState hdr_state;
} QueenHttpReq;

typedef struct QueenHttpConn
{
	QueenHttpKind kind;			/* must be first */
	QueenHttpServer *srv;
	MemoryContext mcxt;
	int			fd;
	uint32		events;			/* interest registered with epoll */
	dlist_node	all_node;		/* srv->conns; srv->dead once closed */
	dlist_node	timer_node;		/* the list of its timer */
	QueenHttpTimer timer;
	int64		timer_base;		/* last activity, or when the timer was set */
	int			outq_seen;		/* kernel send queue at the last idle check */
	dlist_node	ready_node;		/* srv->ready */
	bool		ready;
	http_parser parser;
	QueenHttpBuf in;			/* unparsed input (only while paused) */
	QueenHttpBuf out;			/* unsent output */
	QueenHttpReq *req;			/* being parsed, or with the handler */
	bool		dispatched;		/* req is with the handler */
	bool		in_parse;		/* inside queen_http_parse() */
	bool		close_after;	/* no more requests: close once drained */
	bool		read_eof;		/* the client sent FIN */
	bool		lingering;		/* our side shut down, discarding input */
	bool		dead;
	int			reject_status;	/* set by a callback that refused input */
	char		reject_msg[128];
} QueenHttpConn;

struct QueenHttpServer
{
	MemoryContext mcxt;
	int			epfd;
	QueenHttpListener *listeners;
	int			nlisteners;
	int			port;
	QueenHttpHandler handler;
	void	   *arg;
	size_t		max_body;
	int64		idle_timeout_us;	/* 0: none */
	int64		header_timeout_us;	/* 0: none */
	int64		body_timeout_us;	/* 0: none */
	int			max_connections;	/* what the open-file limit allows */
	int			fd_base;		/* descriptors held before any connection */
	int			spare_fd;		/* given up to refuse a client at EMFILE */
	uint64		fd_limit;		/* soft RLIMIT_NOFILE after raising it */
	bool		stopping;
	bool		in_poll;
	bool		accept_paused;
	bool		conn_closed;	/* a connection closed since accepts paused */
	int64		accept_resume_at;
	int64		accept_logged_at;
	dlist_head	conns;
	dlist_head	dead;
	dlist_head	idle;			/* oldest activity first */
	dlist_head	linger;			/* oldest first */
	dlist_head	header;			/* oldest request start first */
	dlist_head	body;			/* oldest header end first */
	dlist_head	ready;
	int			nopen;
	int			inflight;		/* dispatched, not yet answered */
	QueenHttpStats stats;
	char	   *scratch;
};

static int	queen_http_on_message_begin(http_parser *p);
static int	queen_http_on_url(http_parser *p, const char *at, size_t len);
static int	queen_http_on_header_field(http_parser *p, const char *at, size_t len);
static int	queen_http_on_header_value(http_parser *p, const char *at, size_t len);
static int	queen_http_on_headers_complete(http_parser *p);
static int	queen_http_on_body(http_parser *p, const char *at, size_t len);
static int	queen_http_on_message_complete(http_parser *p);

static const http_parser_settings queen_http_settings = {
	.on_message_begin = queen_http_on_message_begin,
	.on_url = queen_http_on_url,
	.on_header_field = queen_http_on_header_field,
	.on_header_value = queen_http_on_header_value,
	.on_headers_complete = queen_http_on_headers_complete,
	.on_body = queen_http_on_body,
	.on_message_complete = queen_http_on_message_complete,
};

static void queen_http_conn_close(QueenHttpConn *conn);
static void queen_http_flush(QueenHttpConn *conn);
static int	queen_http_count_fds(void);

/* ----------------------------------------------------------------
 *		Small helpers
 * ----------------------------------------------------------------
 */

/* Idle timeouts must not jump with the wall clock. */
static int64
queen_http_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/*
 * Make room for extra more bytes after len.  Allocation failure returns
 * false instead of raising ERROR, since the event loop must survive it; the
 * caller drops the one connection.
 */
static bool
queen_http_buf_reserve(MemoryContext cxt, QueenHttpBuf *buf, size_t extra)
{
	size_t		live = buf->len - buf->off;
	size_t		newcap;
	char	   *data;

	if (buf->cap - buf->len >= extra)
		return true;
	if (buf->off > 0 && buf->cap - live >= extra)
	{
		memmove(buf->data, buf->data + buf->off, live);
		buf->off = 0;
		buf->len = live;
		return true;
	}
	if (extra > SIZE_MAX / 2 - live)
		return false;
	/* exact for a first, known-size allocation (a body), doubling after */
	newcap = Max(live + extra, buf->cap * 2);
	newcap = Max(newcap, 256);
	data = MemoryContextAllocExtended(cxt, newcap,
									  MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);
	if (data == NULL)
		return false;
	if (live > 0)
		memcpy(data, buf->data + buf->off, live);
	if (buf->data)
		pfree(buf->data);
	buf->data = data;
	buf->cap = newcap;
	buf->off = 0;
	buf->len = live;
	return true;
}

static bool
queen_http_buf_append(MemoryContext cxt, QueenHttpBuf *buf,
					  const char *data, size_t len)
{
	if (!queen_http_buf_reserve(cxt, buf, len))
		return false;
	if (len > 0)
		memcpy(buf->data + buf->len, data, len);
	buf->len += len;
	return true;
}

/* Forget the contents; give big buffers back so idle connections are small. */
static void
queen_http_buf_drain(QueenHttpBuf *buf)
{
	buf->off = 0;
	buf->len = 0;
	if (buf->cap > QUEEN_HTTP_KEEP_BUF)
	{
		pfree(buf->data);
		buf->data = NULL;
		buf->cap = 0;
	}
}

static inline size_t
queen_http_buf_pending(const QueenHttpBuf *buf)
{
	return buf->len - buf->off;
}

static const char *
queen_http_reason(int status)
{
	const char *s = http_status_str((enum http_status) status);

	if (s == NULL || s[0] == '<')	/* "<unknown>" */
		return "Unknown";
	return s;
}

static void
queen_http_addr_name(const struct sockaddr *sa, socklen_t salen,
					 char *out, size_t outlen)
{
	char		host[NI_MAXHOST];
	char		serv[NI_MAXSERV];

	if (getnameinfo(sa, salen, host, sizeof(host), serv, sizeof(serv),
					NI_NUMERICHOST | NI_NUMERICSERV) != 0)
		strlcpy(out, "(unknown address)", outlen);
	else if (sa->sa_family == AF_INET6)
		snprintf(out, outlen, "[%s]:%s", host, serv);
	else
		snprintf(out, outlen, "%s:%s", host, serv);
}

/* ----------------------------------------------------------------
 *		Timers: one list per kind, kept in deadline order by appending at
 *		the tail (every entry of a list has the same duration)
 *
 * A connection between requests is on the idle list, whose clock restarts
 * with every byte.  Once a request's first byte is parsed it moves to the
 * header list, and once its header is complete to the body list: those
 * clocks never restart, so a client that trickles a byte at a time cannot
 * hold a connection (and its descriptor) longer than the two deadlines.
 * ----------------------------------------------------------------
 */

static int64
queen_http_linger_us(QueenHttpServer *srv)
{
	int64		linger = (int64) QUEEN_HTTP_LINGER_MS * 1000;

	if (srv->idle_timeout_us > 0)
		return Min(linger, srv->idle_timeout_us);
	return linger;
}

static dlist_head *
queen_http_timer_list(QueenHttpServer *srv, QueenHttpTimer which)
{
	switch (which)
	{
		case QUEEN_HTTP_TIMER_IDLE:
			return &srv->idle;
		case QUEEN_HTTP_TIMER_LINGER:
			return &srv->linger;
		case QUEEN_HTTP_TIMER_HEADER:
			return &srv->header;
		case QUEEN_HTTP_TIMER_BODY:
			return &srv->body;
		default:
			return NULL;
	}
}

static void
queen_http_timer_set(QueenHttpConn *conn, QueenHttpTimer which)
{
	QueenHttpServer *srv = conn->srv;

	if (conn->timer != QUEEN_HTTP_TIMER_NONE)
		dlist_delete(&conn->timer_node);
	conn->timer = which;
	if (which == QUEEN_HTTP_TIMER_NONE)
		return;
	conn->timer_base = queen_http_now();
	dlist_push_tail(queen_http_timer_list(srv, which), &conn->timer_node);
}

/* Progress on an idle-timed connection restarts its clock. */
static void
queen_http_touch(QueenHttpConn *conn)
{
	if (conn->timer != QUEEN_HTTP_TIMER_IDLE)
		return;
	conn->timer_base = queen_http_now();
	dlist_move_tail(&conn->srv->idle, &conn->timer_node);
}

/* ----------------------------------------------------------------
 *		Connection state
 * ----------------------------------------------------------------
 */

/* May the next buffered request be parsed and dispatched now? */
static bool
queen_http_can_parse(QueenHttpConn *conn)
{
	return !conn->dead && !conn->lingering && !conn->dispatched &&
		!conn->close_after &&
		queen_http_buf_pending(&conn->out) < QUEEN_HTTP_MAX_PENDING_OUT;
}

static bool
queen_http_want_read(QueenHttpConn *conn)
{
	if (conn->dead)
		return false;
	if (conn->lingering)
		return true;
	if (conn->read_eof || conn->close_after)
		return false;
	return queen_http_buf_pending(&conn->in) < QUEEN_HTTP_MAX_PENDING_IN;
}

static void
queen_http_update_events(QueenHttpConn *conn)
{
	struct epoll_event ev;
	uint32		want = 0;

	if (conn->dead)
		return;
	if (queen_http_want_read(conn))
		want |= EPOLLIN;
	if (queen_http_buf_pending(&conn->out) > 0)
		want |= EPOLLOUT;
	if (want == conn->events)
		return;
	memset(&ev, 0, sizeof(ev));
	ev.events = want;
	ev.data.ptr = conn;
	if (epoll_ctl(conn->srv->epfd, EPOLL_CTL_MOD, conn->fd, &ev) < 0)
	{
		ereport(LOG,
				(errmsg("queen http: could not update epoll interest: %m")));
		queen_http_conn_close(conn);
		return;
	}
	conn->events = want;
}

static void
queen_http_conn_open(QueenHttpServer *srv, int fd)
{
	MemoryContext cxt;
	QueenHttpConn *conn;
	struct epoll_event ev;
	int			one = 1;

	/* responses are written whole; do not let Nagle hold their tails */
	(void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

	cxt = AllocSetContextCreate(srv->mcxt, "queen http connection",
								ALLOCSET_SMALL_SIZES);
	conn = MemoryContextAllocZero(cxt, sizeof(QueenHttpConn));
	conn->kind = QUEEN_HTTP_KIND_CONN;
	conn->srv = srv;
	conn->mcxt = cxt;
	conn->fd = fd;
	conn->outq_seen = -1;
	http_parser_init(&conn->parser, HTTP_REQUEST);
	conn->parser.data = conn;

	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.ptr = conn;
	if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
	{
		ereport(LOG,
				(errmsg("queen http: could not add a connection to epoll: %m")));
		close(fd);
		MemoryContextDelete(cxt);
		return;
	}
	conn->events = EPOLLIN;
	dlist_push_tail(&srv->conns, &conn->all_node);
	srv->nopen++;
	srv->stats.accepted++;
	queen_http_timer_set(conn, QUEEN_HTTP_TIMER_IDLE);
}

/*
 * Close the socket now; free the memory now or, inside a poll, at its end.
 * A request that is with the handler is orphaned, not freed: the handler
 * still holds it and will answer it.
 */
static void
queen_http_conn_close(QueenHttpConn *conn)
{
	QueenHttpServer *srv = conn->srv;

	if (conn->dead)
		return;
	conn->dead = true;
	(void) epoll_ctl(srv->epfd, EPOLL_CTL_DEL, conn->fd, NULL);
	close(conn->fd);
	conn->fd = -1;
	queen_http_timer_set(conn, QUEEN_HTTP_TIMER_NONE);
	if (conn->ready)
	{
		dlist_delete(&conn->ready_node);
		conn->ready = false;
	}
	dlist_delete(&conn->all_node);
	srv->nopen--;
	srv->conn_closed = true;
	if (conn->req)
	{
		if (conn->dispatched)
			conn->req->conn = NULL;
		else
			MemoryContextDelete(conn->req->pub.mcxt);
		conn->req = NULL;
		conn->dispatched = false;
	}
	if (srv->in_poll || conn->in_parse)
		dlist_push_tail(&srv->dead, &conn->all_node);
	else
		MemoryContextDelete(conn->mcxt);
}

/*
 * Drop the request being parsed (not one that is with the handler).  Its
 * deadline goes with it: what remains is an answer to drain.
 */
static void
queen_http_drop_partial(QueenHttpConn *conn)
{
	if (conn->req && !conn->dispatched)
	{
		MemoryContextDelete(conn->req->pub.mcxt);
		conn->req = NULL;
	}
	if (conn->timer == QUEEN_HTTP_TIMER_HEADER || conn->timer == QUEEN_HTTP_TIMER_BODY)
		queen_http_timer_set(conn, QUEEN_HTTP_TIMER_IDLE);
}

/*
 * Everything is answered but the client may still be sending (a body we
 * refused, pipelined requests after "Connection: close").  Stop sending and
 * read until it notices or a short timer runs out.
 */
static void
queen_http_linger(QueenHttpConn *conn)
{
	queen_http_drop_partial(conn);
	queen_http_buf_drain(&conn->in);
	if (shutdown(conn->fd, SHUT_WR) < 0)
	{
		queen_http_conn_close(conn);
		return;
	}
	conn->lingering = true;
	queen_http_timer_set(conn, QUEEN_HTTP_TIMER_LINGER);
}

/* ----------------------------------------------------------------
 *		Output
 * ----------------------------------------------------------------
 */

/*
 * Append one complete response to conn->out.  Returns false only when
 * memory for it cannot be had.
 */
static bool
queen_http_queue(QueenHttpConn *conn, int status, const char *content_type,
				 const char *body, size_t body_len, const char *extra_headers,
				 bool keep_alive, bool head)
{
	/* RFC 9110: these never carry content, nor a length for it */
	bool		no_body = (status < 200 || status == 204 || status == 304);
	size_t		ctype_len = content_type ? strlen(content_type) : 0;
	size_t		extra_len = extra_headers ? strlen(extra_headers) : 0;
	size_t		send_len = (no_body || head) ? 0 : body_len;
	const char *conn_hdr = keep_alive ? "Connection: keep-alive\r\n" :
		"Connection: close\r\n";
	char	   *start;
	char	   *p;

	if (status < 100 || status > 999)
		status = 500;
	/* 160 covers the status line, Content-Length, Connection, separators */
	if (!queen_http_buf_reserve(conn->mcxt, &conn->out,
								160 + ctype_len + extra_len + send_len))
		return false;
	start = p = conn->out.data + conn->out.len;
	p += snprintf(p, 80, "HTTP/1.1 %d %s\r\n", status, queen_http_reason(status));
	if (!no_body)
		p += snprintf(p, 48, "Content-Length: %zu\r\n", body_len);
	if (content_type)
	{
		memcpy(p, "Content-Type: ", 14);
		p += 14;
		memcpy(p, content_type, ctype_len);
		p += ctype_len;
		memcpy(p, "\r\n", 2);
		p += 2;
	}
	memcpy(p, conn_hdr, strlen(conn_hdr));
	p += strlen(conn_hdr);
	if (extra_len > 0)
	{
		memcpy(p, extra_headers, extra_len);
		p += extra_len;
		if (extra_headers[extra_len - 1] != '\n')
		{
			memcpy(p, "\r\n", 2);
			p += 2;
		}
	}
	memcpy(p, "\r\n", 2);
	p += 2;
	if (send_len > 0)
	{
		memcpy(p, body, send_len);
		p += send_len;
	}
	conn->out.len += p - start;
	return true;
}

/*
 * Answer bad input ourselves, as JSON, and stop reading requests from this
 * connection: after a parse error the byte stream cannot be trusted.
 */
static void
queen_http_error(QueenHttpConn *conn, int status, const char *msg)
{
	char		body[384];
	size_t		n = 0;
	const char *c;

	n = strlcpy(body, "{\"error\":\"", sizeof(body));
	for (c = msg; *c && n < sizeof(body) - 8; c++)
	{
		if (*c == '"' || *c == '\\')
			body[n++] = '\\';
		body[n++] = ((unsigned char) *c < 0x20) ? ' ' : *c;
	}
	memcpy(body + n, "\"}", 2);
	n += 2;

	queen_http_drop_partial(conn);
	if (status >= 400 && status < 500)
		conn->srv->stats.rejected++;
	conn->close_after = true;
	if (!queen_http_queue(conn, status, "application/json", body, n, NULL,
						  false, false))
		queen_http_conn_close(conn);
}

/*
 * Write what we can.  Once the output is drained, finish a closing
 * connection, and put a connection that has buffered requests it may now
 * parse on the ready list.
 */
static void
queen_http_flush(QueenHttpConn *conn)
{
	QueenHttpServer *srv = conn->srv;

	if (conn->dead)
		return;
	/*
	 * The client finished sending and everything it sent is parsed: a
	 * request it began and did not finish is answered (our side of the
	 * connection is still open), the rest is answered already.
	 */
	if (conn->read_eof && !conn->close_after && !conn->dispatched &&
		queen_http_buf_pending(&conn->in) == 0)
	{
		if (conn->req != NULL)
			queen_http_error(conn, 400,
							 conn->timer == QUEEN_HTTP_TIMER_BODY ?
							 "the connection was closed before the request body was complete" :
							 "the connection was closed before the request header was complete");
		else
			conn->close_after = true;
	}

	while (queen_http_buf_pending(&conn->out) > 0)
	{
		ssize_t		n;

		n = send(conn->fd, conn->out.data + conn->out.off,
				 queen_http_buf_pending(&conn->out), MSG_NOSIGNAL);
		if (n > 0)
		{
			conn->out.off += n;
			conn->outq_seen = -1;
			queen_http_touch(conn);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0 || errno == EAGAIN || errno == EWOULDBLOCK)
			break;
		/* EPIPE, ECONNRESET...: nobody is listening any more */
		queen_http_conn_close(conn);
		return;
	}

	if (queen_http_buf_pending(&conn->out) == 0)
	{
		queen_http_buf_drain(&conn->out);
		if (conn->close_after && !conn->dispatched && !conn->lingering)
		{
			if (conn->read_eof)
			{
				queen_http_conn_close(conn);
				return;
			}
			queen_http_linger(conn);
			if (conn->dead)
				return;
		}
	}

	if (!conn->ready && queen_http_can_parse(conn) &&
		queen_http_buf_pending(&conn->in) > 0)
	{
		dlist_push_tail(&srv->ready, &conn->ready_node);
		conn->ready = true;
	}
	queen_http_update_events(conn);
}

/* ----------------------------------------------------------------
 *		Parser callbacks
 * ----------------------------------------------------------------
 */

/* Remember why we refused, and make the parser stop. */
static int
queen_http_reject(QueenHttpConn *conn, int status, const char *msg)
{
	conn->reject_status = status;
	strlcpy(conn->reject_msg, msg, sizeof(conn->reject_msg));
	return -1;
}

static int
queen_http_oom(QueenHttpConn *conn)
{
	return queen_http_reject(conn, 503, "out of memory");
}

static int
queen_http_on_message_begin(http_parser *p)
{
	QueenHttpConn *conn = p->data;
	MemoryContext cxt;
	QueenHttpReq *req;

	queen_http_drop_partial(conn);
	cxt = AllocSetContextCreate(conn->srv->mcxt, "queen http request",
								ALLOCSET_DEFAULT_SIZES);
	req = MemoryContextAllocZero(cxt, sizeof(QueenHttpReq));
	req->pub.mcxt = cxt;
	req->srv = conn->srv;
	req->conn = conn;
	conn->req = req;
	queen_http_timer_set(conn, QUEEN_HTTP_TIMER_HEADER);
	return 0;
}

static int
queen_http_on_url(http_parser *p, const char *at, size_t len)
{
	QueenHttpConn *conn = p->data;
	QueenHttpReq *req = conn->req;

	if (!queen_http_buf_append(req->pub.mcxt, &req->url, at, len))
		return queen_http_oom(conn);
	return 0;
}

/* NUL-terminate the value being received, without trailing blanks. */
static bool
queen_http_end_value(QueenHttpReq *req)
{
	QueenHttpHeader *h = &req->headers[req->nheaders - 1];

	while (req->hdrs.len > h->value &&
		   (req->hdrs.data[req->hdrs.len - 1] == ' ' ||
			req->hdrs.data[req->hdrs.len - 1] == '\t'))
		req->hdrs.len--;
	return queen_http_buf_append(req->pub.mcxt, &req->hdrs, "", 1);
}

/* Close the last header; called when headers (or trailers) are complete. */
static bool
queen_http_end_headers(QueenHttpReq *req)
{
	QueenHttpHdrState state = req->hdr_state;

	req->hdr_state = QUEEN_HTTP_HDR_NONE;
	if (state == QUEEN_HTTP_HDR_VALUE)
		return queen_http_end_value(req);
	if (state == QUEEN_HTTP_HDR_FIELD)
	{
		/* a name the parser never gave a value: make it empty */
		if (!queen_http_buf_append(req->pub.mcxt, &req->hdrs, "", 1))
			return false;
		req->headers[req->nheaders - 1].value = req->hdrs.len;
		return queen_http_buf_append(req->pub.mcxt, &req->hdrs, "", 1);
	}
	return true;
}

static int
queen_http_on_header_field(http_parser *p, const char *at, size_t len)
{
	QueenHttpConn *conn = p->data;
	QueenHttpReq *req = conn->req;

	if (req->hdr_state != QUEEN_HTTP_HDR_FIELD)
	{
		if (req->hdr_state == QUEEN_HTTP_HDR_VALUE && !queen_http_end_value(req))
			return queen_http_oom(conn);
		if (req->nheaders == req->maxheaders)
		{
			int			newmax = Max(16, req->maxheaders * 2);
			QueenHttpHeader *h;

			h = MemoryContextAllocExtended(req->pub.mcxt,
										   newmax * sizeof(QueenHttpHeader),
										   MCXT_ALLOC_NO_OOM);
			if (h == NULL)
				return queen_http_oom(conn);
			if (req->nheaders > 0)
			{
				memcpy(h, req->headers, req->nheaders * sizeof(QueenHttpHeader));
				pfree(req->headers);
			}
			req->headers = h;
			req->maxheaders = newmax;
		}
		req->headers[req->nheaders].name = req->hdrs.len;
		req->headers[req->nheaders].value = 0;
		req->nheaders++;
		req->hdr_state = QUEEN_HTTP_HDR_FIELD;
	}
	if (!queen_http_buf_append(req->pub.mcxt, &req->hdrs, at, len))
		return queen_http_oom(conn);
	return 0;
}

static int
queen_http_on_header_value(http_parser *p, const char *at, size_t len)
{
	QueenHttpConn *conn = p->data;
	QueenHttpReq *req = conn->req;

	if (req->hdr_state != QUEEN_HTTP_HDR_VALUE)
	{
		if (req->hdr_state != QUEEN_HTTP_HDR_FIELD)
			return 0;			/* a value without a name: nothing to keep */
		if (!queen_http_buf_append(req->pub.mcxt, &req->hdrs, "", 1))
			return queen_http_oom(conn);
		req->headers[req->nheaders - 1].value = req->hdrs.len;
		req->hdr_state = QUEEN_HTTP_HDR_VALUE;
	}
	if (!queen_http_buf_append(req->pub.mcxt, &req->hdrs, at, len))
		return queen_http_oom(conn);
	return 0;
}

/*
 * Split the request target in place into path and query.  Absolute-form
 * targets ("http://host/path") are reduced to their path; a fragment,
 * which clients should not send, is dropped.
 */
static bool
queen_http_split_url(QueenHttpReq *req)
{
	char	   *rest;
	char	   *c;

	if (!queen_http_buf_append(req->pub.mcxt, &req->url, "", 1))
		return false;
	rest = req->url.data;
	if (rest[0] != '/' && rest[0] != '*')
	{
		char	   *scheme = strstr(rest, "://");

		if (scheme)
			rest = scheme + 3 + strcspn(scheme + 3, "/?#");
	}
	if ((c = strchr(rest, '#')) != NULL)
		*c = '\0';
	req->pub.query = NULL;
	if ((c = strchr(rest, '?')) != NULL)
	{
		*c = '\0';
		req->pub.query = c + 1;
	}
	if (rest[0] != '\0')
		req->pub.path = rest;
	else
		req->pub.path = MemoryContextStrdup(req->pub.mcxt, "/");
	return true;
}

/*
 * RFC 9112 6.1: a request with a transfer coding we do not know is 501.
 * Only "chunked" is known; http_parser would take "gzip, chunked" as
 * chunked and hand us the still-compressed bytes as the body.
 */
static const char *
queen_http_unknown_coding(QueenHttpReq *req, char *buf, size_t buflen)
{
	int			i;

	for (i = 0; i < req->nheaders; i++)
	{
		const char *v;

		if (pg_strcasecmp(req->hdrs.data + req->headers[i].name,
						  "Transfer-Encoding") != 0)
			continue;
		v = req->hdrs.data + req->headers[i].value;
		while (*v != '\0')
		{
			size_t		len;

			v += strspn(v, " \t,");
			len = strcspn(v, ",");
			while (len > 0 && (v[len - 1] == ' ' || v[len - 1] == '\t'))
				len--;
			if (len > 0 && !(len == 7 && pg_strncasecmp(v, "chunked", 7) == 0))
			{
				snprintf(buf, buflen, "transfer coding \"%.*s\" is not implemented",
						 (int) Min(len, 40), v);
				return buf;
			}
			v += len;
			v += strcspn(v, ",");
		}
	}
	return NULL;
}

static int
queen_http_on_headers_complete(http_parser *p)
{
	QueenHttpConn *conn = p->data;
	QueenHttpServer *srv = conn->srv;
	QueenHttpReq *req = conn->req;
	bool		has_length = (p->flags & F_CONTENTLENGTH) != 0;
	bool		has_body;
	char		coding[96];

	if (!queen_http_end_headers(req) || !queen_http_split_url(req))
		return queen_http_oom(conn);

	/* the parser takes any digit.digit; we speak 1.0 and 1.1 only */
	if (p->http_major != 1 || p->http_minor > 1)
	{
		snprintf(coding, sizeof(coding), "HTTP/%d.%d is not supported (HTTP/1.0 and HTTP/1.1 are)",
				 p->http_major, p->http_minor);
		return queen_http_reject(conn, 505, coding);
	}
	if (queen_http_unknown_coding(req, coding, sizeof(coding)) != NULL)
		return queen_http_reject(conn, 501, coding);

	if (has_length && p->content_length > srv->max_body)
	{
		char		msg[96];

		snprintf(msg, sizeof(msg), "request body exceeds %zu bytes",
				 srv->max_body);
		return queen_http_reject(conn, 413, msg);
	}
	has_body = (p->flags & F_CHUNKED) || (has_length && p->content_length > 0);
	if (has_body)
		queen_http_timer_set(conn, QUEEN_HTTP_TIMER_BODY);
	/* one allocation for a body of announced size */
	if (has_length && p->content_length > 0 &&
		!queen_http_buf_reserve(req->pub.mcxt, &req->body,
								(size_t) p->content_length + 1))
		return queen_http_oom(conn);

	/*
	 * curl and others wait (about a second) for this before sending a body.
	 * Earlier responses are already queued, so it goes out in order.
	 */
	if (has_body && p->http_major == 1 && p->http_minor >= 1)
	{
		const char *expect = queen_http_header(&req->pub, "Expect");

		if (expect && pg_strcasecmp(expect, "100-continue") == 0)
		{
			static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";

			if (!queen_http_buf_append(conn->mcxt, &conn->out, cont,
									   sizeof(cont) - 1))
				return queen_http_oom(conn);
		}
	}
	return 0;
}

static int
queen_http_on_body(http_parser *p, const char *at, size_t len)
{
	QueenHttpConn *conn = p->data;
	QueenHttpServer *srv = conn->srv;
	QueenHttpReq *req = conn->req;

	/* chunked bodies announce no size: check as they grow */
	if (len > srv->max_body || req->body.len > srv->max_body - len)
	{
		char		msg[96];

		snprintf(msg, sizeof(msg), "request body exceeds %zu bytes",
				 srv->max_body);
		return queen_http_reject(conn, 413, msg);
	}
	if (!queen_http_buf_append(req->pub.mcxt, &req->body, at, len))
		return queen_http_oom(conn);
	return 0;
}

static int
queen_http_on_message_complete(http_parser *p)
{
	QueenHttpConn *conn = p->data;
	QueenHttpReq *req = conn->req;

	/* trailers of a chunked body arrive as more headers */
	if (!queen_http_end_headers(req) ||
		!queen_http_buf_reserve(req->pub.mcxt, &req->body, 1))
		return queen_http_oom(conn);
	req->body.data[req->body.len] = '\0';
	req->pub.body = req->body.data;
	req->pub.body_len = req->body.len;
	req->pub.method = p->method;
	/* after an Upgrade or CONNECT the rest is not HTTP: answer and close */
	req->keep_alive = http_should_keep_alive(p) && !p->upgrade;
	/* one request at a time: the rest waits for this one's response */
	http_parser_pause(p, 1);
	return 0;
}

/* ----------------------------------------------------------------
 *		Input
 * ----------------------------------------------------------------
 */

static void
queen_http_dispatch(QueenHttpConn *conn)
{
	QueenHttpServer *srv = conn->srv;

	conn->dispatched = true;
	/* the handler may take its time: that is not the client idling */
	queen_http_timer_set(conn, QUEEN_HTTP_TIMER_NONE);
	srv->inflight++;
	srv->stats.requests++;
	srv->handler(&conn->req->pub, srv->arg);
}

static void
queen_http_parse_error(QueenHttpConn *conn, enum http_errno err)
{
	if (conn->reject_status != 0)
		queen_http_error(conn, conn->reject_status, conn->reject_msg);
	else if (err == HPE_HEADER_OVERFLOW)
		queen_http_error(conn, 431, http_errno_description(err));
	else if (err == HPE_INVALID_TRANSFER_ENCODING)
		queen_http_error(conn, 501, "a transfer coding other than chunked is not implemented");
	else if (err == HPE_INVALID_CHUNK_SIZE ||
			 (err == HPE_INVALID_CONTENT_LENGTH && (conn->parser.flags & F_CHUNKED)))
	{
		/* the parser reports a chunk size that overflows as a content-length error */
		queen_http_error(conn, 400, "invalid chunk size in the chunked request body");
	}
	else
		queen_http_error(conn, 400, http_errno_description(err));
}

/*
 * Feed data to the parser, dispatching each complete request, for as long
 * as the connection may take requests.  Returns the bytes consumed; the
 * rest must be kept for later unless the connection is closing.
 */
static size_t
queen_http_parse(QueenHttpConn *conn, const char *data, size_t len)
{
	size_t		done = 0;

	conn->in_parse = true;
	while (done < len && queen_http_can_parse(conn))
	{
		size_t		n;
		enum http_errno err;

		if (HTTP_PARSER_ERRNO(&conn->parser) == HPE_PAUSED)
			http_parser_pause(&conn->parser, 0);
		n = http_parser_execute(&conn->parser, &queen_http_settings,
								data + done, len - done);
		done += n;
		err = HTTP_PARSER_ERRNO(&conn->parser);
		if (err == HPE_PAUSED)
		{
			queen_http_dispatch(conn);
			continue;
		}
		if (err != HPE_OK)
		{
			queen_http_parse_error(conn, err);
			break;
		}
		if (n == 0)
			break;				/* cannot happen; never spin on it */
	}
	conn->in_parse = false;
	return done;
}

/*
 * Parse what is buffered if the connection may take a request now, then
 * write.  Used for the ready list and for writable sockets.
 */
static void
queen_http_conn_work(QueenHttpConn *conn)
{
	if (conn->dead)
		return;
	if (conn->ready)
	{
		dlist_delete(&conn->ready_node);
		conn->ready = false;
	}
	if (queen_http_can_parse(conn) && queen_http_buf_pending(&conn->in) > 0)
	{
		size_t		n;

		n = queen_http_parse(conn, conn->in.data + conn->in.off,
							 queen_http_buf_pending(&conn->in));
		if (conn->dead)
			return;
		conn->in.off += n;
		if (conn->close_after || queen_http_buf_pending(&conn->in) == 0)
			queen_http_buf_drain(&conn->in);
	}
	queen_http_flush(conn);
}

static void
queen_http_conn_read(QueenHttpConn *conn)
{
	QueenHttpServer *srv = conn->srv;
	int			rounds;

	for (rounds = 0; rounds < QUEEN_HTTP_READ_ROUNDS; rounds++)
	{
		bool		scratch;
		char	   *dst;
		size_t		room;
		ssize_t		n;

		if (conn->dead || !queen_http_want_read(conn))
			break;

		/*
		 * Nothing buffered: parse straight from the scratch buffer and keep
		 * only what the parser leaves.  Otherwise append, so bytes stay in
		 * order behind the buffered ones.
		 */
		scratch = conn->lingering ||
			(queen_http_can_parse(conn) && queen_http_buf_pending(&conn->in) == 0);
		if (scratch)
		{
			dst = srv->scratch;
			room = QUEEN_HTTP_SCRATCH;
		}
		else
		{
			room = QUEEN_HTTP_MAX_PENDING_IN - queen_http_buf_pending(&conn->in);
			if (!queen_http_buf_reserve(conn->mcxt, &conn->in, room))
			{
				queen_http_conn_close(conn);
				return;
			}
			dst = conn->in.data + conn->in.len;
		}

		n = recv(conn->fd, dst, room, 0);
		if (n < 0)
		{
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			queen_http_conn_close(conn);
			return;
		}
		if (n == 0)
		{
			if (conn->lingering)
			{
				queen_http_conn_close(conn);
				return;
			}
			conn->read_eof = true;
			break;
		}
		if (conn->lingering)
			continue;			/* discard */

		queen_http_touch(conn);
		if (scratch)
		{
			size_t		used = queen_http_parse(conn, dst, n);

			if (!conn->dead && !conn->close_after && used < (size_t) n &&
				!queen_http_buf_append(conn->mcxt, &conn->in, dst + used,
									   n - used))
			{
				queen_http_conn_close(conn);
				return;
			}
		}
		else
			conn->in.len += n;
		if ((size_t) n < room)
			break;				/* drained; spare the recv() for EAGAIN */
	}
	queen_http_conn_work(conn);
}

/* ----------------------------------------------------------------
 *		Accepting
 * ----------------------------------------------------------------
 */

static void
queen_http_set_listen_events(QueenHttpServer *srv, uint32 events)
{
	int			i;

	for (i = 0; i < srv->nlisteners; i++)
	{
		struct epoll_event ev;

		memset(&ev, 0, sizeof(ev));
		ev.events = events;
		ev.data.ptr = &srv->listeners[i];
		(void) epoll_ctl(srv->epfd, EPOLL_CTL_MOD, srv->listeners[i].fd, &ev);
	}
}

/*
 * Out of descriptors or memory: the pending connection stays in the
 * backlog and the level-triggered listener would fire forever.  Stop
 * listening until a connection closes or a short while has passed.
 */
static void
queen_http_pause_accept(QueenHttpServer *srv, int err)
{
	int64		now = queen_http_now();

	if (now - srv->accept_logged_at >= (int64) QUEEN_HTTP_LOG_EVERY_MS * 1000)
	{
		ereport(LOG,
				(errmsg("queen http: could not accept a connection: %s",
						strerror(err)),
				 errdetail("Accepting is paused until a connection closes.")));
		srv->accept_logged_at = now;
	}
	srv->accept_paused = true;
	srv->conn_closed = false;
	srv->accept_resume_at = now + (int64) QUEEN_HTTP_ACCEPT_BACKOFF_MS * 1000;
	queen_http_set_listen_events(srv, 0);
}

/* At most one line per QUEEN_HTTP_LOG_EVERY_MS, however many are refused. */
static void
queen_http_log_refusal(QueenHttpServer *srv, int err)
{
	int64		now = queen_http_now();

	if (now - srv->accept_logged_at < (int64) QUEEN_HTTP_LOG_EVERY_MS * 1000)
		return;
	ereport(LOG,
			(errmsg("queen http: out of file descriptors (%s) with %d connections open; new clients get 503",
					strerror(err), srv->nopen),
			 errhint("Raise the hard open-file limit (ulimit -Hn) of the server, or lower queen.http_max_connections.")));
	srv->accept_logged_at = now;
}

static void
queen_http_maybe_resume_accept(QueenHttpServer *srv)
{
	if (!srv->accept_paused || srv->stopping)
		return;
	if (!srv->conn_closed && queen_http_now() < srv->accept_resume_at)
		return;
	srv->accept_paused = false;
	queen_http_set_listen_events(srv, EPOLLIN);
}

static void
queen_http_accept(QueenHttpServer *srv, QueenHttpListener *l)
{
#define QUEEN_HTTP_BUSY_BODY "{\"error\":\"too many open connections\"}"
	static const char busy[] =
		"HTTP/1.1 503 Service Unavailable\r\n"
		"Content-Type: application/json\r\n"
		"Content-Length: " CppAsString2(QUEEN_HTTP_BUSY_LEN) "\r\n"
		"Connection: close\r\n\r\n"
		QUEEN_HTTP_BUSY_BODY;
	int			i;

	StaticAssertStmt(sizeof(QUEEN_HTTP_BUSY_BODY) - 1 == QUEEN_HTTP_BUSY_LEN,
					 "Content-Length of the 503 body");

	for (i = 0; i < QUEEN_HTTP_ACCEPTS; i++)
	{
		int			fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0)
		{
			int			err = errno;

			if (err == EAGAIN || err == EWOULDBLOCK)
				return;
			/* the client gave up, or a transient per-connection failure */
			if (err == EINTR || err == ECONNABORTED || err == EPROTO ||
				err == EPERM)
				continue;

			/*
			 * Out of descriptors: give up the spare one to take the client
			 * off the backlog and tell it 503, instead of leaving it hanging
			 * there until a connection closes.
			 */
			if ((err == EMFILE || err == ENFILE) && srv->spare_fd >= 0)
			{
				int			again;

				close(srv->spare_fd);
				fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
				again = errno;
				if (fd >= 0)
				{
					(void) send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
					close(fd);
					srv->stats.refused++;
				}
				/* after closing the client's, or the spare's slot is its */
				srv->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
				if (fd >= 0)
				{
					queen_http_log_refusal(srv, err);
					continue;
				}
				if (again == EAGAIN || again == EWOULDBLOCK)
					return;
			}
			queen_http_pause_accept(srv, err);
			return;
		}
		if (srv->nopen >= srv->max_connections)
		{
			/* best effort: the client may see a reset instead */
			(void) send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
			close(fd);
			srv->stats.refused++;
			continue;
		}
		queen_http_conn_open(srv, fd);
	}
}

/* ----------------------------------------------------------------
 *		Listening sockets
 * ----------------------------------------------------------------
 */

static void
queen_http_close_listeners(QueenHttpServer *srv)
{
	int			i;

	for (i = 0; i < srv->nlisteners; i++)
	{
		(void) epoll_ctl(srv->epfd, EPOLL_CTL_DEL, srv->listeners[i].fd, NULL);
		close(srv->listeners[i].fd);
		srv->listeners[i].fd = -1;
	}
	srv->nlisteners = 0;
}

/*
 * Bind every address the name resolves to.  Any failure fails the whole
 * server (a half-bound broker is a surprise), except that "*" skips address
 * families the kernel does not support (IPv6 disabled).
 */
static bool
queen_http_listen(QueenHttpServer *srv, const QueenHttpConfig *cfg,
				  char **error)
{
	struct addrinfo hints;
	struct addrinfo *res;
	struct addrinfo *ai;
	const char *addr = cfg->listen_address;
	char	   *host = NULL;
	char		portstr[16];
	char		name[NI_MAXHOST + NI_MAXSERV + 4];
	int			rc;

	if (addr != NULL && addr[0] != '\0' && strcmp(addr, "*") != 0)
	{
		size_t		len = strlen(addr);

		/* accept "[::1]" as well as "::1" */
		if (addr[0] == '[' && len > 2 && addr[len - 1] == ']')
			host = pnstrdup(addr + 1, len - 2);
		else
			host = pstrdup(addr);
	}
	if (cfg->port < 0 || cfg->port > 65535)
	{
		*error = psprintf("invalid port %d", cfg->port);
		return false;
	}
	snprintf(portstr, sizeof(portstr), "%d", cfg->port);
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_protocol = IPPROTO_TCP;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	rc = getaddrinfo(host, portstr, &hints, &res);
	if (rc != 0)
	{
		*error = psprintf("could not resolve listen address \"%s\": %s",
						  host ? host : "*", gai_strerror(rc));
		return false;
	}

	srv->listeners = MemoryContextAllocZero(srv->mcxt,
											sizeof(QueenHttpListener) * QUEEN_HTTP_MAX_LISTENERS);
	for (ai = res; ai != NULL && srv->nlisteners < QUEEN_HTTP_MAX_LISTENERS;
		 ai = ai->ai_next)
	{
		QueenHttpListener *l = &srv->listeners[srv->nlisteners];
		struct epoll_event ev;
		int			fd;
		int			one = 1;

		queen_http_addr_name(ai->ai_addr, ai->ai_addrlen, name, sizeof(name));
		fd = socket(ai->ai_family,
					ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
					ai->ai_protocol);
		if (fd < 0)
		{
			int			err = errno;

			if (host == NULL && err == EAFNOSUPPORT)
				continue;
			*error = psprintf("could not create a socket for %s: %s",
							  name, strerror(err));
			goto fail;
		}
		if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
			(cfg->reuse_port &&
			 setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0) ||
			(ai->ai_family == AF_INET6 &&
			 setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0))
		{
			int			err = errno;

			close(fd);
			*error = psprintf("could not set socket options for %s: %s",
							  name, strerror(err));
			goto fail;
		}
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0)
		{
			int			err = errno;

			close(fd);
			*error = psprintf("could not bind %s: %s", name, strerror(err));
			goto fail;
		}
		if (listen(fd, QUEEN_HTTP_BACKLOG) < 0)
		{
			int			err = errno;

			close(fd);
			*error = psprintf("could not listen on %s: %s", name, strerror(err));
			goto fail;
		}
		l->kind = QUEEN_HTTP_KIND_LISTENER;
		l->fd = fd;
		memset(&ev, 0, sizeof(ev));
		ev.events = EPOLLIN;
		ev.data.ptr = l;
		if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		{
			int			err = errno;

			close(fd);
			*error = psprintf("could not add %s to epoll: %s", name,
							  strerror(err));
			goto fail;
		}
		srv->nlisteners++;
	}
	freeaddrinfo(res);

	if (srv->nlisteners == 0)
	{
		*error = psprintf("no address to listen on for \"%s\"",
						  host ? host : "*");
		return false;
	}

	{
		struct sockaddr_storage ss;
		socklen_t	sslen = sizeof(ss);

		srv->port = cfg->port;
		if (getsockname(srv->listeners[0].fd, (struct sockaddr *) &ss, &sslen) == 0)
		{
			if (ss.ss_family == AF_INET)
				srv->port = ntohs(((struct sockaddr_in *) &ss)->sin_port);
			else if (ss.ss_family == AF_INET6)
				srv->port = ntohs(((struct sockaddr_in6 *) &ss)->sin6_port);
		}
	}
	if (host)
		pfree(host);
	return true;

fail:
	freeaddrinfo(res);
	if (host)
		pfree(host);
	return false;
}

/* ----------------------------------------------------------------
 *		Public interface
 * ----------------------------------------------------------------
 */

QueenHttpServer *
queen_http_create(const QueenHttpConfig *cfg, QueenHttpHandler handler,
				  void *arg, char **error)
{
	MemoryContext cxt;
	QueenHttpServer *srv;

	*error = NULL;
	cxt = AllocSetContextCreate(CurrentMemoryContext, "queen http server",
								ALLOCSET_DEFAULT_SIZES);
	srv = MemoryContextAllocZero(cxt, sizeof(QueenHttpServer));
	srv->mcxt = cxt;
	srv->handler = handler;
	srv->arg = arg;
	dlist_init(&srv->conns);
	dlist_init(&srv->dead);
	dlist_init(&srv->idle);
	dlist_init(&srv->linger);
	dlist_init(&srv->header);
	dlist_init(&srv->body);
	dlist_init(&srv->ready);
	srv->spare_fd = -1;
	srv->scratch = MemoryContextAlloc(cxt, QUEEN_HTTP_SCRATCH);

	srv->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (srv->epfd < 0)
	{
		*error = psprintf("could not create an epoll descriptor: %s",
						  strerror(errno));
		MemoryContextDelete(cxt);
		return NULL;
	}
	/* error messages go to the caller's context, which stays current */
	if (!queen_http_listen(srv, cfg, error))
	{
		queen_http_close_listeners(srv);
		close(srv->epfd);
		MemoryContextDelete(cxt);
		return NULL;
	}
	srv->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	srv->fd_base = queen_http_count_fds();
	queen_http_reconfigure(srv, cfg);
	return srv;
}

int
queen_http_epoll_fd(QueenHttpServer *srv)
{
	return srv->epfd;
}

/* The port actually bound (of the first address): useful with port 0. */
int
queen_http_bound_port(QueenHttpServer *srv)
{
	return srv->port;
}

/* Descriptors this process holds now. */
static int
queen_http_count_fds(void)
{
	DIR		   *dir = opendir("/proc/self/fd");
	struct dirent *de;
	int			n = 0;

	if (dir == NULL)
		return 64;				/* a guess; the reserve covers it */
	while ((de = readdir(dir)) != NULL)
		if (de->d_name[0] != '.')
			n++;
	closedir(dir);
	return n;
}

/*
 * Every connection is a descriptor, and the soft open-file limit a worker
 * inherits is often 1024, far below the connections allowed: accept() then
 * fails with EMFILE while the clients in the backlog wait for nothing.
 * Raise the soft limit towards the hard one, to fit the connections, what
 * the process held before any of them and a reserve; if the hard limit is
 * lower, allow only the connections that fit, so that a client over them
 * is answered 503 by the check in queen_http_accept().  (The spare
 * descriptor covers what is left: a limit lowered from outside.)
 */
static void
queen_http_fit_fd_limit(QueenHttpServer *srv, int wanted)
{
	struct rlimit rl;
	uint64		need = (uint64) wanted + srv->fd_base + QUEEN_HTTP_FD_RESERVE;
	uint64		cur;

	srv->max_connections = wanted;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	if (rl.rlim_cur == RLIM_INFINITY)
	{
		srv->fd_limit = PG_UINT64_MAX;
		return;
	}
	cur = rl.rlim_cur;
	if (cur < need)
	{
		struct rlimit raised = rl;

		raised.rlim_cur = (rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need) ?
			need : rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &raised) == 0)
			cur = raised.rlim_cur;
		else
			ereport(LOG,
					(errmsg("queen http: could not raise the open-file limit from %lu to %lu: %m",
							(unsigned long) rl.rlim_cur, (unsigned long) raised.rlim_cur)));
	}
	srv->fd_limit = cur;
	if (cur < need)
	{
		uint64		fit = cur > (uint64) srv->fd_base + QUEEN_HTTP_FD_RESERVE ?
			cur - srv->fd_base - QUEEN_HTTP_FD_RESERVE : 1;

		srv->max_connections = (int) Min(fit, (uint64) wanted);
		ereport(LOG,
				(errmsg("queen http: the open-file limit (%lu, hard %lu) allows %d connections, fewer than the %d configured",
						(unsigned long) cur, (unsigned long) rl.rlim_max,
						srv->max_connections, wanted),
				 errhint("Raise the hard open-file limit (ulimit -Hn) of the server, or lower queen.http_max_connections.")));
	}
}

void
queen_http_reconfigure(QueenHttpServer *srv, const QueenHttpConfig *cfg)
{
	srv->max_body = cfg->max_body_bytes;
	srv->idle_timeout_us = cfg->idle_timeout_ms > 0 ?
		(int64) cfg->idle_timeout_ms * 1000 : 0;
	srv->header_timeout_us = cfg->header_timeout_ms > 0 ?
		(int64) cfg->header_timeout_ms * 1000 : 0;
	srv->body_timeout_us = cfg->body_timeout_ms > 0 ?
		(int64) cfg->body_timeout_ms * 1000 : 0;
	queen_http_fit_fd_limit(srv, cfg->max_connections > 0 ?
							Min(cfg->max_connections, INT_MAX / 2) : INT_MAX / 2);
}

/*
 * A slow reader with a large response may take longer than the idle
 * timeout to free enough socket buffer for us to write again, while bytes
 * do flow.  Before timing out a connection with output pending, ask the
 * kernel whether its send queue shrank since we last looked.  (A reader
 * that is stalled completely is thus closed after two idle periods.)
 */
static bool
queen_http_kernel_progress(QueenHttpConn *conn)
{
	int			outq;
	bool		progress;

	if (queen_http_buf_pending(&conn->out) == 0)
		return false;
	if (ioctl(conn->fd, SIOCOUTQ, &outq) < 0)
		return false;
	progress = (conn->outq_seen < 0 || outq < conn->outq_seen);
	conn->outq_seen = outq;
	return progress;
}

static void
queen_http_sweep(QueenHttpServer *srv)
{
	int64		now = queen_http_now();
	int64		linger = queen_http_linger_us(srv);

	while (srv->idle_timeout_us > 0 && !dlist_is_empty(&srv->idle))
	{
		QueenHttpConn *conn = dlist_head_element(QueenHttpConn, timer_node,
												 &srv->idle);

		if (conn->timer_base + srv->idle_timeout_us > now)
			break;
		if (queen_http_kernel_progress(conn))
		{
			queen_http_touch(conn);
			continue;
		}
		queen_http_conn_close(conn);
	}
	while (!dlist_is_empty(&srv->linger))
	{
		QueenHttpConn *conn = dlist_head_element(QueenHttpConn, timer_node,
												 &srv->linger);

		if (conn->timer_base + linger > now)
			break;
		queen_http_conn_close(conn);
	}
	/* queen_http_error() takes each off its list, so these loops end */
	while (srv->header_timeout_us > 0 && !dlist_is_empty(&srv->header))
	{
		QueenHttpConn *conn = dlist_head_element(QueenHttpConn, timer_node,
												 &srv->header);
		char		msg[96];

		if (conn->timer_base + srv->header_timeout_us > now)
			break;
		snprintf(msg, sizeof(msg), "the request header was not complete within %d ms",
				 (int) (srv->header_timeout_us / 1000));
		queen_http_error(conn, 408, msg);
		queen_http_flush(conn);
	}
	while (srv->body_timeout_us > 0 && !dlist_is_empty(&srv->body))
	{
		QueenHttpConn *conn = dlist_head_element(QueenHttpConn, timer_node,
												 &srv->body);
		char		msg[96];

		if (conn->timer_base + srv->body_timeout_us > now)
			break;
		snprintf(msg, sizeof(msg), "the request body was not complete within %d ms",
				 (int) (srv->body_timeout_us / 1000));
		queen_http_error(conn, 408, msg);
		queen_http_flush(conn);
	}
}

void
queen_http_poll(QueenHttpServer *srv)
{
	struct epoll_event events[QUEEN_HTTP_EVENTS];
	int			batch;
	int			steps;

	srv->in_poll = true;
	queen_http_maybe_resume_accept(srv);

	for (batch = 0; batch < QUEEN_HTTP_BATCHES; batch++)
	{
		int			n = epoll_wait(srv->epfd, events, QUEEN_HTTP_EVENTS, 0);
		int			i;

		if (n < 0)
		{
			if (errno == EINTR)
				continue;
			ereport(LOG, (errmsg("queen http: epoll_wait failed: %m")));
			break;
		}
		for (i = 0; i < n; i++)
		{
			QueenHttpKind *kind = events[i].data.ptr;
			uint32		ev = events[i].events;
			QueenHttpConn *conn;

			if (*kind == QUEEN_HTTP_KIND_LISTENER)
			{
				/* a handler may have stopped us earlier in this batch */
				if (!srv->stopping && !srv->accept_paused)
					queen_http_accept(srv, (QueenHttpListener *) kind);
				continue;
			}
			conn = (QueenHttpConn *) kind;
			if (conn->dead)
				continue;

			/*
			 * HUP without our own shutdown means a reset: nothing we write
			 * can arrive.  (Level-triggered HUP cannot be masked either.)
			 */
			if (ev & (EPOLLERR | EPOLLHUP))
				queen_http_conn_close(conn);
			else if (ev & EPOLLIN)
				queen_http_conn_read(conn);
			else if (ev & EPOLLOUT)
				queen_http_conn_work(conn);
		}
		if (n < QUEEN_HTTP_EVENTS)
			break;
	}

	/* connections whose responses came in and have requests waiting */
	for (steps = 0; steps < QUEEN_HTTP_READY_STEPS && !dlist_is_empty(&srv->ready);
		 steps++)
		queen_http_conn_work(dlist_head_element(QueenHttpConn, ready_node,
												&srv->ready));

	queen_http_sweep(srv);
	queen_http_maybe_resume_accept(srv);

	while (!dlist_is_empty(&srv->dead))
	{
		QueenHttpConn *conn = dlist_container(QueenHttpConn, all_node,
											  dlist_pop_head_node(&srv->dead));

		MemoryContextDelete(conn->mcxt);
	}
	srv->in_poll = false;
}

long
queen_http_next_timeout_ms(QueenHttpServer *srv)
{
	int64		deadline = -1;
	int64		now;

	if (!dlist_is_empty(&srv->ready))
		return 0;
	if (srv->idle_timeout_us > 0 && !dlist_is_empty(&srv->idle))
		deadline = dlist_head_element(QueenHttpConn, timer_node,
									  &srv->idle)->timer_base +
			srv->idle_timeout_us;
	if (!dlist_is_empty(&srv->linger))
	{
		int64		d = dlist_head_element(QueenHttpConn, timer_node,
										   &srv->linger)->timer_base +
			queen_http_linger_us(srv);

		if (deadline < 0 || d < deadline)
			deadline = d;
	}
	if (srv->header_timeout_us > 0 && !dlist_is_empty(&srv->header))
	{
		int64		d = dlist_head_element(QueenHttpConn, timer_node,
										   &srv->header)->timer_base +
			srv->header_timeout_us;

		if (deadline < 0 || d < deadline)
			deadline = d;
	}
	if (srv->body_timeout_us > 0 && !dlist_is_empty(&srv->body))
	{
		int64		d = dlist_head_element(QueenHttpConn, timer_node,
										   &srv->body)->timer_base +
			srv->body_timeout_us;

		if (deadline < 0 || d < deadline)
			deadline = d;
	}
	if (srv->accept_paused && !srv->stopping)
	{
		if (srv->conn_closed)
			return 0;
		if (deadline < 0 || srv->accept_resume_at < deadline)
			deadline = srv->accept_resume_at;
	}
	if (deadline < 0)
		return -1;
	now = queen_http_now();
	if (deadline <= now)
		return 0;
	/* round up, or we would wake just before the deadline and spin */
	return (long) ((deadline - now + 999) / 1000);
}

void
queen_http_respond(QueenHttpRequest *pub, int status, const char *content_type,
				   const char *body, size_t body_len, const char *extra_headers)
{
	QueenHttpReq *req = (QueenHttpReq *) pub;
	QueenHttpServer *srv = req->srv;
	QueenHttpConn *conn = req->conn;
	bool		keep_alive;
	bool		queued;

	srv->inflight--;
	if (conn == NULL)
	{
		/* the client left while we were busy with its request */
		MemoryContextDelete(pub->mcxt);
		return;
	}
	Assert(conn->req == req && conn->dispatched);

	keep_alive = req->keep_alive && !srv->stopping;
	queued = queen_http_queue(conn, status, content_type, body, body_len,
							  extra_headers, keep_alive,
							  pub->method == HTTP_HEAD);
	conn->req = NULL;
	conn->dispatched = false;
	MemoryContextDelete(pub->mcxt);
	if (!queued)
	{
		queen_http_conn_close(conn);
		return;
	}
	if (!keep_alive)
		conn->close_after = true;
	queen_http_timer_set(conn, QUEEN_HTTP_TIMER_IDLE);

	/*
	 * Inside the parse loop the next pipelined request follows directly and
	 * output is flushed once at the end; otherwise write now, and the ready
	 * list takes the next request at the next poll.
	 */
	if (!conn->in_parse)
		queen_http_flush(conn);
}

const char *
queen_http_header(QueenHttpRequest *pub, const char *name)
{
	QueenHttpReq *req = (QueenHttpReq *) pub;
	int			i;

	for (i = 0; i < req->nheaders; i++)
	{
		if (pg_strcasecmp(req->hdrs.data + req->headers[i].name, name) == 0)
			return req->hdrs.data + req->headers[i].value;
	}
	return NULL;
}

void
queen_http_stop_accepting(QueenHttpServer *srv)
{
	dlist_mutable_iter iter;

	srv->stopping = true;
	srv->accept_paused = false;
	queen_http_close_listeners(srv);

	dlist_foreach_modify(iter, &srv->conns)
	{
		QueenHttpConn *conn = dlist_container(QueenHttpConn, all_node, iter.cur);

		/* requests with the handler get "Connection: close" in respond */
		if (conn->dead || conn->dispatched || conn->lingering)
			continue;
		conn->close_after = true;
		queen_http_drop_partial(conn);
		if (!conn->in_parse)
			queen_http_buf_drain(&conn->in);
		if (queen_http_buf_pending(&conn->out) == 0)
			queen_http_conn_close(conn);
		else
			queen_http_update_events(conn);
	}
}

int
queen_http_busy(QueenHttpServer *srv)
{
	dlist_iter	iter;
	int			busy = srv->inflight;

	dlist_foreach(iter, &srv->conns)
	{
		QueenHttpConn *conn = dlist_container(QueenHttpConn, all_node, iter.cur);

		if (queen_http_buf_pending(&conn->out) > 0)
			busy++;
	}
	return busy;
}

void
queen_http_destroy(QueenHttpServer *srv)
{
	dlist_iter	iter;

	queen_http_close_listeners(srv);
	dlist_foreach(iter, &srv->conns)
	{
		QueenHttpConn *conn = dlist_container(QueenHttpConn, all_node, iter.cur);

		close(conn->fd);
	}
	close(srv->epfd);
	if (srv->spare_fd >= 0)
		close(srv->spare_fd);
	/* connections, requests (orphans too) and buffers are all beneath */
	MemoryContextDelete(srv->mcxt);
}

void
queen_http_stats(QueenHttpServer *srv, QueenHttpStats *out)
{
	*out = srv->stats;
	out->open = srv->nopen;
	out->max_open = srv->max_connections;
	out->fd_limit = srv->fd_limit;
}
