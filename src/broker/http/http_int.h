/*-------------------------------------------------------------------------
 *
 * http_int.h
 *	  What the files of the HTTP connection layer share and nobody else
 *	  sees: the server, connection and request structs, the buffers, and
 *	  the functions one file calls in another.  http.h is the public face.
 *
 * The layer is three files: http_conn.c (buffers, timers, connection
 * state, output and responses), http_parse.c (the parser callbacks and
 * input), http.c (listening, accepting, the poll, deadlines, the open-file
 * limit and the public lifecycle).
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
 * caller's code is never re-entered; outside a poll it also sets the
 * process latch, since no socket event will announce bytes already read.
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
 * response before the client reads it.  A client refused over
 * max_connections gets the same: a connection that takes no request, only
 * its 503 and the lingering close (a bounded number of them, beside the
 * connections allowed).
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_HTTP_INT_H
#define QUEEN_HTTP_INT_H

#include <http_parser.h>

#include "lib/ilist.h"

#include "http.h"

/* One recv() into the server's scratch buffer. */
#define QUEEN_HTTP_SCRATCH			(64 * 1024)
/* Unparsed input kept per connection while its request is being handled. */
#define QUEEN_HTTP_MAX_PENDING_IN	(64 * 1024)
/* Refused clients whose connections linger at once, beyond max_connections. */
#define QUEEN_HTTP_REFUSING			256

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
	bool		refusing;		/* a refused client's: its 503, then linger */
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
	int			nopen;			/* connections, the refusing ones aside */
	int			nrefusing;		/* refused clients' connections, lingering */
	int			inflight;		/* dispatched, not yet answered */
	QueenHttpStats stats;
	char	   *scratch;
};

/* http_conn.c: buffers */
extern int64 queen_http_now(void);
extern bool queen_http_buf_reserve(MemoryContext cxt, QueenHttpBuf *buf, size_t extra);
extern bool queen_http_buf_append(MemoryContext cxt, QueenHttpBuf *buf,
								  const char *data, size_t len);
extern void queen_http_buf_drain(QueenHttpBuf *buf);

static inline size_t
queen_http_buf_pending(const QueenHttpBuf *buf)
{
	return buf->len - buf->off;
}

/* http_conn.c: timers and connection state */
extern int64 queen_http_linger_us(QueenHttpServer *srv);
extern void queen_http_timer_set(QueenHttpConn *conn, QueenHttpTimer which);
extern void queen_http_touch(QueenHttpConn *conn);
extern bool queen_http_can_parse(QueenHttpConn *conn);
extern bool queen_http_want_read(QueenHttpConn *conn);
extern void queen_http_update_events(QueenHttpConn *conn);
extern void queen_http_conn_open(QueenHttpServer *srv, int fd);
extern void queen_http_refuse(QueenHttpServer *srv, int fd, bool may_linger);
extern void queen_http_conn_close(QueenHttpConn *conn);
extern void queen_http_drop_partial(QueenHttpConn *conn);

/* http_conn.c: output */
extern void queen_http_error(QueenHttpConn *conn, int status, const char *msg);
extern void queen_http_flush(QueenHttpConn *conn);

/* http_parse.c: input */
extern void queen_http_conn_work(QueenHttpConn *conn);
extern void queen_http_conn_read(QueenHttpConn *conn);

#endif							/* QUEEN_HTTP_INT_H */
