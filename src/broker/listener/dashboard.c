/*-------------------------------------------------------------------------
 *
 * dashboard.c
 *	  The dashboard's static files: GET / (index.html) and GET /ui/<name>,
 *	  answered by the listener from memory.
 *
 * The files are installed under the server's share directory
 * (share/extension/queen_dashboard, flat) by `make install`.  A listener
 * reads the whole directory once, on its first dashboard request, and again
 * when the directory changes; a request only ever looks a name up in that
 * table, so no URL, however encoded, reaches the file system.  Every answer
 * carries a strong ETag (XXH3-64 of the bytes) for If-None-Match, no-cache
 * (the names are not versioned, so a browser must revalidate), and a
 * content security policy that allows the page's own scripts, styles and
 * API calls and nothing else.  The page needs no token; the API calls it
 * makes do, when auth is on.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "listener.h"
#include "routes.h"

#include "miscadmin.h"
#include "storage/fd.h"
#include "utils/memutils.h"

/* Sizes a dashboard never needs more than: a bound on what a listener holds. */
#define QUEEN_DASHBOARD_MAX_FILE	(8 * 1024 * 1024)
#define QUEEN_DASHBOARD_MAX_FILES	64

#define QUEEN_DASHBOARD_HEADERS \
	"Cache-Control: no-cache\r\n" \
	"X-Content-Type-Options: nosniff\r\n" \
	"Referrer-Policy: no-referrer\r\n" \
	"X-Frame-Options: DENY\r\n" \
	"Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; " \
	"img-src 'self' data:; connect-src 'self'; font-src 'self'; base-uri 'none'; " \
	"form-action 'none'; frame-ancestors 'none'\r\n"

/* The content types served, by the end of a file's name; others are not served. */
static const struct
{
	const char *suffix;
	const char *type;
}			queen_dashboard_types[] = {
	{".html", "text/html; charset=utf-8"},
	{".js", "text/javascript; charset=utf-8"},
	{".css", "text/css; charset=utf-8"},
	{".svg", "image/svg+xml"},
	{".png", "image/png"},
	{".ico", "image/x-icon"},
	{".json", "application/json"},
	{".md", "text/plain; charset=utf-8"},
	{".LICENSE", "text/plain; charset=utf-8"},
};

typedef struct QueenDashboardFile
{
	char	   *name;
	const char *type;
	char	   *bytes;
	Size		len;
	char		etag[24];		/* 16 hex digits of XXH3-64, in quotes */
} QueenDashboardFile;

static MemoryContext queen_dashboard_cxt = NULL;
static QueenDashboardFile queen_dashboard_files[QUEEN_DASHBOARD_MAX_FILES];
static int	queen_dashboard_nfiles = 0;
static struct timespec queen_dashboard_mtime;	/* of the directory read */
static bool queen_dashboard_loaded = false;

static const char *
queen_dashboard_type(const char *name)
{
	Size		n = strlen(name);
	int			i;

	/* a name is letters, digits, '.', '-', '_', not starting with '.' */
	if (n == 0 || name[0] == '.' || strspn(name, "abcdefghijklmnopqrstuvwxyz"
										   "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != n)
		return NULL;
	for (i = 0; i < (int) lengthof(queen_dashboard_types); i++)
	{
		Size		s = strlen(queen_dashboard_types[i].suffix);

		if (n > s && strcmp(name + n - s, queen_dashboard_types[i].suffix) == 0)
			return queen_dashboard_types[i].type;
	}
	return NULL;
}

static void
queen_dashboard_dir(char *dir)
{
	char		share[MAXPGPATH];

	get_share_path(my_exec_path, share);
	snprintf(dir, MAXPGPATH, "%s/extension/queen_dashboard", share);
}

/* Read one file into the table; false (and a LOG line) if it cannot be. */
static bool
queen_dashboard_read(const char *dir, const char *name, const char *type)
{
	QueenDashboardFile *f = &queen_dashboard_files[queen_dashboard_nfiles];
	char		path[MAXPGPATH];
	struct stat st;
	int			fd;
	Size		got = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	if (fd < 0)
		return false;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > QUEEN_DASHBOARD_MAX_FILE)
	{
		CloseTransientFile(fd);
		ereport(LOG,
				(errmsg("queen: dashboard file \"%s\" skipped: not a regular file of at most 8 MB",
						path)));
		return false;
	}
	f->bytes = MemoryContextAlloc(queen_dashboard_cxt, st.st_size + 1);
	while (got < (Size) st.st_size)
	{
		ssize_t		r = read(fd, f->bytes + got, st.st_size - got);

		if (r <= 0)
			break;
		got += r;
	}
	CloseTransientFile(fd);
	if (got != (Size) st.st_size)
		return false;
	f->name = MemoryContextStrdup(queen_dashboard_cxt, name);
	f->type = type;
	f->len = got;
	snprintf(f->etag, sizeof(f->etag), "\"%016llx\"",
			 (unsigned long long) XXH3_64bits(f->bytes, got));
	queen_dashboard_nfiles++;
	return true;
}

/*
 * The table, read again when the directory changed since (an install over
 * a running broker shows at once).  Without the directory it is empty.
 */
static void
queen_dashboard_load(void)
{
	char		dir[MAXPGPATH];
	struct stat st;
	DIR		   *d;
	struct dirent *de;

	queen_dashboard_dir(dir);
	if (stat(dir, &st) != 0)
		memset(&st, 0, sizeof(st));
	if (queen_dashboard_loaded &&
		st.st_mtim.tv_sec == queen_dashboard_mtime.tv_sec &&
		st.st_mtim.tv_nsec == queen_dashboard_mtime.tv_nsec)
		return;

	if (queen_dashboard_cxt == NULL)
		queen_dashboard_cxt = AllocSetContextCreate(TopMemoryContext, "queen dashboard",
													ALLOCSET_DEFAULT_SIZES);
	else
		MemoryContextReset(queen_dashboard_cxt);
	queen_dashboard_nfiles = 0;
	queen_dashboard_mtime = st.st_mtim;
	queen_dashboard_loaded = true;

	d = AllocateDir(dir);
	if (d == NULL)
		return;
	while ((de = ReadDirExtended(d, dir, LOG)) != NULL &&
		   queen_dashboard_nfiles < QUEEN_DASHBOARD_MAX_FILES)
	{
		const char *type = queen_dashboard_type(de->d_name);

		if (type != NULL)
			(void) queen_dashboard_read(dir, de->d_name, type);
	}
	FreeDir(d);
}

static const QueenDashboardFile *
queen_dashboard_find(const char *name)
{
	int			i;

	for (i = 0; i < queen_dashboard_nfiles; i++)
		if (strcmp(queen_dashboard_files[i].name, name) == 0)
			return &queen_dashboard_files[i];
	return NULL;
}

/* GET or HEAD / and /ui/:file */
void
queen_handle_dashboard(QueenHttpRequest *req, const QueenRouteParams *params)
{
	Size		len = 0;
	const char *name = queen_route_param(params, "file", &len);
	const QueenDashboardFile *f;
	const char *match;
	char		headers[sizeof(QUEEN_DASHBOARD_HEADERS) + 64];

	queen_dashboard_load();
	/* a decoded %00 would end the name early: "index.html%00.js" is no file */
	f = name == NULL ? queen_dashboard_find("index.html") :
		strlen(name) == len ? queen_dashboard_find(name) : NULL;
	if (f == NULL)
	{
		queen_respond_error(req, 404, queen_dashboard_nfiles == 0 ?
							"the dashboard is not installed (make install puts it under the share directory)" :
							"no such file");
		return;
	}
	snprintf(headers, sizeof(headers), "ETag: %s\r\n%s", f->etag, QUEEN_DASHBOARD_HEADERS);
	match = queen_http_header(req, "If-None-Match");
	if (match != NULL && strstr(match, f->etag) != NULL)
	{
		queen_http_respond(req, 304, NULL, "", 0, headers);
		return;
	}
	queen_http_respond(req, 200, f->type, f->bytes, f->len, headers);
}
