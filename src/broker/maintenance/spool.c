/*-------------------------------------------------------------------------
 *
 * spool.c
 *	  The disk spool: where pushed items go when the database cannot take
 *	  them now (maintenance mode, or a bundle whose transaction failed), so
 *	  that "buffered" is a promise and not a hope.
 *
 * Files.  Each shard appends to its own file, so no two processes ever
 * write one file:
 *
 *	 queen-<13-digit epoch ms>-<2-digit shard>-<pid>-<6-digit seq>.tmp
 *
 * while it is being written, renamed to "...-n<items>.buf" once finished
 * (idle for QUEEN_SPOOL_IDLE_MS, or big enough).  Names sort oldest first;
 * the maintenance worker (maintenance_worker.c) drains only .buf files.  A
 * listener that spools the items of a shard that died in flight writes a
 * whole file at once instead (queen_spool_write_file), as ".part" until
 * it is durable, with owner QUEEN_MAX_SHARDS + its index in place of the
 * shard, so no recovery ever finishes a file a listener is writing.
 *
 * Quarantine.  What the drain cannot store goes under failed/: whole
 * files it cannot read, damaged records' bytes, and single items the
 * database refuses, each as a one-record spool file
 * "<file's stem>-g<group>-i<item>-n1.buf", which an operator can move back
 * into the spool directory to drain once the cause is fixed.
 *
 * Records.  A 16-byte header (u32 magic, u32 body length, u32 CRC-32C of
 * the body, u32 version; little-endian like the frames) and a body: the
 * tenant, the queue and partition names, a frame count and the frames
 * exactly as they would be stored (docs/FORMAT.md).  One record per
 * partition per flush.
 *
 * Durability.  A write is the whole flush's records in one pwrite and one
 * fdatasync; a new file's directory entry is fsynced before its first
 * write is acknowledged.  Only after that is anything answered
 * "buffered".  A write or sync that fails is answered "failed", and the
 * file is cut back to what was durable before, so the drain never
 * commits an item the client was told does not exist.
 *
 * Replication.  A node that replicates synchronously promises that what
 * it acknowledges is on a second machine; a spool file is on this one,
 * and a failover leaves it behind (pg_rewind, or the fresh copy by which
 * pg_auto_failover rejoins an old primary, removes what the new primary's
 * data directory lacks).  So there a shard answers "failed" where it
 * would answer "buffered", and the client retries, at the new primary if
 * need be; its transactionId keeps a retried push from being stored
 * twice.  A listener's items of unknown fate are still spooled: some of
 * them may be committed, and "failed" would be false of those.
 *
 * Damage.  A crash can leave a torn last record; the checksum and the
 * length tell it apart from an intact one.  A record whose checksum fails
 * but whose length leads to another record (or to the end) is skipped and
 * the walk goes on; anything else ends the walk.  The reader reports both
 * and the maintenance worker keeps the damaged bytes under failed/.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "spool.h"
#include "validate.h"
#include "codec.h"
#include "crypto.h"

#include <dirent.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/file_perm.h"
#include "miscadmin.h"
#include "port/pg_crc32c.h"
#include "replication/syncrep.h"
#include "storage/fd.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#define QUEEN_SPOOL_MAGIC		0x4C505351	/* "QSPL" */
#define QUEEN_SPOOL_VERSION		1
#define QUEEN_SPOOL_HEADER		16
/* tenant, two name lengths, frame count */
#define QUEEN_SPOOL_BODY_MIN	(UUID_LEN + 2 + 2 + 4)

/* When a shard's file is finished and handed to the drain. */
#define QUEEN_SPOOL_IDLE_MS		100
#define QUEEN_SPOOL_FILE_ITEMS	10000
#define QUEEN_SPOOL_FILE_BYTES	((off_t) 64 * 1024 * 1024)

/* The file this process is appending to, if any. */
static int	spool_fd = -1;
static char spool_stem[MAXPGPATH];	/* path without ".tmp" */
static off_t spool_len;			/* bytes known durable */
static int	spool_items;
static bool spool_dir_synced;
static TimestampTz spool_last_write;
static uint32 spool_seq;

/* ----------------------------------------------------------------
 *		Paths and directories
 * ----------------------------------------------------------------
 */

/* A file in the spool directory (relative paths are under the data directory). */
char *
queen_spool_path(const char *name)
{
	return psprintf("%s/%s", queen_spool_directory, name);
}

bool
queen_spool_sync_dir(const char *dir, char **why)
{
	int			fd = BasicOpenFile(dir, O_RDONLY | PG_BINARY);

	if (fd < 0 || pg_fsync(fd) != 0)
	{
		*why = psprintf("could not fsync directory \"%s\": %m", dir);
		if (fd >= 0)
			close(fd);
		return false;
	}
	close(fd);
	return true;
}

bool
queen_spool_ensure_dir(const char *dir, char **why)
{
	struct stat st;

	if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
		return true;
	if (MakePGDirectory(dir) != 0)
	{
		if (errno == EEXIST)
			return true;
		*why = psprintf("could not create spool directory \"%s\": %m", dir);
		return false;
	}
	/* the new directory's own entry must survive a crash too */
	{
		char	   *parent = pstrdup(dir);

		get_parent_directory(parent);
		return queen_spool_sync_dir(parent[0] != '\0' ? parent : ".", why);
	}
}

/* Items a finished file holds, from its name (0 if it does not say). */
uint64
queen_spool_file_items(const char *name)
{
	const char *n = strrchr(name, 'n');
	unsigned long long items;

	if (n == NULL || n == name || n[-1] != '-' || sscanf(n, "n%llu.buf", &items) != 1)
		return 0;
	return (uint64) items;
}

static int
queen_spool_name_cmp(const ListCell *a, const ListCell *b)
{
	return strcmp((const char *) lfirst(a), (const char *) lfirst(b));
}

static bool
queen_has_suffix(const char *name, const char *suffix)
{
	size_t		n = strlen(name),
				s = strlen(suffix);

	return n > s && strcmp(name + n - s, suffix) == 0;
}

/* Spool files with this suffix, oldest first (none if the directory is not there yet). */
static List *
queen_spool_names(const char *suffix)
{
	DIR		   *dir;
	struct dirent *de;
	List	   *names = NIL;

	dir = AllocateDir(queen_spool_directory);
	if (dir == NULL)
		return NIL;
	while ((de = ReadDirExtended(dir, queen_spool_directory, LOG)) != NULL)
		if (strncmp(de->d_name, "queen-", 6) == 0 && queen_has_suffix(de->d_name, suffix))
			names = lappend(names, pstrdup(de->d_name));
	FreeDir(dir);
	list_sort(names, queen_spool_name_cmp);
	return names;
}

/* Finished files, oldest first, and the items they hold. */
List *
queen_spool_list(uint64 *items)
{
	List	   *names = queen_spool_names(".buf");
	ListCell   *lc;

	*items = 0;
	foreach(lc, names)
		*items += queen_spool_file_items((const char *) lfirst(lc));
	return names;
}

/* Files, bytes and spooled items (from .buf names) quarantined under failed/. */
void
queen_spool_failed_stats(uint64 *files, uint64 *bytes, uint64 *items)
{
	char	   *path = queen_spool_path("failed");
	DIR		   *dir;
	struct dirent *de;

	*files = 0;
	*bytes = 0;
	*items = 0;
	dir = AllocateDir(path);
	if (dir == NULL)
	{
		pfree(path);
		return;
	}
	while ((de = ReadDirExtended(dir, path, LOG)) != NULL)
	{
		char	   *file;
		struct stat st;

		if (de->d_name[0] == '.')
			continue;
		file = psprintf("%s/%s", path, de->d_name);
		if (stat(file, &st) == 0 && S_ISREG(st.st_mode))
		{
			(*files)++;
			*bytes += (uint64) st.st_size;
			if (queen_has_suffix(de->d_name, ".buf"))
				*items += queen_spool_file_items(de->d_name);
		}
		pfree(file);
	}
	FreeDir(dir);
	pfree(path);
}

/* Keep bytes that cannot be drained under failed/, durably. */
bool
queen_spool_quarantine(const char *name, const char *data, Size len, char **why)
{
	char	   *dir = queen_spool_path("failed");
	char	   *path = psprintf("%s/%s", dir, name);
	int			fd;
	Size		done = 0;
	bool		ok = false;

	if (!queen_spool_ensure_dir(dir, why))
		return false;
	fd = BasicOpenFilePerm(path, O_CREAT | O_TRUNC | O_WRONLY | PG_BINARY, pg_file_create_mode);
	if (fd < 0)
	{
		*why = psprintf("could not create \"%s\": %m", path);
		return false;
	}
	while (done < len)
	{
		ssize_t		n = write(fd, data + done, len - done);

		if (n <= 0)
			break;
		done += (Size) n;
	}
	if (done == len && pg_fsync(fd) == 0)
		ok = true;
	else
		*why = psprintf("could not write \"%s\": %m", path);
	close(fd);
	return ok && queen_spool_sync_dir(dir, why);
}

/* ----------------------------------------------------------------
 *		Records
 * ----------------------------------------------------------------
 */

/* Append little-endian integers to a record being built. */
static void
queen_append_u16(StringInfo buf, uint16 v)
{
	char		b[2];

	queen_put_u16(b, v);
	appendBinaryStringInfo(buf, b, 2);
}

static void
queen_append_u32(StringInfo buf, uint32 v)
{
	char		b[4];

	queen_put_u32(b, v);
	appendBinaryStringInfo(buf, b, 4);
}

/*
 * With a usable key every payload is spooled sealed, whatever its queue:
 * which queues are encrypted is known for certain only in a transaction,
 * and the spool is written when there is none.  The drain opens again
 * what belongs to a queue that is not encrypted (bundle.c).
 */
static const char *
queen_spool_sealed(const QueenSpoolRecord *rec, Size *len)
{
	StringInfoData out;
	Size		pos = 0;

	*len = rec->frames_len;
	if (queen_crypto_problem() != NULL)
		return rec->frames;
	initStringInfo(&out);
	while (pos + 4 <= rec->frames_len)
	{
		Size		flen = 4 + (Size) queen_get_u32(rec->frames + pos);

		if (flen > rec->frames_len - pos)
			elog(ERROR, "queen: a frame to spool runs past its record");
		queen_frame_reseal(rec->frames + pos, flen, true, &out);
		pos += flen;
	}
	*len = out.len;
	return out.data;
}

void
queen_spool_append_record(StringInfo buf, const QueenSpoolRecord *rec)
{
	int			start = buf->len;
	Size		frames_len;
	const char *frames = queen_spool_sealed(rec, &frames_len);
	uint32		body_len = QUEEN_SPOOL_BODY_MIN + rec->qlen + rec->plen + (uint32) frames_len;
	pg_crc32c	crc;

	queen_append_u32(buf, QUEEN_SPOOL_MAGIC);
	queen_append_u32(buf, body_len);
	queen_append_u32(buf, 0);	/* the checksum, once the body is there */
	queen_append_u32(buf, QUEEN_SPOOL_VERSION);
	appendBinaryStringInfo(buf, (const char *) rec->tenant.data, UUID_LEN);
	queen_append_u16(buf, rec->qlen);
	appendBinaryStringInfo(buf, rec->queue, rec->qlen);
	queen_append_u16(buf, rec->plen);
	appendBinaryStringInfo(buf, rec->partition, rec->plen);
	queen_append_u32(buf, rec->nframes);
	appendBinaryStringInfo(buf, frames, (int) frames_len);
	if (frames != rec->frames)
		pfree(unconstify(char *, frames));

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, buf->data + start + QUEEN_SPOOL_HEADER, body_len);
	FIN_CRC32C(crc);
	queen_put_u32(buf->data + start + 8, crc);
}

/*
 * A u16-length-prefixed name at *pos of a body of len bytes, followed by at
 * least after more bytes; NULL if it is empty or does not fit.
 */
static const char *
queen_spool_take_name(const char *body, uint32 len, Size *pos, uint16 *nlen, Size after)
{
	const char *name;

	*nlen = queen_get_u16(body + *pos);
	*pos += 2;
	if (*nlen == 0 || *pos + *nlen + after > len)
		return NULL;
	name = body + *pos;
	*pos += *nlen;
	return name;
}

/* Parse an intact body; false if it does not make sense. */
static bool
queen_spool_parse_body(const char *body, uint32 len, QueenSpoolRecord *rec)
{
	Size		pos = UUID_LEN;
	Size		fpos = 0;
	uint32		k;

	if (len < QUEEN_SPOOL_BODY_MIN)
		return false;
	memcpy(rec->tenant.data, body, UUID_LEN);
	/* the queue is followed by the partition's length, the partition by the frame count */
	rec->queue = queen_spool_take_name(body, len, &pos, &rec->qlen, 2);
	if (rec->queue == NULL)
		return false;
	rec->partition = queen_spool_take_name(body, len, &pos, &rec->plen, 4);
	if (rec->partition == NULL)
		return false;
	rec->nframes = queen_get_u32(body + pos);
	pos += 4;
	rec->frames = body + pos;
	rec->frames_len = len - pos;
	if (rec->nframes == 0 ||
		queen_name_problem(rec->queue, rec->qlen, QUEEN_MAX_NAME_BYTES) != NULL ||
		queen_name_problem(rec->partition, rec->plen, QUEEN_MAX_NAME_BYTES) != NULL)
		return false;
	for (k = 0; k < rec->nframes; k++)
	{
		QueenFrame	frame;

		if (queen_frame_decode(rec->frames, rec->frames_len, &fpos, &frame) != NULL)
			return false;
	}
	return fpos == rec->frames_len;
}

/*
 * Step to the next record at *pos.  On DAMAGED and TRUNCATED, *bad_start
 * is where the unreadable bytes begin and *pos where they end.
 */
QueenSpoolStep
queen_spool_next(const char *data, Size len, Size *pos, QueenSpoolRecord *rec, Size *bad_start)
{
	Size		at = *pos;
	uint32		body_len;
	Size		next;
	pg_crc32c	crc;

	*bad_start = at;
	if (at >= len)
		return QUEEN_SPOOL_END;
	if (len - at < QUEEN_SPOOL_HEADER ||
		queen_get_u32(data + at) != QUEEN_SPOOL_MAGIC)
	{
		*pos = len;
		return QUEEN_SPOOL_TRUNCATED;
	}
	body_len = queen_get_u32(data + at + 4);
	if (body_len > len - at - QUEEN_SPOOL_HEADER)
	{
		*pos = len;
		return QUEEN_SPOOL_TRUNCATED;
	}
	next = at + QUEEN_SPOOL_HEADER + body_len;

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, data + at + QUEEN_SPOOL_HEADER, body_len);
	FIN_CRC32C(crc);
	if (crc == queen_get_u32(data + at + 8) &&
		queen_get_u32(data + at + 12) == QUEEN_SPOOL_VERSION &&
		queen_spool_parse_body(data + at + QUEEN_SPOOL_HEADER, body_len, rec))
	{
		*pos = next;
		return QUEEN_SPOOL_RECORD;
	}

	/* Trust the length only if it leads to the end or to another record. */
	if (next == len ||
		(len - next >= 4 && queen_get_u32(data + next) == QUEEN_SPOOL_MAGIC))
	{
		*pos = next;
		return QUEEN_SPOOL_DAMAGED;
	}
	*pos = len;
	return QUEEN_SPOOL_TRUNCATED;
}

/* The whole file in memory (palloc'd), or NULL with *why. */
char *
queen_spool_read_file(const char *path, Size *len, char **why)
{
	int			fd = BasicOpenFile(path, O_RDONLY | PG_BINARY);
	struct stat st;
	char	   *data;
	Size		done = 0;

	if (fd < 0 || fstat(fd, &st) != 0)
	{
		*why = psprintf("could not open \"%s\": %m", path);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	if ((Size) st.st_size >= MaxAllocHugeSize)
	{
		close(fd);
		*why = psprintf("\"%s\" is too large to drain (%lld bytes)", path, (long long) st.st_size);
		return NULL;
	}
	data = palloc_extended(Max(st.st_size, 1), MCXT_ALLOC_HUGE);
	while (done < (Size) st.st_size)
	{
		ssize_t		n = read(fd, data + done, (Size) st.st_size - done);

		if (n < 0)
		{
			*why = psprintf("could not read \"%s\": %m", path);
			close(fd);
			pfree(data);
			return NULL;
		}
		if (n == 0)
			break;
		done += (Size) n;
	}
	close(fd);
	*len = done;
	return data;
}

/* ----------------------------------------------------------------
 *		Writing (a shard's own file)
 * ----------------------------------------------------------------
 */

/*
 * Write records as one finished file, durably, for a process that does not
 * keep a file open (a listener).  True means every item in them may be
 * answered "buffered"; on false nothing of them is left for the drain.
 */
bool
queen_spool_write_file(StringInfo records, int items, int owner, char **why)
{
	char		part[MAXPGPATH];
	char		buf[MAXPGPATH];
	TimestampTz now = GetCurrentTimestamp();
	long long	ms = (long long) ((now / 1000) + (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) *
								  (long long) SECS_PER_DAY * 1000);
	int			fd;
	Size		done = 0;
	bool		ok = false;

	if (!queen_spool_ensure_dir(queen_spool_directory, why))
	{
		queen_count(QUEEN_COUNT_SPOOL_WRITE_FAILURES, 1);
		return false;
	}
	snprintf(part, sizeof(part), "%s/queen-%013lld-%02d-%d-%06u.part",
			 queen_spool_directory, ms, owner, MyProcPid, ++spool_seq % 1000000);
	snprintf(buf, sizeof(buf), "%.*s-n%d.buf", (int) strlen(part) - 5, part, items);
	fd = BasicOpenFilePerm(part, O_CREAT | O_EXCL | O_WRONLY | PG_BINARY, pg_file_create_mode);
	if (fd < 0)
		*why = psprintf("could not create spool file \"%s\": %m", part);
	else
	{
		while (done < (Size) records->len)
		{
			ssize_t		n = write(fd, records->data + done, records->len - done);

			if (n <= 0)
			{
				if (n == 0)
					errno = ENOSPC;
				break;
			}
			done += (Size) n;
		}
		if (done == (Size) records->len && pg_fsync(fd) == 0)
			ok = true;
		else
			*why = psprintf("could not write spool file \"%s\": %m", part);
		close(fd);
		if (ok && rename(part, buf) != 0)
		{
			*why = psprintf("could not rename \"%s\": %m", part);
			ok = false;
		}
		if (ok)
			ok = queen_spool_sync_dir(queen_spool_directory, why);
		if (!ok)
			(void) unlink(part);
	}
	if (!ok)
	{
		/* an unsynced rename may survive a crash: remove the finished name too */
		(void) unlink(buf);
		queen_count(QUEEN_COUNT_SPOOL_WRITE_FAILURES, 1);
		return false;
	}
	queen_count(QUEEN_COUNT_SPOOL_WRITTEN, items);
	queen_worker_wake(&queen_broker->maintenance);
	return true;
}

/* Hand the open file to the drain: rename it to .buf with its item count. */
void
queen_spool_finish(int shard)
{
	char		tmp[MAXPGPATH];
	char		buf[MAXPGPATH];
	char	   *why = NULL;

	if (spool_fd < 0)
		return;
	close(spool_fd);
	spool_fd = -1;
	snprintf(tmp, sizeof(tmp), "%s.tmp", spool_stem);
	if (spool_items == 0)
	{
		/* nothing durable in it: a first write that failed */
		(void) unlink(tmp);
	}
	else
	{
		snprintf(buf, sizeof(buf), "%s-n%d.buf", spool_stem, spool_items);
		if (rename(tmp, buf) != 0)
			ereport(WARNING,
					(errcode_for_file_access(),
					 errmsg("queen spool: could not rename \"%s\" to \"%s\": %m; it is finished at the shard's next start",
							tmp, buf)));
		else if (!queen_spool_sync_dir(queen_spool_directory, &why))
			ereport(WARNING, (errcode_for_file_access(), errmsg("queen spool: %s", why)));
	}
	pg_atomic_write_u32(&queen_spool_state->active_items[shard], 0);
	queen_worker_wake(&queen_broker->maintenance);
}

/* Open a new file for this shard. */
static bool
queen_spool_open(int shard, char **why)
{
	char		path[MAXPGPATH];
	TimestampTz now = GetCurrentTimestamp();
	long long	ms = (long long) ((now / 1000) + (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) *
								  (long long) SECS_PER_DAY * 1000);

	if (!queen_spool_ensure_dir(queen_spool_directory, why))
		return false;
	snprintf(spool_stem, sizeof(spool_stem), "%s/queen-%013lld-%02d-%d-%06u",
			 queen_spool_directory, ms, shard, MyProcPid, ++spool_seq % 1000000);
	snprintf(path, sizeof(path), "%s.tmp", spool_stem);
	spool_fd = BasicOpenFilePerm(path, O_CREAT | O_EXCL | O_WRONLY | PG_BINARY,
								 pg_file_create_mode);
	if (spool_fd < 0)
	{
		*why = psprintf("could not create spool file \"%s\": %m", path);
		return false;
	}
	spool_len = 0;
	spool_items = 0;
	spool_dir_synced = false;
	return true;
}

/*
 * Append a flush's records and make them durable.  True means every item
 * in them may be answered "buffered".  On false (*why says why) nothing of
 * this write remains in the file.
 */
bool
queen_spool_write(StringInfo records, int items, int shard, char **why)
{
	Size		done = 0;

	if (SyncRepStandbyNames != NULL && SyncRepStandbyNames[0] != '\0')
	{
		*why = pstrdup("this node replicates synchronously (synchronous_standby_names is set), and a spool file on its own disk would not survive a failover");
		queen_count(QUEEN_COUNT_SPOOL_WRITE_FAILURES, 1);
		return false;
	}
	if (spool_fd < 0 && !queen_spool_open(shard, why))
	{
		queen_count(QUEEN_COUNT_SPOOL_WRITE_FAILURES, 1);
		return false;
	}

	while (done < (Size) records->len)
	{
		ssize_t		n = pwrite(spool_fd, records->data + done, records->len - done,
							   spool_len + (off_t) done);

		if (n <= 0)
		{
			if (n == 0)
				errno = ENOSPC;
			break;
		}
		done += (Size) n;
	}
	if (done == (Size) records->len &&
		pg_fdatasync(spool_fd) == 0 &&
		(spool_dir_synced || queen_spool_sync_dir(queen_spool_directory, why)))
	{
		spool_dir_synced = true;
		spool_len += records->len;
		spool_items += items;
		spool_last_write = GetCurrentTimestamp();
		pg_atomic_write_u32(&queen_spool_state->active_items[shard], (uint32) spool_items);
		queen_count(QUEEN_COUNT_SPOOL_WRITTEN, items);
		if (spool_items >= QUEEN_SPOOL_FILE_ITEMS || spool_len >= QUEEN_SPOOL_FILE_BYTES)
			queen_spool_finish(shard);
		return true;
	}

	if (*why == NULL)
		*why = psprintf("could not write spool file \"%s.tmp\": %m", spool_stem);
	queen_count(QUEEN_COUNT_SPOOL_WRITE_FAILURES, 1);

	/*
	 * Cut the file back to what was durable before.  If even that fails,
	 * the tail would hold items answered "failed": finish the file here
	 * and say so, since the drain reads every intact record.
	 */
	if (ftruncate(spool_fd, spool_len) != 0 || pg_fdatasync(spool_fd) != 0)
	{
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("queen spool: could not cut \"%s.tmp\" back to %lld bytes after a failed write: %m",
						spool_stem, (long long) spool_len),
				 errdetail("Records after byte %lld were answered \"failed\" but may be drained.",
						   (long long) spool_len)));
		queen_spool_finish(shard);
	}
	else if (spool_len == 0)
		queen_spool_finish(shard);
	return false;
}

/*
 * Finish the open file once it has been idle; returns how many ms until
 * that is due (-1: no file open).
 */
long
queen_spool_idle(int shard, TimestampTz now)
{
	long		since;

	if (spool_fd < 0)
		return -1;
	since = (long) ((now - spool_last_write) / 1000);
	if (since >= QUEEN_SPOOL_IDLE_MS)
	{
		queen_spool_finish(shard);
		return -1;
	}
	return QUEEN_SPOOL_IDLE_MS - since;
}

/*
 * Who a spool file belongs to, from its name: the owner (a shard, or a
 * listener past QUEEN_MAX_SHARDS) and the pid of the process that wrote it.
 */
static bool
queen_spool_name_parse(const char *name, int *owner, int *pid)
{
	long long	ms;
	int			writer;
	unsigned	seq;

	if (sscanf(name, "queen-%13lld-%2d-%d-%6u", &ms, owner, &writer, &seq) != 4)
		return false;
	if (pid != NULL)
		*pid = writer;
	return true;
}

/*
 * Finish what a previous process left behind: .tmp files of this shard
 * (or, for the maintenance worker, shard = -1, of shards that no longer
 * exist).  Intact records are counted into the name; a torn tail is left
 * for the reader, which stops there.
 */
void
queen_spool_recover(int shard, int nshards)
{
	List	   *names = queen_spool_names(".tmp");
	ListCell   *lc;
	char	   *why = NULL;
	bool		touched = false;

	foreach(lc, names)
	{
		const char *name = (const char *) lfirst(lc);
		int			owner;
		char	   *path;
		char	   *data;
		Size		len = 0;
		Size		pos = 0,
					bad;
		uint64		items = 0;
		QueenSpoolRecord rec;
		QueenSpoolStep step;

		if (!queen_spool_name_parse(name, &owner, NULL))
			continue;
		if (shard >= 0 ? owner != shard : (owner >= 0 && owner < nshards))
			continue;

		path = queen_spool_path(name);
		data = queen_spool_read_file(path, &len, &why);
		if (data == NULL)
		{
			ereport(WARNING, (errcode_for_file_access(), errmsg("queen spool: %s", why)));
			continue;
		}
		while ((step = queen_spool_next(data, len, &pos, &rec, &bad)) != QUEEN_SPOOL_END)
			if (step == QUEEN_SPOOL_RECORD)
				items += rec.nframes;
		pfree(data);
		touched = true;

		if (items == 0)
		{
			ereport(LOG, (errmsg("queen spool: \"%s\" holds no intact record; removed", path)));
			(void) unlink(path);
		}
		else
		{
			char	   *stem = pnstrdup(path, strlen(path) - 4);
			char	   *target = psprintf("%s-n" UINT64_FORMAT ".buf", stem, items);

			if (rename(path, target) != 0)
				ereport(WARNING,
						(errcode_for_file_access(),
						 errmsg("queen spool: could not rename \"%s\": %m", path)));
			else
				ereport(LOG,
						(errmsg("queen spool: finished \"%s\" left by an earlier process (" UINT64_FORMAT " items)",
								target, items)));
		}
	}
	if (touched && !queen_spool_sync_dir(queen_spool_directory, &why))
		ereport(WARNING, (errcode_for_file_access(), errmsg("queen spool: %s", why)));
	list_free_deep(names);

	/*
	 * A listener's file still ".part" was never acknowledged (it answers
	 * "buffered" only after the rename): one whose writer is gone holds
	 * nothing promised, and is removed.
	 */
	if (shard < 0)
	{
		names = queen_spool_names(".part");
		foreach(lc, names)
		{
			const char *name = (const char *) lfirst(lc);
			int			owner,
						pid;

			if (queen_spool_name_parse(name, &owner, &pid) &&
				pid > 0 && kill(pid, 0) != 0 && errno == ESRCH)
			{
				char	   *path = queen_spool_path(name);

				if (unlink(path) == 0)
					ereport(LOG,
							(errmsg("queen spool: removed \"%s\", left unfinished by a listener that is gone (nothing in it was acknowledged)",
									path)));
			}
		}
		list_free_deep(names);
	}
}

