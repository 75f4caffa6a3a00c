/*-------------------------------------------------------------------------
 *
 * http.h
 *	  The broker's HTTP/1.1 connection layer: listening sockets, keep-alive
 *	  connections, request parsing and response output, all non-blocking.
 *
 * A background worker's WaitEventSet cannot forget a socket once added, so
 * every socket this layer owns lives in one inner epoll fd.  The worker adds
 * that fd to its WaitEventSet as WL_SOCKET_READABLE and calls
 * queen_http_poll() whenever the wait returns (readable, timeout or latch):
 * the poll never blocks.  Requests reach the handler one at a time per
 * connection, in order; the handler answers with queen_http_respond(), now
 * or after later polls.  A client's mistakes become a 4xx or a closed
 * connection, never an ERROR.
 *
 * The handler must not raise ERROR, and must not call queen_http_destroy();
 * it may call queen_http_respond() for any request and
 * queen_http_stop_accepting().  queen_http_destroy() frees every request,
 * answered or not, so nothing may be answered after it.
 *
 * An answer given outside a poll that leaves pipelined requests to parse
 * sets the process latch, so the owner's next wait returns at once and its
 * queen_http_poll() serves them, wherever in its loop it answered (and
 * queen_http_next_timeout_ms() returns 0 while they wait).
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_HTTP_H
#define QUEEN_HTTP_H

typedef struct QueenHttpServer QueenHttpServer;
typedef struct QueenHttpRequest QueenHttpRequest;

struct QueenHttpRequest
{
	int			method;			/* enum http_method from http_parser.h */
	char	   *path;			/* URL path, no query string, not
								 * percent-decoded */
	char	   *query;			/* query string without '?', or NULL */
	char	   *body;			/* de-chunked body, NUL-terminated; never
								 * NULL */
	size_t		body_len;
	MemoryContext mcxt;			/* freed once the response is queued */
	void	   *handler_data;	/* free for the handler */
	const char *subject;		/* who the router authenticated, or NULL */
	uint8		tenant[16];		/* the tenant the router placed it in (a UUID) */
	/* http.c keeps its own state behind this struct */
};

/*
 * Called once per complete request, in order per connection.  The handler
 * must eventually call queen_http_respond() exactly once for the request.
 */
typedef void (*QueenHttpHandler) (QueenHttpRequest *req, void *arg);

typedef struct QueenHttpConfig
{
	const char *listen_address; /* "127.0.0.1", "::1", "*" (all), a host */
	int			port;			/* 0 picks a free port (tests) */
	bool		reuse_port;		/* SO_REUSEPORT: workers share the port */
	size_t		max_body_bytes; /* larger bodies get 413 and a close */
	int			idle_timeout_ms;	/* <= 0: never time out */
	int			header_timeout_ms;	/* a request's header must be complete
									 * this long after its first byte, or
									 * 408; <= 0: no limit */
	int			body_timeout_ms;	/* and its body this long after the
									 * header; <= 0: no limit */
	int			max_connections;	/* beyond this: 503 and close (fewer
									 * if the open-file limit is lower) */
} QueenHttpConfig;

typedef struct QueenHttpStats
{
	uint64		accepted;		/* connections accepted, ever */
	uint64		open;			/* connections open now (refused ones
								 * lingering aside) */
	uint64		requests;		/* requests handed to the handler, ever */
	uint64		rejected;		/* 4xx answered by this layer (bad input) */
	uint64		refused;		/* connections answered 503: over
								 * max_connections or out of descriptors */
	uint64		max_open;		/* connections allowed now */
	uint64		fd_limit;		/* soft open-file limit after raising it */
} QueenHttpStats;

extern QueenHttpServer *queen_http_create(const QueenHttpConfig *cfg,
										  QueenHttpHandler handler, void *arg,
										  char **error);
extern int	queen_http_epoll_fd(QueenHttpServer *srv);
extern int	queen_http_bound_port(QueenHttpServer *srv);
extern void queen_http_poll(QueenHttpServer *srv);
extern long queen_http_next_timeout_ms(QueenHttpServer *srv);
extern void queen_http_respond(QueenHttpRequest *req, int status,
							   const char *content_type,
							   const char *body, size_t body_len,
							   const char *extra_headers);
extern bool queen_http_client_closed(QueenHttpRequest *req);
extern const char *queen_http_header(QueenHttpRequest *req, const char *name);
extern void queen_http_reconfigure(QueenHttpServer *srv,
								   const QueenHttpConfig *cfg);
extern void queen_http_stop_accepting(QueenHttpServer *srv);
extern int	queen_http_busy(QueenHttpServer *srv);
extern void queen_http_destroy(QueenHttpServer *srv);
extern void queen_http_stats(QueenHttpServer *srv, QueenHttpStats *out);

#endif							/* QUEEN_HTTP_H */
