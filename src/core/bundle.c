/*-------------------------------------------------------------------------
 *
 * bundle.c
 *	  One bundle of segments, from frames to verdicts: layer-2 dedup, the
 *	  hash and payload blobs, the allocator, the rounds after a duplicate,
 *	  and the original message ids of duplicates.
 *
 * Both doors end here: queen.push (push.c) after it has grouped a call's
 * items, and the broker's fusion shards (shard.c) after they have gathered
 * the frames of many requests per partition.  So a duplicate means the same
 * thing whichever door a message came through.
 *
 * Layer 2 is first-wins on the XXH3-128 hash inside a group: only the
 * first frame carrying a hash goes to the segment, later ones follow it
 * and report duplicate with its id.  A segment that comes back duplicate
 * wrote nothing; its duplicated frames are dropped and the survivors go
 * round again in the same transaction, vouched up to the offset the probe
 * covered so they are not probed twice.  Each round removes at least one
 * frame from every group it does not finish, so the rounds end.
 *
 * Encryption at rest is applied here too, for both doors: a group's
 * payloads are sealed when its queue is encrypted (crypto.c), and opened
 * when it is not (frames the spool sealed).  Which queue is encrypted is a
 * per-process hint; the allocator reads the queue's row under the
 * partition's lock and writes nothing where the hint was wrong, and the
 * group goes round again sealed or opened.  A group that must be sealed
 * while no key can is refused, its frames QUEEN_SEGMENT_REFUSED.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "bundle.h"
#include "codec.h"
#include "crypto.h"
#include "log_read.h"
#include "log_write.h"
#include "spi.h"

#include "common/hashfn.h"
#include "utils/hsearch.h"

/* ----------------------------------------------------------------
 *		Layer 1 and grouping, before a bundle
 * ----------------------------------------------------------------
 */

static const QueenItemKey *queen_sort_keys;	/* what the comparators look at */

static int
queen_cmp_target(int a, int b)
{
	int			c = strcmp(queen_sort_keys[a].queue, queen_sort_keys[b].queue);

	if (c == 0)
		c = strcmp(queen_sort_keys[a].partition, queen_sort_keys[b].partition);
	return c;
}

/* (queue, partition, transactionId, index): runs are layer-1 duplicates. */
static int
queen_cmp_identity(const void *pa, const void *pb)
{
	int			a = *(const int *) pa;
	int			b = *(const int *) pb;
	int			c = queen_cmp_target(a, b);

	if (c == 0)
		c = strcmp(queen_sort_keys[a].txn, queen_sort_keys[b].txn);
	if (c == 0)
		c = (a > b) - (a < b);
	return c;
}

/*
 * Layer-1 dedup and grouping of one request's items, for both doors.
 * Sorting item indexes on (queue, partition, transactionId, index) makes
 * runs: equal identities are a leader and its followers (leader[i], or -1
 * for a leader), equal (queue, partition) a group.  Returns the number of
 * groups; members[g] lists group g's leaders in item order, nmembers[g]
 * how many.  Sorting rather than hashing needs no table sizing.
 */
int
queen_group_items(const QueenItemKey *keys, int n, int *leader,
				  int ***members, int **nmembers)
{
	int		   *order = palloc(sizeof(int) * Max(n, 1));
	int		   *group_of = palloc(sizeof(int) * Max(n, 1));
	int			ngroups = 0;
	int			i;

	for (i = 0; i < n; i++)
	{
		order[i] = i;
		leader[i] = -1;
	}
	queen_sort_keys = keys;
	qsort(order, n, sizeof(int), queen_cmp_identity);
	for (i = 0; i < n; i++)
	{
		if (i > 0 && queen_cmp_target(order[i - 1], order[i]) == 0)
		{
			if (strcmp(keys[order[i - 1]].txn, keys[order[i]].txn) == 0)
				leader[order[i]] = leader[order[i - 1]] >= 0 ?
					leader[order[i - 1]] : order[i - 1];
		}
		else
			ngroups++;
		group_of[order[i]] = ngroups - 1;
	}

	*members = palloc(sizeof(int *) * Max(ngroups, 1));
	*nmembers = palloc0(sizeof(int) * Max(ngroups, 1));
	for (i = 0; i < n; i++)
		if (leader[i] < 0)
			(*nmembers)[group_of[i]]++;
	for (i = 0; i < ngroups; i++)
	{
		(*members)[i] = palloc(sizeof(int) * Max((*nmembers)[i], 1));
		(*nmembers)[i] = 0;
	}
	/* item order within each group: the order the frames are stored in */
	for (i = 0; i < n; i++)
		if (leader[i] < 0)
		{
			int			g = group_of[i];

			(*members)[g][(*nmembers)[g]++] = i;
		}
	pfree(order);
	pfree(group_of);
	return ngroups;
}

/* ----------------------------------------------------------------
 *		The bundle
 * ----------------------------------------------------------------
 */

/* The group whose frames the comparator orders. */
static QueenBundleGroup *queen_sort_group;

/* (hash, index): runs are layer-2 duplicates. */
static int
queen_cmp_frame_hash(const void *a, const void *b)
{
	int			x = *(const int *) a;
	int			y = *(const int *) b;
	int			c = memcmp(queen_sort_group->frames[x].hash,
						   queen_sort_group->frames[y].hash, QUEEN_HASH_LEN);

	if (c != 0)
		return c;
	return (x > y) - (x < y);
}

static int
queen_cmp_int(const void *a, const void *b)
{
	int			x = *(const int *) a;
	int			y = *(const int *) b;

	return (x > y) - (x < y);
}

/* Mark layer-2 followers and list the leaders, in frame order, as pending. */
static void
queen_bundle_layer2(QueenBundleGroup *g)
{
	int			k;
	int			kept = 0;

	g->pending = palloc(sizeof(int) * Max(g->nframes, 1));
	for (k = 0; k < g->nframes; k++)
	{
		g->frames[k].leader = -1;
		g->frames[k].status = QUEEN_SEGMENT_PENDING;
		g->frames[k].offset = -1;
		g->frames[k].created_known = false;
		g->pending[k] = k;
	}

	queen_sort_group = g;
	qsort(g->pending, g->nframes, sizeof(int), queen_cmp_frame_hash);
	for (k = 1; k < g->nframes; k++)
	{
		QueenBundleFrame *prev = &g->frames[g->pending[k - 1]];
		QueenBundleFrame *cur = &g->frames[g->pending[k]];

		if (memcmp(prev->hash, cur->hash, QUEEN_HASH_LEN) == 0)
			cur->leader = prev->leader >= 0 ? prev->leader : g->pending[k - 1];
	}
	for (k = 0; k < g->nframes; k++)
		if (g->frames[k].leader < 0)
			g->pending[kept++] = k;
	g->npending = kept;
	qsort(g->pending, g->npending, sizeof(int), queen_cmp_int);
	g->verified = -1;
}

/* ----------------------------------------------------------------
 *		Sealing
 * ----------------------------------------------------------------
 */

/*
 * Which queues were last seen encrypted, by a hash of tenant and name: a
 * hint only (a collision or a stale entry costs one more round), so that
 * in steady state frames are sealed once, before the first round.
 */
typedef struct QueenSealHint
{
	uint64		key;
	bool		encrypted;
} QueenSealHint;

static HTAB *queen_seal_hints = NULL;
static MemoryContext queen_seal_cxt = NULL;

static uint64
queen_seal_key(const QueenBundleGroup *g)
{
	return hash_bytes_extended((const unsigned char *) g->queue, (int) strlen(g->queue),
							   hash_bytes_extended(g->tenant.data, UUID_LEN, 0));
}

static QueenSealHint *
queen_seal_hint(const QueenBundleGroup *g, bool create)
{
	uint64		key = queen_seal_key(g);

	/* a hint, not a catalogue: past 65,536 queues it starts again rather than grow */
	if (queen_seal_hints == NULL ||
		(create && hash_get_num_entries(queen_seal_hints) >= 65536))
		queen_seal_hints = queen_process_hash("queen seal hints", sizeof(uint64),
											  sizeof(QueenSealHint), 64, &queen_seal_cxt);
	return hash_search(queen_seal_hints, &key, create ? HASH_ENTER : HASH_FIND, NULL);
}

/* What the allocator said of the group's queue, for the next bundles. */
static void
queen_seal_learn(const QueenBundleGroup *g, bool encrypted)
{
	queen_seal_hint(g, true)->encrypted = encrypted;
}

/*
 * Seal or open every pending frame that is not yet as the group goes: the
 * new frames live in the bundle's memory, and later rounds use them.
 */
static void
queen_bundle_reseal(QueenBundleGroup *g)
{
	int			k;

	for (k = 0; k < g->npending; k++)
	{
		QueenBundleFrame *f = &g->frames[g->pending[k]];
		StringInfoData out;

		if (((queen_packed_flags(f->packed) & QUEEN_FRAME_ENCRYPTED) != 0) == g->seal)
			continue;
		initStringInfo(&out);
		queen_frame_reseal(f->packed, f->packed_len, g->seal, &out);
		f->packed = out.data;
		f->packed_len = (uint32) out.len;
	}
}

/* Refuse the group's pending frames: its queue is encrypted and no key seals. */
static void
queen_bundle_refuse(QueenBundleGroup *g, const char *problem)
{
	int			k;

	for (k = 0; k < g->npending; k++)
		g->frames[g->pending[k]].status = QUEEN_SEGMENT_REFUSED;
	g->npending = 0;
	g->refused = problem;
}

/* For the doors that answer with an error: raise the first refusal. */
void
queen_bundle_raise_refused(const QueenBundleGroup *groups, int ngroups)
{
	int			i;

	for (i = 0; i < ngroups; i++)
		if (groups[i].refused != NULL)
			queen_crypto_require(groups[i].queue);
}

/*
 * Pack the group's pending frames into its segment: hash blob + zstd blob.
 * When the pending frames lie end to end in the caller's buffer (every
 * frame the group was given, in order: the usual case, since frames are
 * dropped only as duplicates), zstd reads them where they are; only a
 * group with a hole is copied together first.  The bytes compressed are
 * the same either way.
 */
static void
queen_bundle_build(QueenBundleGroup *g, QueenSegment *seg)
{
	bytea	   *hashes = palloc(VARHDRSZ + (Size) g->npending * QUEEN_HASH_LEN);
	const char *first = g->frames[g->pending[0]].packed;
	bool		in_place = true;
	Size		total = 0;
	int			k;

	SET_VARSIZE(hashes, VARHDRSZ + (Size) g->npending * QUEEN_HASH_LEN);
	for (k = 0; k < g->npending; k++)
	{
		QueenBundleFrame *f = &g->frames[g->pending[k]];

		if (f->packed != first + total)
			in_place = false;
		total += f->packed_len;
		memcpy(VARDATA(hashes) + (Size) k * QUEEN_HASH_LEN, f->hash, QUEEN_HASH_LEN);
	}

	memset(seg, 0, sizeof(*seg));
	seg->queue = g->queue;
	seg->partition = g->partition;
	seg->tenant = g->tenant;
	seg->msg_count = g->npending;
	seg->hashes = hashes;
	seg->verified = g->verified;
	seg->seal = g->seal ? QUEEN_SEAL_SEALED : QUEEN_SEAL_PLAIN;
	if (in_place)
		seg->blob = queen_compress(first, total, queen_zstd_level);
	else
	{
		StringInfoData packed;

		initStringInfo(&packed);
		enlargeStringInfo(&packed, (int) total);
		for (k = 0; k < g->npending; k++)
		{
			QueenBundleFrame *f = &g->frames[g->pending[k]];

			appendBinaryStringInfo(&packed, f->packed, (int) f->packed_len);
		}
		seg->blob = queen_compress(packed.data, packed.len, queen_zstd_level);
		pfree(packed.data);
	}
}

/*
 * Decode nframes frames from the start of frames, checking each, and keep
 * in marks what a bundle needs of them.  Returns NULL, with *used the bytes
 * they took, or the first problem.  This is the one decode a frame gets on
 * its way to a segment: the shards mark what arrives (shard.c), and the
 * engine then works from the marks.
 */
const char *
queen_frames_mark(const char *frames, Size len, int nframes, QueenFrameMark *marks,
				  Size *used)
{
	Size		pos = 0;
	int			k;

	for (k = 0; k < nframes; k++)
	{
		QueenFrame	frame;
		Size		start = pos;
		const char *problem = queen_frame_decode(frames, len, &pos, &frame);

		if (problem != NULL)
			return problem;
		marks[k].len = (uint32) (pos - start);
		marks[k].message_id = frame.message_id;
		queen_txn_hash(frame.txn, frame.txn_len, marks[k].hash);
	}
	*used = pos;
	return NULL;
}

/*
 * The engine's view of one partition's packed frames, from their marks:
 * every frame, where it lies in frames, with its hash.  Nothing is decoded
 * or copied; frames must outlive the bundle.
 */
void
queen_bundle_group_marked(QueenBundleGroup *bg, const pg_uuid_t *tenant, const char *queue,
						  const char *partition, const char *frames,
						  const QueenFrameMark *marks, int nframes)
{
	Size		pos = 0;
	int			k;

	memset(bg, 0, sizeof(*bg));
	bg->queue = queue;
	bg->partition = partition;
	bg->tenant = *tenant;
	bg->nframes = nframes;
	bg->frames = palloc(sizeof(QueenBundleFrame) * Max(nframes, 1));
	for (k = 0; k < nframes; k++)
	{
		QueenBundleFrame *f = &bg->frames[k];

		f->packed = frames + pos;
		f->packed_len = marks[k].len;
		pos += marks[k].len;
		f->message_id = marks[k].message_id;
		memcpy(f->hash, marks[k].hash, QUEEN_HASH_LEN);
	}
}

/*
 * The same for frames nobody marked yet (the drain's spooled records): the
 * frames must decode (callers checked them when they read them).
 */
void
queen_bundle_group_init(QueenBundleGroup *bg, const pg_uuid_t *tenant, const char *queue,
						const char *partition, const char *frames, Size len, int nframes)
{
	QueenFrameMark *marks = palloc(sizeof(QueenFrameMark) * Max(nframes, 1));
	Size		used;

	if (queen_frames_mark(frames, len, nframes, marks, &used) != NULL)
		elog(ERROR, "queen: checked frames do not decode");
	queen_bundle_group_marked(bg, tenant, queue, partition, frames, marks, nframes);
	pfree(marks);
}

/*
 * One round's segments: every group with frames pending, sealed or opened
 * as it goes, or refused when it must be sealed and no key can.  Returns
 * how many; round[i] is segs[i]'s group.
 */
static int
queen_bundle_round(QueenBundleGroup *groups, int ngroups, QueenSegment *segs,
				   QueenBundleGroup **round)
{
	int			nround = 0;
	int			i;

	for (i = 0; i < ngroups; i++)
	{
		const char *problem;

		if (groups[i].npending == 0)
			continue;
		if (groups[i].seal && (problem = queen_crypto_problem()) != NULL)
		{
			queen_bundle_refuse(&groups[i], problem);
			continue;
		}
		queen_bundle_reseal(&groups[i]);
		queen_bundle_build(&groups[i], &segs[nround]);
		round[nround++] = &groups[i];
	}
	return nround;
}

/*
 * What the allocator said of a group's segment, into its frames: queued
 * (the group is done), duplicate (the rest go round again, vouched up to
 * what the probe covered) or reseal (all go round again, sealed or opened
 * as the queue now says).
 */
static void
queen_bundle_verdict(QueenBundleGroup *g, const QueenSegment *seg)
{
	int			kept = 0,
				d = 0;
	int			k;

	g->partition_id = seg->partition_id;
	if (seg->status == QUEEN_SEGMENT_RESEAL)
	{
		if (++g->reseals > 2)
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("queue \"%s\" turned encryption on and off during one push",
							g->queue),
					 errhint("Push again.")));
		g->seal = seg->queue_encrypted;
		queen_seal_learn(g, g->seal);
		return;
	}
	if (g->seal != seg->queue_encrypted)
		elog(ERROR, "queen: a segment was written sealed as its queue is not");
	if (seg->status == QUEEN_SEGMENT_QUEUED)
	{
		for (k = 0; k < g->npending; k++)
		{
			QueenBundleFrame *f = &g->frames[g->pending[k]];

			f->status = QUEEN_SEGMENT_QUEUED;
			f->offset = seg->base_offset + k;
			f->created_at = seg->created_at;
			f->created_known = true;
		}
		g->npending = 0;
		g->nsegments++;
		return;
	}

	/* dups are ascending by frame index */
	for (k = 0; k < g->npending; k++)
	{
		QueenBundleFrame *f = &g->frames[g->pending[k]];

		if (d < seg->ndups && seg->dups[d].index == k)
		{
			f->status = QUEEN_SEGMENT_DUPLICATE;
			f->offset = seg->dups[d].offset;
			d++;
		}
		else
			g->pending[kept++] = g->pending[k];
	}
	if (kept == g->npending)
		elog(ERROR, "queen: duplicate verdict named no frame");
	g->npending = kept;
	g->verified = seg->probed_upto;
}

/* After the last round: originals' ids for duplicates, leaders' verdicts for followers. */
static void
queen_bundle_finish(QueenBundleGroup *g)
{
	int			k;

	/* Duplicates of stored messages report the original's id and time. */
	for (k = 0; k < g->nframes; k++)
	{
		QueenBundleFrame *f = &g->frames[k];

		if (f->leader >= 0 || f->status != QUEEN_SEGMENT_DUPLICATE)
			continue;
		if (queen_resolve_message(&g->partition_id, f->offset,
								  &f->message_id, &f->created_at))
			f->created_known = true;
		else
			memset(f->message_id.data, 0, UUID_LEN);	/* retained away */
	}

	/*
	 * Followers inherit their leader's final verdict, as duplicates; a
	 * refused leader's followers are refused with it.
	 */
	for (k = 0; k < g->nframes; k++)
	{
		QueenBundleFrame *f = &g->frames[k];
		QueenBundleFrame *leader;

		if (f->leader < 0)
			continue;
		leader = &g->frames[f->leader];
		f->status = leader->status == QUEEN_SEGMENT_REFUSED ?
			QUEEN_SEGMENT_REFUSED : QUEEN_SEGMENT_DUPLICATE;
		f->message_id = leader->message_id;
		f->offset = leader->offset;
		f->created_at = leader->created_at;
		f->created_known = leader->created_known;
	}
	pfree(g->pending);
	g->pending = NULL;
}

/*
 * Store the groups' frames as one bundle in the current transaction and
 * fill in every frame's verdict.  Groups must name distinct partitions.
 */
void
queen_bundle_push(QueenBundleGroup *groups, int ngroups)
{
	QueenSegment *segs = palloc(sizeof(QueenSegment) * Max(ngroups, 1));
	QueenBundleGroup **round = palloc(sizeof(QueenBundleGroup *) * Max(ngroups, 1));
	int			nround;
	int			i;

	for (i = 0; i < ngroups; i++)
	{
		QueenSealHint *hint = queen_seal_hint(&groups[i], false);

		groups[i].nsegments = 0;
		groups[i].refused = NULL;
		groups[i].reseals = 0;
		groups[i].seal = hint != NULL && hint->encrypted;
		queen_bundle_layer2(&groups[i]);
	}

	while ((nround = queen_bundle_round(groups, ngroups, segs, round)) > 0)
	{
		queen_push_bundle(segs, nround);
		for (i = 0; i < nround; i++)
		{
			pfree(segs[i].blob);
			pfree(segs[i].hashes);
			queen_bundle_verdict(round[i], &segs[i]);
		}
	}

	for (i = 0; i < ngroups; i++)
		queen_bundle_finish(&groups[i]);
	pfree(segs);
	pfree(round);
}
