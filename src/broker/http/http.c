/*-------------------------------------------------------------------------
 *
 * http.c
 *	  The broker's HTTP/1.1 server: listening sockets, accepting (and
 *	  refusing at once when full), the poll over the inner epoll fd, the
 *	  deadlines of every connection, the open-file limit, and the public
 *	  lifecycle of http.h.
 *
 * How the layer fits together (ordering, memory, closing) is described in
 * http_int.h; connections and output are in http_conn.c, input and the
 * parser in http_parse.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "http_int.h"

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
#include <unistd.h>

#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/memutils.h"

/* epoll events taken per epoll_wait. */
#define QUEEN_HTTP_EVENTS			64
/* epoll_wait batches per poll; the rest waits for the next poll. */
#define QUEEN_HTTP_BATCHES			4
#define QUEEN_HTTP_ACCEPTS			256
/* Connections worked from the ready list per poll. */
#define QUEEN_HTTP_READY_STEPS		4096
#define QUEEN_HTTP_ACCEPT_BACKOFF_MS 100
#define QUEEN_HTTP_LOG_EVERY_MS		10000
#define QUEEN_HTTP_MAX_LISTENERS	16
#define QUEEN_HTTP_BACKLOG			1024
/* Descriptors kept free beyond the connections (logs, the spool, a spare). */
#define QUEEN_HTTP_FD_RESERVE		64

static int	queen_http_count_fds(void);

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
	int			i;

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
			 * there until a connection closes.  Its descriptor comes back at
			 * once, to be the spare again: nothing may linger on it.
			 */
			if ((err == EMFILE || err == ENFILE) && srv->spare_fd >= 0)
			{
				int			again;

				close(srv->spare_fd);
				fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
				again = errno;
				if (fd >= 0)
					queen_http_refuse(srv, fd, false);
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
			queen_http_refuse(srv, fd, true);
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
 * One listening socket for one resolved address, added to the epoll fd.
 * Returns 1 when it listens, 0 when its family is to be skipped (only for
 * "*": IPv6 disabled), -1 with *error set when it fails.
 */
static int
queen_http_listen_one(QueenHttpServer *srv, const QueenHttpConfig *cfg,
					  struct addrinfo *ai, bool any, char **error)
{
	QueenHttpListener *l = &srv->listeners[srv->nlisteners];
	struct epoll_event ev;
	char		name[NI_MAXHOST + NI_MAXSERV + 4];
	const char *what;
	int			fd;
	int			one = 1;
	int			err;

	queen_http_addr_name(ai->ai_addr, ai->ai_addrlen, name, sizeof(name));
	fd = socket(ai->ai_family,
				ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
				ai->ai_protocol);
	if (fd < 0)
	{
		err = errno;
		if (any && err == EAFNOSUPPORT)
			return 0;
		*error = psprintf("could not create a socket for %s: %s",
						  name, strerror(err));
		return -1;
	}
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
		(cfg->reuse_port &&
		 setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0) ||
		(ai->ai_family == AF_INET6 &&
		 setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0))
		what = "could not set socket options for";
	else if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0)
		what = "could not bind";
	else if (listen(fd, QUEEN_HTTP_BACKLOG) < 0)
		what = "could not listen on";
	else
	{
		l->kind = QUEEN_HTTP_KIND_LISTENER;
		l->fd = fd;
		memset(&ev, 0, sizeof(ev));
		ev.events = EPOLLIN;
		ev.data.ptr = l;
		if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, fd, &ev) == 0)
		{
			srv->nlisteners++;
			return 1;
		}
		err = errno;
		close(fd);
		*error = psprintf("could not add %s to epoll: %s", name,
						  strerror(err));
		return -1;
	}
	err = errno;
	close(fd);
	*error = psprintf("%s %s: %s", what, name, strerror(err));
	return -1;
}

/* The port the first listening socket is bound to (the one asked, or 0's pick). */
static int
queen_http_read_port(QueenHttpServer *srv, int asked)
{
	struct sockaddr_storage ss;
	socklen_t	sslen = sizeof(ss);

	if (getsockname(srv->listeners[0].fd, (struct sockaddr *) &ss, &sslen) == 0)
	{
		if (ss.ss_family == AF_INET)
			return ntohs(((struct sockaddr_in *) &ss)->sin_port);
		else if (ss.ss_family == AF_INET6)
			return ntohs(((struct sockaddr_in6 *) &ss)->sin6_port);
	}
	return asked;
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
	int			rc;
	bool		ok = true;

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
	for (ai = res; ok && ai != NULL && srv->nlisteners < QUEEN_HTTP_MAX_LISTENERS;
		 ai = ai->ai_next)
		ok = queen_http_listen_one(srv, cfg, ai, host == NULL, error) >= 0;
	freeaddrinfo(res);

	if (ok && srv->nlisteners == 0)
	{
		*error = psprintf("no address to listen on for \"%s\"",
						  host ? host : "*");
		ok = false;
	}
	if (ok)
		srv->port = queen_http_read_port(srv, cfg->port);
	if (host)
		pfree(host);
	return ok;
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
 * Raise the soft limit towards the hard one, to fit the connections, the
 * refused clients' lingering ones (QUEEN_HTTP_REFUSING), what the process
 * held before any of them and a reserve; if the hard limit is lower, allow
 * only the connections that fit, so that a client over them is answered
 * 503 by the check in queen_http_accept().  (The spare descriptor covers
 * what is left: a limit lowered from outside.)
 */
static void
queen_http_fit_fd_limit(QueenHttpServer *srv, int wanted)
{
	struct rlimit rl;
	uint64		kept = (uint64) srv->fd_base + QUEEN_HTTP_REFUSING + QUEEN_HTTP_FD_RESERVE;
	uint64		need = (uint64) wanted + kept;
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
		uint64		fit = cur > kept ? cur - kept : 1;

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

/*
 * Answer 408 to the connections of a request deadline list (header or body)
 * whose time is up.  queen_http_error() takes each off its list, so the
 * loop ends.
 */
static void
queen_http_expire(dlist_head *list, int64 timeout_us, const char *part, int64 now)
{
	while (timeout_us > 0 && !dlist_is_empty(list))
	{
		QueenHttpConn *conn = dlist_head_element(QueenHttpConn, timer_node, list);
		char		msg[96];

		if (conn->timer_base + timeout_us > now)
			break;
		snprintf(msg, sizeof(msg), "the request %s was not complete within %d ms",
				 part, (int) (timeout_us / 1000));
		queen_http_error(conn, 408, msg);
		queen_http_flush(conn);
	}
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
	queen_http_expire(&srv->header, srv->header_timeout_us, "header", now);
	queen_http_expire(&srv->body, srv->body_timeout_us, "body", now);
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
	/* what the cap left is the next poll's, which must come at once */
	if (!dlist_is_empty(&srv->ready))
		SetLatch(MyLatch);

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

/* The earlier of deadline (-1: none) and the first on a timer list's. */
static int64
queen_http_earliest(int64 deadline, dlist_head *list, int64 duration_us)
{
	int64		d;

	if (duration_us <= 0 || dlist_is_empty(list))
		return deadline;
	d = dlist_head_element(QueenHttpConn, timer_node, list)->timer_base + duration_us;
	return (deadline < 0 || d < deadline) ? d : deadline;
}

long
queen_http_next_timeout_ms(QueenHttpServer *srv)
{
	int64		deadline = -1;
	int64		now;

	if (!dlist_is_empty(&srv->ready))
		return 0;
	deadline = queen_http_earliest(deadline, &srv->idle, srv->idle_timeout_us);
	deadline = queen_http_earliest(deadline, &srv->linger, queen_http_linger_us(srv));
	deadline = queen_http_earliest(deadline, &srv->header, srv->header_timeout_us);
	deadline = queen_http_earliest(deadline, &srv->body, srv->body_timeout_us);
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
