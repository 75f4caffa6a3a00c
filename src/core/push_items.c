/*-------------------------------------------------------------------------
 *
 * push_items.c
 *	  Items pushed from inside the database: the SQL door's queen.push and a
 *	  dead letter's replay (admin_write.c) push through here, in the
 *	  caller's transaction.
 *
 * A call is handled as the broker handles a request, minus the fusion:
 * mint a UUIDv7 per item, default the transactionId to the id's text,
 * layer-1 dedup on (queue, partition, transactionId) inside the call, group
 * by (tenant, queue, partition), and hand the groups to the bundle engine
 * (bundle.c), which does layer 2, the allocator rounds and the originals'
 * ids exactly as it does for the broker's shards.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "bundle.h"
#include "codec.h"
#include "push_items.h"
#include "validate.h"
#include "wait.h"


/*
 * Check one name of an item.  The label naming the item is only built for
 * an error, not for every item of every push.
 */
static void
queen_check_item_name(const char *what, const char *name, size_t max_len,
					  int i, bool from_array)
{
	size_t		len = strlen(name);

	if (queen_name_problem(name, len, max_len) == NULL)
		return;
	queen_check_name(from_array ? psprintf("items[%d]: %s", i, what) : what,
					 name, len, max_len);
}

/*
 * Check one item; errors name the item (items[i]) when the call had an
 * items array, so a bad item in a thousand can be found.
 */
static void
queen_validate_item(const QueenPushItem *item, int i, bool from_array)
{
	if (item->queue == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%squeue is required", from_array ? psprintf("items[%d]: ", i) : "")));
	if (item->payload == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%spayload is required", from_array ? psprintf("items[%d]: ", i) : ""),
				 errhint("A JSON null payload is written as 'null'::jsonb.")));
	queen_check_item_name("queue name", item->queue, QUEEN_MAX_NAME_BYTES, i, from_array);
	queen_check_item_name("partition name", item->partition, QUEEN_MAX_NAME_BYTES, i, from_array);
	if (item->txn != NULL && item->txn[0] != '\0')
		queen_check_item_name("transactionId", item->txn, QUEEN_MAX_TXN_BYTES, i, from_array);
}

/*
 * Encode a group's leaders as frames, end to end in one buffer (so the
 * bundle engine compresses them where they are), and describe each to the
 * engine with the hash and id the item already has.
 */
static void
queen_push_sql_group(QueenBundleGroup *g, const QueenPushItem *items,
						const int *members, int nmembers, const pg_uuid_t *tenant)
{
	StringInfoData packed;
	Size		pos = 0;
	int			k;

	initStringInfo(&packed);
	g->frames = palloc(sizeof(QueenBundleFrame) * nmembers);
	for (k = 0; k < nmembers; k++)
	{
		const QueenPushItem *item = &items[members[k]];
		QueenFrame	frame;

		memset(&frame, 0, sizeof(frame));
		frame.message_id = item->message_id;
		frame.txn = item->txn;
		frame.txn_len = (uint16) strlen(item->txn);
		frame.payload = item->payload;
		frame.payload_len = (uint32) item->payload_len;
		queen_frame_append(&packed, &frame);
		g->frames[k].packed_len = (uint32) queen_frame_size(&frame);
	}
	/* pointers into packed only once it has stopped growing */
	for (k = 0; k < nmembers; k++)
	{
		const QueenPushItem *item = &items[members[k]];
		QueenBundleFrame *f = &g->frames[k];

		f->packed = packed.data + pos;
		pos += f->packed_len;
		memcpy(f->hash, item->hash, QUEEN_HASH_LEN);
		f->message_id = item->message_id;
	}
	g->queue = items[members[0]].queue;
	g->partition = items[members[0]].partition;
	g->tenant = *tenant;
	g->nframes = nmembers;
}

/*
 * Push items as one bundle in the current transaction and fill in every
 * item's verdict.
 */
void
queen_push_items_run(QueenPushItem *items, int n, const pg_uuid_t *tenant,
					 bool from_array)
{
	QueenItemKey *keys;
	int		   *leader;
	QueenBundleGroup *groups;
	int		  **group_items;
	int		   *nmembers;
	int			ngroups;
	int			i;

	if (n == 0)
		return;

	for (i = 0; i < n; i++)
	{
		QueenPushItem *item = &items[i];

		queen_validate_item(item, i, from_array);
		queen_uuid_v7(&item->message_id);
		if (item->txn == NULL || item->txn[0] == '\0')
		{
			char	   *minted = palloc(UUID_LEN * 2 + 5);

			queen_uuid_format(&item->message_id, minted);
			item->txn = minted;
		}
		queen_txn_hash(item->txn, strlen(item->txn), item->hash);
		item->leader = -1;
		item->status = QUEEN_SEGMENT_PENDING;
		item->log_offset = -1;
		item->created_known = false;
	}

	/*
	 * Layer 1 and groups (bundle.c): the first occurrence of (queue,
	 * partition, txn) leads; each group's leaders become its frames, in
	 * item order.  Layer 2, the rounds and the originals' ids are the
	 * bundle engine's.
	 */
	keys = palloc(sizeof(QueenItemKey) * n);
	leader = palloc(sizeof(int) * n);
	for (i = 0; i < n; i++)
	{
		keys[i].queue = items[i].queue;
		keys[i].partition = items[i].partition;
		keys[i].txn = items[i].txn;
	}
	ngroups = queen_group_items(keys, n, leader, &group_items, &nmembers);
	for (i = 0; i < n; i++)
		items[i].leader = leader[i];

	groups = palloc0(sizeof(QueenBundleGroup) * ngroups);
	for (i = 0; i < ngroups; i++)
		queen_push_sql_group(&groups[i], items, group_items[i], nmembers[i], tenant);

	queen_bundle_push(groups, ngroups);
	queen_bundle_raise_refused(groups, ngroups);
	/* waiting pops (and, with queen.notify, listeners) learn of it at COMMIT */
	for (i = 0; i < ngroups; i++)
		queen_wait_mark(tenant, groups[i].queue, strlen(groups[i].queue));

	for (i = 0; i < ngroups; i++)
	{
		QueenBundleGroup *g = &groups[i];
		int			k;

		for (k = 0; k < g->nframes; k++)
		{
			QueenPushItem *item = &items[group_items[i][k]];
			QueenBundleFrame *f = &g->frames[k];

			item->status = f->status;
			item->message_id = f->message_id;
			item->log_offset = f->offset;
			item->created_at = f->created_at;
			item->created_known = f->created_known;
		}
	}

	/* Layer-1 followers inherit their leader's final verdict, as duplicates. */
	for (i = 0; i < n; i++)
	{
		QueenPushItem *item = &items[i];
		QueenPushItem *leader;

		if (item->leader < 0)
			continue;
		leader = &items[item->leader];
		item->status = QUEEN_SEGMENT_DUPLICATE;
		item->message_id = leader->message_id;
		item->log_offset = leader->log_offset;
		item->created_at = leader->created_at;
		item->created_known = leader->created_known;
	}
}

