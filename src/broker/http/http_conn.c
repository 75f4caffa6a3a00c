/*-------------------------------------------------------------------------
 *
 * http_conn.c
 *	  The HTTP layer's connections: their buffers, timers and state, and
 *	  the output side (responses queued in request order and written
 *	  without blocking).
 *
 * Buffers grow without ever raising ERROR: the event loop must survive a
 * failed allocation, so the one connection that wanted it is dropped.  The
 * layer as a whole is described in http_int.h.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "http_int.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/memutils.h"

/* Unsent output above which no further pipelined request is parsed. */
#define QUEEN_HTTP_MAX_PENDING_OUT	(64 * 1024)
/* Emptied buffers larger than this are given back. */
#define QUEEN_HTTP_KEEP_BUF			(16 * 1024)
/* How long a lingering close reads before giving up. */
#define QUEEN_HTTP_LINGER_MS		2000
/* recv() calls that drop a refused client's input before its close */
#define QUEEN_HTTP_REFUSE_READS		4

/* What a client over the limit gets, before its connection closes. */
#define QUEEN_HTTP_BUSY_BODY "{\"error\":\"too many open connections\"}"
#define QUEEN_HTTP_BUSY_LEN			37
static const char queen_http_busy_answer[] =
	"HTTP/1.1 503 Service Unavailable\r\n"
	"Content-Type: application/json\r\n"
	"Content-Length: " CppAsString2(QUEEN_HTTP_BUSY_LEN) "\r\n"
	"Connection: close\r\n\r\n"
	QUEEN_HTTP_BUSY_BODY;

StaticAssertDecl(sizeof(QUEEN_HTTP_BUSY_BODY) - 1 == QUEEN_HTTP_BUSY_LEN,
				 "Content-Length of the 503 body");

/* ----------------------------------------------------------------
 *		Small helpers
 * ----------------------------------------------------------------
 */

/* Idle timeouts must not jump with the wall clock. */
int64
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
bool
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

bool
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
void
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

static const char *
queen_http_reason(int status)
{
	const char *s = http_status_str((enum http_status) status);

	if (s == NULL || s[0] == '<')	/* "<unknown>" */
		return "Unknown";
	return s;
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

int64
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

void
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
void
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
bool
queen_http_can_parse(QueenHttpConn *conn)
{
	return !conn->dead && !conn->lingering && !conn->dispatched &&
		!conn->close_after &&
		queen_http_buf_pending(&conn->out) < QUEEN_HTTP_MAX_PENDING_OUT;
}

bool
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

void
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

/*
 * A connection for an accepted socket, registered with epoll but on no
 * list yet; NULL (the socket closed) if epoll will not take it.
 */
static QueenHttpConn *
queen_http_conn_new(QueenHttpServer *srv, int fd)
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
		return NULL;
	}
	conn->events = EPOLLIN;
	dlist_push_tail(&srv->conns, &conn->all_node);
	return conn;
}

void
queen_http_conn_open(QueenHttpServer *srv, int fd)
{
	QueenHttpConn *conn = queen_http_conn_new(srv, fd);

	if (conn == NULL)
		return;
	srv->nopen++;
	srv->stats.accepted++;
	queen_http_timer_set(conn, QUEEN_HTTP_TIMER_IDLE);
}

/*
 * Send the 503 and give the descriptor back now.  What the client sent
 * before this moment is read and dropped first: closing a socket with
 * unread input makes the kernel send a reset instead of a FIN, and a reset
 * destroys the 503 before the client reads it (every refused client whose
 * request had arrived got one).  Bytes that arrive after the close still
 * meet a reset; only a lingering close avoids that, and it holds the
 * descriptor.
 */
static void
queen_http_refuse_at_once(QueenHttpServer *srv, int fd)
{
	int			rounds;

	(void) send(fd, queen_http_busy_answer, sizeof(queen_http_busy_answer) - 1,
				MSG_NOSIGNAL | MSG_DONTWAIT);
	(void) shutdown(fd, SHUT_WR);
	for (rounds = 0; rounds < QUEEN_HTTP_REFUSE_READS; rounds++)
	{
		if (recv(fd, srv->scratch, QUEEN_HTTP_SCRATCH, MSG_DONTWAIT) <= 0)
			break;
	}
	close(fd);
}

/*
 * Refuse a client the listener cannot serve (over max_connections, or out
 * of descriptors) with a 503 it can read whole.  With may_linger, and while
 * fewer than QUEEN_HTTP_REFUSING are being refused, the socket becomes a
 * connection that takes no request: the 503 is written, then the lingering
 * close every "Connection: close" answer gets reads and drops what the
 * client sends until it closes or the linger time runs out.  Those
 * connections are not counted in max_connections, but their descriptors
 * are reserved beside them (queen_http_fit_fd_limit); a flood beyond the
 * cap is refused at once.  Out of descriptors there is nothing to reserve
 * them from, so that path never lingers.
 */
void
queen_http_refuse(QueenHttpServer *srv, int fd, bool may_linger)
{
	QueenHttpConn *conn;

	srv->stats.refused++;
	if (!may_linger || srv->nrefusing >= QUEEN_HTTP_REFUSING)
	{
		queen_http_refuse_at_once(srv, fd);
		return;
	}
	conn = queen_http_conn_new(srv, fd);
	if (conn == NULL)
		return;
	conn->refusing = true;
	conn->close_after = true;
	srv->nrefusing++;
	/* bounded from the start, even by a client that reads nothing */
	queen_http_timer_set(conn, QUEEN_HTTP_TIMER_LINGER);
	if (!queen_http_buf_append(conn->mcxt, &conn->out, queen_http_busy_answer,
							   sizeof(queen_http_busy_answer) - 1))
	{
		queen_http_conn_close(conn);
		return;
	}
	/* writes the 503, then lingers (queen_http_linger) */
	queen_http_flush(conn);
}

/*
 * Close the socket now; free the memory now or, inside a poll, at its end.
 * A request that is with the handler is orphaned, not freed: the handler
 * still holds it and will answer it.
 */
void
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
	if (conn->refusing)
		srv->nrefusing--;
	else
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
void
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
void
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
 * The connection has buffered requests it may parse now: the next poll
 * takes them.  Inside a poll that is this one (its ready list is worked
 * after the events).  Outside, an answer given between polls (a shard's
 * reply, a long-poll's timeout) would otherwise wait for whatever wakes the
 * owner's WaitEventSet next, as nothing on the socket will: the bytes are
 * read already.  Setting our own latch makes that wait return at once,
 * wherever in its loop the owner answered.
 */
static void
queen_http_make_ready(QueenHttpConn *conn)
{
	QueenHttpServer *srv = conn->srv;

	if (conn->ready)
		return;
	dlist_push_tail(&srv->ready, &conn->ready_node);
	conn->ready = true;
	if (!srv->in_poll)
		SetLatch(MyLatch);
}

/*
 * Write what we can.  Once the output is drained, finish a closing
 * connection, and put a connection that has buffered requests it may now
 * parse on the ready list.
 */
void
queen_http_flush(QueenHttpConn *conn)
{
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
		queen_http_make_ready(conn);
	queen_http_update_events(conn);
}

/*
 * Has the client closed its side while its request was with the handler?
 * Either the connection is gone (nobody reads the answer) or the client
 * sent its FIN (a half-close, which HTTP allows, or a close we cannot tell
 * from one until we write).  The request must still be answered: that
 * frees it.  A long-poll asks, to stop waiting for a client that left.
 */
bool
queen_http_client_closed(QueenHttpRequest *pub)
{
	QueenHttpReq *req = (QueenHttpReq *) pub;

	return req->conn == NULL || req->conn->read_eof;
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
