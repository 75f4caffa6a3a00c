/*-------------------------------------------------------------------------
 *
 * queen.h
 *	  Declarations shared by every part of the Queen extension: its limits,
 *	  its settings (guc.c) and the segment verdict.  The frame codec
 *	  (codec.h) and input validation (validate.h) have headers of their own.
 *
 * The log (log_write.h, log_read.h) and codec form one C core.  The SQL
 * functions, queen.push and the broker's shards all call its entry points,
 * so there is exactly one place where an offset is assigned and one frame
 * layout.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_H
#define QUEEN_H

#include "lib/stringinfo.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

/* The tenant every request belongs to unless it says otherwise. */
#define QUEEN_DEFAULT_TENANT	"00000000-0000-0000-0000-000000000001"

/* Bytes of one transactionId hash in log_segments.hashes, log_txns.hashes and hash blobs. */
#define QUEEN_HASH_LEN			16

/* Longest queue and partition name in bytes (queues.name is varchar(255)). */
#define QUEEN_MAX_NAME_BYTES	255

/* txn_len is a u16 in the frame header. */
#define QUEEN_MAX_TXN_BYTES		65535

/* ----------------------------------------------------------------
 *		Settings (guc.c)
 * ----------------------------------------------------------------
 */
extern int	queen_zstd_level;
extern int	queen_dedup_cache_mb;
extern int	queen_dedup_filter_mb;
extern char *queen_tenant_setting;
extern int	queen_pop_max_bytes;
extern int	queen_max_lease_seconds;
extern bool queen_strict_acks;
extern bool queen_notify;
extern int	queen_trace_retention_s;
extern int	queen_retention_interval_ms;
extern int	queen_dlq_retention_s;
extern int	queen_partition_cleanup_days;
extern int	queen_stats_interval_s;
extern int	queen_stats_history_days;

/* queen.retention_phases, as bits */
#define QUEEN_PHASE_SEGMENTS	0x01
#define QUEEN_PHASE_HASHES		0x02
#define QUEEN_PHASE_DLQ			0x04
#define QUEEN_PHASE_TRACES		0x08
#define QUEEN_PHASE_PARTITIONS	0x10
#define QUEEN_PHASE_ALL			0x1f
extern int	queen_retention_phases;

extern void queen_define_gucs(void);
extern void queen_session_tenant(pg_uuid_t *out);

/* A hash table of byte-compared keys in a context (spi.c) */
struct HTAB;
extern struct HTAB *queen_hash_create(const char *name, Size keysize, Size entrysize,
									  long nelem, MemoryContext cxt);

/* A list of strings a core result carries (a trace's names). */
typedef struct QueenTexts
{
	char	  **items;
	int			n;
} QueenTexts;

/* ----------------------------------------------------------------
 *		The log (log_write.h, log_read.h, dedup_cache.h, spi.h)
 * ----------------------------------------------------------------
 */

/* The verdict of a segment the write path took, and of each of its frames. */
typedef enum QueenSegmentStatus
{
	QUEEN_SEGMENT_PENDING = 0,
	QUEEN_SEGMENT_QUEUED,
	QUEEN_SEGMENT_DUPLICATE,
	QUEEN_SEGMENT_RESEAL,		/* a segment: its frames must be sealed or opened first */
	QUEEN_SEGMENT_REFUSED		/* a frame: its queue is encrypted and no key seals */
} QueenSegmentStatus;

/* Registered once at load (module.c): the transaction callbacks. */
extern void queen_dedup_cache_init(void);
extern void queen_alloc_init(void);

#endif							/* QUEEN_H */
