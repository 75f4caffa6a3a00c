/*-------------------------------------------------------------------------
 *
 * http_parse.c
 *	  The HTTP layer's input: reading sockets, feeding libhttp-parser, its
 *	  callbacks that build a request, and dispatching one complete request
 *	  at a time per connection to the handler.
 *
 * A callback never raises: it records why it refused the input (a status
 * and a message) and makes the parser stop, and the parse loop answers
 * with that.  The layer as a whole is described in http_int.h.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "http_int.h"

#include <sys/socket.h>

#include "utils/memutils.h"


/* recv() calls per readable event, so one busy client cannot starve others. */
#define QUEEN_HTTP_READ_ROUNDS		4

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

/* A parser callback's bytes kept in buf: 0, or the connection refused (503). */
static int
queen_http_keep(QueenHttpConn *conn, MemoryContext cxt, QueenHttpBuf *buf,
				const char *at, size_t len)
{
	return queen_http_buf_append(cxt, buf, at, len) ? 0 : queen_http_oom(conn);
}

/* A body over max_body, announced or while a chunked one grows. */
static int
queen_http_too_large(QueenHttpConn *conn)
{
	char		msg[96];

	snprintf(msg, sizeof(msg), "request body exceeds %zu bytes",
			 conn->srv->max_body);
	return queen_http_reject(conn, 413, msg);
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

	return queen_http_keep(conn, req->pub.mcxt, &req->url, at, len);
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
	return queen_http_keep(conn, req->pub.mcxt, &req->hdrs, at, len);
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
	return queen_http_keep(conn, req->pub.mcxt, &req->hdrs, at, len);
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
		return queen_http_too_large(conn);
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

			return queen_http_keep(conn, conn->mcxt, &conn->out, cont, sizeof(cont) - 1);
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
		return queen_http_too_large(conn);
	return queen_http_keep(conn, req->pub.mcxt, &req->body, at, len);
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
void
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

void
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

/* A header's value (the first of that name, any case), or NULL. */
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
