/*-------------------------------------------------------------------------
 *
 * fuzz_http.c
 *	  libFuzzer target for the broker's HTTP request path: the bytes of a
 *	  connection through libhttp-parser and our callbacks (headers in
 *	  pieces, chunked and announced bodies, pipelining, Expect, refusals),
 *	  the route table and its percent-decoding, and on into the real
 *	  handlers and body parsers.
 *
 * Each input is what one client sends on one connection before closing
 * its side.  The connection is a real socket pair driven the way http.c's
 * poll drives it (read, work the ready list, free the dead) until nothing
 * moves; shim_broker.c answers what a handler hands to a shard.  Whatever
 * the input, what the connection sends back must be a sequence of
 * well-formed HTTP/1.1 responses (read back with http_parser), one per
 * request at most, each JSON body JSON (fuzz_check_answer), and the
 * connection must end with nothing left open.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "fuzz_broker.h"

#include "http_int.h"
#include "listener.h"
#include "routes.h"

#include "utils/memutils.h"

static QueenHttpServer *fuzz_srv;
static int	fuzz_requests;
static bool fuzz_show;			/* QUEEN_FUZZ_SHOW=1: print what was answered */

static void
fuzz_handler(QueenHttpRequest *req, void *arg)
{
	fuzz_requests++;
	queen_route_request(req, arg);
	fuzz_settle();
}

/* ----------------------------------------------------------------
 *		Reading the answers back
 * ----------------------------------------------------------------
 */

typedef struct FuzzResponse
{
	StringInfoData body;
	StringInfoData field;
	char		content_type[64];
	bool		in_type;
	int			count;
} FuzzResponse;

static int
fuzz_on_begin(http_parser *p)
{
	FuzzResponse *r = p->data;

	resetStringInfo(&r->body);
	r->content_type[0] = '\0';
	return 0;
}

static int
fuzz_on_field(http_parser *p, const char *at, size_t len)
{
	FuzzResponse *r = p->data;

	r->in_type = (len == 12 && pg_strncasecmp(at, "Content-Type", 12) == 0);
	return 0;
}

static int
fuzz_on_value(http_parser *p, const char *at, size_t len)
{
	FuzzResponse *r = p->data;

	if (r->in_type)
		snprintf(r->content_type, sizeof(r->content_type), "%.*s", (int) len, at);
	return 0;
}

static int
fuzz_on_body(http_parser *p, const char *at, size_t len)
{
	FuzzResponse *r = p->data;

	appendBinaryStringInfo(&r->body, at, (int) len);
	return 0;
}

static int
fuzz_on_complete(http_parser *p)
{
	FuzzResponse *r = p->data;

	/* interim 100 Continue answers nothing */
	if (p->status_code != 100)
	{
		r->count++;
		fuzz_check_answer(p->status_code, r->content_type[0] ? r->content_type : NULL,
						  r->body.data, r->body.len);
	}
	return 0;
}

static const http_parser_settings fuzz_response_settings = {
	.on_message_begin = fuzz_on_begin,
	.on_header_field = fuzz_on_field,
	.on_header_value = fuzz_on_value,
	.on_body = fuzz_on_body,
	.on_message_complete = fuzz_on_complete,
};

/* Everything sent back must be whole HTTP/1.1 responses; how many. */
static int
fuzz_check_output(const char *out, size_t len)
{
	http_parser p;
	FuzzResponse r;
	size_t		n;

	memset(&r, 0, sizeof(r));
	initStringInfo(&r.body);
	http_parser_init(&p, HTTP_RESPONSE);
	p.data = &r;
	n = http_parser_execute(&p, &fuzz_response_settings, out, len);
	if (n != len || HTTP_PARSER_ERRNO(&p) != HPE_OK ||
		(len > 0 && (p.http_major != 1 || p.http_minor != 1)))
	{
		fprintf(stderr, "the answers are not HTTP/1.1 (%s at byte %zu of %zu):\n%.*s\n",
				http_errno_name(HTTP_PARSER_ERRNO(&p)), n, len, (int) Min(len, 4000), out);
		abort();
	}
	return r.count;
}

/* ----------------------------------------------------------------
 *		One connection, driven as http.c's poll drives it
 * ----------------------------------------------------------------
 */

static void
fuzz_free_dead(QueenHttpServer *srv)
{
	while (!dlist_is_empty(&srv->dead))
	{
		QueenHttpConn *conn = dlist_container(QueenHttpConn, all_node,
											  dlist_pop_head_node(&srv->dead));

		MemoryContextDelete(conn->mcxt);
	}
}

/* Bytes the broker sent, appended to out; whether there were any. */
static bool
fuzz_read_answers(int fd, StringInfo out)
{
	char		buf[65536];
	bool		any = false;
	ssize_t		n;

	while ((n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
	{
		appendBinaryStringInfo(out, buf, (int) n);
		any = true;
	}
	return any;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	MemoryContext cxt = fuzz_iteration_context();
	MemoryContext old = MemoryContextSwitchTo(cxt);
	QueenHttpServer *srv = fuzz_srv;
	StringInfoData out;
	int			fds[2];
	size_t		sent = 0;
	int			round;
	int			answers;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) < 0)
		abort();
	queen_http_conn_open(srv, fds[0]);
	initStringInfo(&out);
	fuzz_requests = 0;
	for (round = 0; round < 10000; round++)
	{
		bool		moved = false;

		if (sent < size)
		{
			ssize_t		n = send(fds[1], data + sent, size - sent, MSG_DONTWAIT);

			if (n > 0)
			{
				sent += n;
				moved = true;
			}
			if (sent == size)
				shutdown(fds[1], SHUT_WR);
		}
		else if (size == 0 && round == 0)
			shutdown(fds[1], SHUT_WR);
		if (dlist_is_empty(&srv->conns))
			break;
		srv->in_poll = true;
		queen_http_conn_read(dlist_container(QueenHttpConn, all_node,
											 dlist_head_node(&srv->conns)));
		while (!dlist_is_empty(&srv->ready))
			queen_http_conn_work(dlist_container(QueenHttpConn, ready_node,
												 dlist_pop_head_node(&srv->ready)));
		srv->in_poll = false;
		fuzz_free_dead(srv);
		moved |= fuzz_read_answers(fds[1], &out);
		if (!moved && sent == size && round > 0)
			break;
	}
	/* the client is gone: close what the broker has not */
	if (!dlist_is_empty(&srv->conns))
		queen_http_conn_close(dlist_container(QueenHttpConn, all_node,
											  dlist_head_node(&srv->conns)));
	fuzz_free_dead(srv);
	fuzz_read_answers(fds[1], &out);
	close(fds[1]);
	if (fuzz_show)
		fprintf(stderr, "%d requests, answered:\n%.*s\n", fuzz_requests, out.len, out.data);
	answers = fuzz_check_output(out.data, out.len);
	if (answers > fuzz_requests + 1 || srv->nopen != 0 || srv->inflight != 0)
	{
		fprintf(stderr, "%d answers to %d requests; %d connections open, %d requests in flight\n",
				answers, fuzz_requests, srv->nopen, srv->inflight);
		abort();
	}
	MemoryContextSwitchTo(old);
	return 0;
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	QueenHttpServer *srv;

	(void) argc;
	(void) argv;
	fuzz_show = getenv("QUEEN_FUZZ_SHOW") != NULL;
	(void) queen_uuid_parse(QUEEN_DEFAULT_TENANT, &queen_listener_tenant);
	srv = MemoryContextAllocZero(TopMemoryContext, sizeof(QueenHttpServer));
	srv->mcxt = AllocSetContextCreate(TopMemoryContext, "fuzz http", ALLOCSET_DEFAULT_SIZES);
	srv->epfd = epoll_create1(EPOLL_CLOEXEC);
	srv->handler = fuzz_handler;
	/* small, so that the fuzzer meets 413 */
	srv->max_body = 4096;
	srv->max_connections = 16;
	dlist_init(&srv->conns);
	dlist_init(&srv->dead);
	dlist_init(&srv->idle);
	dlist_init(&srv->linger);
	dlist_init(&srv->header);
	dlist_init(&srv->body);
	dlist_init(&srv->ready);
	srv->scratch = MemoryContextAlloc(srv->mcxt, QUEEN_HTTP_SCRATCH);
	fuzz_srv = srv;
	queen_listener_http = srv;
	return 0;
}
