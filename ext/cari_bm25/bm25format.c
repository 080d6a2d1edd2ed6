/*-------------------------------------------------------------------------
 *
 * bm25format.c
 *		The block payload of bm25_blocks.data: packing (bm25_pack), decoding
 *		with validation of every byte (bm25_unpack, and the walker through
 *		bm25_block_parse / bm25_subblock_decode).
 *
 * One row of bm25_blocks holds the postings of one lexeme of one collection
 * for an ascending run of chunk ids: at most BM25_MAX_POSTINGS (1024)
 * postings and at most BM25_MAX_PAYLOAD (1800) bytes, so PostgreSQL never
 * compresses nor TOASTs the payload and the walker reads it in place from the
 * buffer.  Format version 1, all integers unsigned LEB128 varints (7 bits a
 * byte, low first, at most 10 bytes) unless said otherwise:
 *
 *	 header
 *	   byte		 format version, 1
 *	   byte		 flags, 0 (every bit reserved)
 *	   varint	 n, postings in the row, 1..1024 (the row's `n` column)
 *	   byte		 nsub, sub-blocks, 1..8
 *	 directory, nsub entries, in chunk id order
 *	   varint	 last chunk id of the sub-block minus the previous sub-block's
 *				 (of 0 for the first); >= 1.  The row's last id is its
 *				 `last_chunk` column.
 *	   varint	 bytes of the sub-block's postings (they follow one another
 *				 after the directory, the last one ending the payload)
 *	   byte		 count of postings, 1..128; the counts add up to n
 *	   byte		 npoints, 1..4, then npoints bound points, each four varints
 *				 tf_title, tf_body (0..32767), len_title, len_body
 *				 (0..2^31-1): every posting of the sub-block has tf_title and
 *				 tf_body at most, len_title and len_body at least those of one
 *				 of the points.  BM25's part grows with tf and falls with len
 *				 for any k1 >= 0, 0 <= b <= 1, avglen > 0, boost >= 0 and
 *				 weight >= 0, so the best point bounds the sub-block for any
 *				 query.  (The packer keeps the Pareto set of the postings,
 *				 merging neighbours down to 4 points.)
 *	 postings of each sub-block, count times
 *	   varint	 chunk id minus the previous posting's (the first of a
 *				 sub-block: minus the previous sub-block's last id, or 0 in the
 *				 first sub-block); >= 1, so ids strictly ascend, and are >= 1
 *	   varint	 tf_title, tf_body (0..32767, not both 0)
 *	   varint	 len_title, len_body (0..2^31-1)
 *
 * A decoder checks every length before reading, every value against its
 * range, that ids ascend and end at the directory's last id, that the bytes
 * add up exactly, and that each posting is dominated by a bound point.
 * bm25_unpack checks all of it.  The walker reads a sub-block only as far as
 * it needs: each posting read is checked (its id within the sub-block's range,
 * a bound point dominating it), the sub-block's end once its last posting is
 * read.  The checks are structural, the same for every query.  Anything else raises ERRCODE_DATA_CORRUPTED.
 *
 * Portions Copyright (c) the Cari authors; Apache-2.0.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"

#include "cari_bm25.h"

#define BM25_VARINT_MAX 10

/* bytes of the header: version, flags, n (at most 2 bytes: n <= 1024), nsub */
#define BM25_HEADER_MAX 5

void
bm25_corrupt(const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("corrupt bm25 block payload"),
			 errdetail("%s", detail)));
	pg_unreachable();
}

void
bm25_corrupt_value(const char *what, const char *why)
{
	bm25_corrupt(psprintf("%s %s", what, why));
}

/* ---------------------------------------------------------------------------
 * varints
 * ---------------------------------------------------------------------------
 */

static inline int
varint_size(uint64 v)
{
	int			n = 1;

	while (v >= 0x80)
	{
		v >>= 7;
		n++;
	}
	return n;
}

static inline uint8 *
varint_put(uint8 *p, uint64 v)
{
	while (v >= 0x80)
	{
		*p++ = (uint8) ((v & 0x7f) | 0x80);
		v >>= 7;
	}
	*p++ = (uint8) v;
	return p;
}

static inline uint8
byte_get(const uint8 **p, const uint8 *end, const char *what)
{
	if (*p >= end)
		bm25_corrupt(psprintf("truncated %s", what));
	return *(*p)++;
}

/* ---------------------------------------------------------------------------
 * decoding
 * ---------------------------------------------------------------------------
 */

/*
 * Validate the header and directory of a payload of `size` bytes, whose ids
 * must all be above `floor` (the previous row's last id, or 0), into *block.
 * The postings are checked when decoded.
 */
void
bm25_block_parse(const uint8 *data, Size size, int64 floor, Bm25Block *block)
{
	const uint8 *p = data;
	const uint8 *end = data + size;
	uint8		version;
	int			total = 0;
	int64		prev_last = 0;
	Size		postings_bytes = 0;
	uint32		offset;

	if (size > (Size) PG_INT32_MAX)
		bm25_corrupt("payload larger than 2 GB");
	version = byte_get(&p, end, "format version");
	if (version != BM25_FORMAT_VERSION)
		bm25_corrupt(psprintf("unknown format version %d (this build reads %d)",
							  version, BM25_FORMAT_VERSION));
	if (byte_get(&p, end, "flags") != 0)
		bm25_corrupt("reserved flags set");
	block->data = data;
	block->size = (uint32) size;
	block->n = (int) bm25_varint_get(&p, end, BM25_MAX_POSTINGS, "posting count");
	if (block->n < 1)
		bm25_corrupt("no postings");
	block->nsub = byte_get(&p, end, "sub-block count");
	if (block->nsub < 1 || block->nsub > BM25_MAX_SUBBLOCKS)
		bm25_corrupt(psprintf("sub-block count %d out of range", block->nsub));

	for (int s = 0; s < block->nsub; s++)
	{
		Bm25SubBlock *sub = &block->sub[s];
		uint64		delta;

		delta = bm25_varint_get(&p, end, PG_INT64_MAX, "sub-block last id");
		if (delta < 1 || delta > (uint64) (PG_INT64_MAX - prev_last))
			bm25_corrupt("sub-block last ids do not ascend");
		sub->base = prev_last;
		sub->floor = s == 0 ? floor : prev_last;
		sub->last = prev_last + (int64) delta;
		if (sub->last <= sub->floor)
			bm25_corrupt("block overlaps the previous block");
		prev_last = sub->last;
		sub->length = (uint32) bm25_varint_get(&p, end, size, "sub-block length");
		postings_bytes += sub->length;
		sub->count = byte_get(&p, end, "sub-block posting count");
		if (sub->count < 1 || sub->count > BM25_SUB_POSTINGS)
			bm25_corrupt(psprintf("sub-block posting count %d out of range",
								  sub->count));
		/* a posting takes 5 bytes at least: the length must hold them */
		if (sub->length < (uint32) sub->count * 5)
			bm25_corrupt("sub-block shorter than its postings");
		total += sub->count;
		sub->npoints = byte_get(&p, end, "bound point count");
		if (sub->npoints < 1 || sub->npoints > BM25_MAX_POINTS)
			bm25_corrupt(psprintf("bound point count %d out of range",
								  sub->npoints));
		for (int i = 0; i < sub->npoints; i++)
		{
			Bm25Point  *pt = &sub->points[i];

			pt->tf_title = (int32) bm25_varint_get(&p, end, BM25_MAX_TF, "bound tf_title");
			pt->tf_body = (int32) bm25_varint_get(&p, end, BM25_MAX_TF, "bound tf_body");
			pt->len_title = (int32) bm25_varint_get(&p, end, BM25_MAX_LEN, "bound len_title");
			pt->len_body = (int32) bm25_varint_get(&p, end, BM25_MAX_LEN, "bound len_body");
		}
	}
	if (total != block->n)
		bm25_corrupt(psprintf("sub-blocks hold %d postings, the header says %d",
							  total, block->n));
	if (postings_bytes != (Size) (end - p))
		bm25_corrupt(psprintf("sub-blocks take %zu bytes, %zu follow the directory",
							  postings_bytes, (Size) (end - p)));
	offset = (uint32) (p - data);
	for (int s = 0; s < block->nsub; s++)
	{
		block->sub[s].offset = offset;
		offset += block->sub[s].length;
	}
}

/* Decode and validate the postings of sub-block `s` of a parsed block. */
void
bm25_subblock_decode(const Bm25Block *block, int s, Bm25Postings *out)
{
	const Bm25SubBlock *sub = &block->sub[s];
	const uint8 *p = block->data + sub->offset;
	const uint8 *end = p + sub->length;
	int64		id = sub->base;

	Assert(s >= 0 && s < block->nsub);
	for (int i = 0; i < sub->count; i++)
	{
		int32		fields[4];

		id = bm25_posting_get(&p, end, id, fields);
		out->id[i] = id;
		out->tf_title[i] = fields[0];
		out->tf_body[i] = fields[1];
		out->len_title[i] = fields[2];
		out->len_body[i] = fields[3];
	}
	if (p != end)
		bm25_corrupt("bytes left after a sub-block's postings");
	if (out->id[0] <= sub->floor)
		bm25_corrupt("block overlaps the previous block");
	if (id != sub->last)
		bm25_corrupt("sub-block's last id differs from its directory");
	out->count = sub->count;
}

/* Check every decoded posting is dominated by one of its bound points. */
void
bm25_subblock_check_points(const Bm25SubBlock *sub, const Bm25Postings *postings)
{
	for (int i = 0; i < postings->count; i++)
	{
		int32		fields[4] = {postings->tf_title[i], postings->tf_body[i],
			postings->len_title[i], postings->len_body[i]};

		if (!bm25_posting_bounded(sub, fields))
			bm25_corrupt(psprintf("posting of chunk " INT64_FORMAT
								  " above its sub-block's bound", postings->id[i]));
	}
}

/* ---------------------------------------------------------------------------
 * packing
 * ---------------------------------------------------------------------------
 */

/* the input of bm25_pack, validated */
typedef struct PackInput
{
	int			n;
	const int64 *id;
	const int32 *tf_title;
	const int32 *tf_body;
	const int32 *len_title;
	const int32 *len_body;
} PackInput;

/* what the packer knows of the sub-block being filled, to size it */
typedef struct SubSize
{
	int			count;
	int64		base;			/* previous sub-block's last id, or 0 */
	int64		last;
	Size		postings_bytes;
	int32		max_tf_title;
	int32		max_tf_body;
	int32		max_len_title;
	int32		max_len_body;
} SubSize;

/*
 * Bytes of the sub-block's directory entry at most: its points have no
 * coordinate above the maxima of its postings.
 */
static Size
subsize_entry(const SubSize *s)
{
	Size		point = varint_size(s->max_tf_title) + varint_size(s->max_tf_body) +
		varint_size(s->max_len_title) + varint_size(s->max_len_body);

	return varint_size((uint64) (s->last - s->base)) + varint_size(s->postings_bytes) +
		2 + BM25_MAX_POINTS * point;
}

static Size
posting_size(const PackInput *in, int i, int64 prev_id)
{
	return varint_size((uint64) (in->id[i] - prev_id)) +
		varint_size(in->tf_title[i]) + varint_size(in->tf_body[i]) +
		varint_size(in->len_title[i]) + varint_size(in->len_body[i]);
}

static void
subsize_add(SubSize *s, const PackInput *in, int i)
{
	s->postings_bytes += posting_size(in, i, s->count == 0 ? s->base : s->last);
	s->last = in->id[i];
	s->count++;
	s->max_tf_title = Max(s->max_tf_title, in->tf_title[i]);
	s->max_tf_body = Max(s->max_tf_body, in->tf_body[i]);
	s->max_len_title = Max(s->max_len_title, in->len_title[i]);
	s->max_len_body = Max(s->max_len_body, in->len_body[i]);
}

/* A rough BM25 part (k1 1.2, b 0.75, boost 1) to choose which points to merge. */
static double
point_typical_score(const Bm25Point *pt, double avglen)
{
	double		tf = (double) pt->tf_title + pt->tf_body;
	double		len = (double) pt->len_title + pt->len_body;

	return tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len / avglen));
}

static Bm25Point
point_merge(const Bm25Point *a, const Bm25Point *b)
{
	Bm25Point	m;

	m.tf_title = Max(a->tf_title, b->tf_title);
	m.tf_body = Max(a->tf_body, b->tf_body);
	m.len_title = Min(a->len_title, b->len_title);
	m.len_body = Min(a->len_body, b->len_body);
	return m;
}

static int
point_cmp_len(const void *a, const void *b)
{
	const Bm25Point *x = a;
	const Bm25Point *y = b;
	int64		lx = (int64) x->len_title + x->len_body;
	int64		ly = (int64) y->len_title + y->len_body;

	if (lx != ly)
		return lx < ly ? -1 : 1;
	return (x->tf_title + x->tf_body) - (y->tf_title + y->tf_body);
}

/*
 * The bound points of postings [lo, hi): their Pareto set, then neighbours
 * (by length) merged into the point dominating both, the merge that raises a
 * typical score least first, down to BM25_MAX_POINTS.
 */
static int
pack_points(const PackInput *in, int lo, int hi, Bm25Point *out)
{
	Bm25Point	pts[BM25_SUB_POSTINGS];
	int			m = 0;
	double		avglen = 0;

	for (int i = lo; i < hi; i++)
	{
		Bm25Point	q = {in->tf_title[i], in->tf_body[i], in->len_title[i], in->len_body[i]};
		bool		dominated = false;
		int			kept = 0;

		avglen += (double) q.len_title + q.len_body;
		for (int j = 0; j < m && !dominated; j++)
			dominated = bm25_point_dominates(&pts[j], q.tf_title, q.tf_body,
										q.len_title, q.len_body);
		if (dominated)
			continue;
		for (int j = 0; j < m; j++)
			if (!bm25_point_dominates(&q, pts[j].tf_title, pts[j].tf_body,
								 pts[j].len_title, pts[j].len_body))
				pts[kept++] = pts[j];
		pts[kept] = q;
		m = kept + 1;
	}
	avglen = Max(avglen / (hi - lo), 1.0);
	if (m > BM25_MAX_POINTS)
		qsort(pts, m, sizeof(Bm25Point), point_cmp_len);
	while (m > BM25_MAX_POINTS)
	{
		int			best = 0;
		double		best_cost = 0;

		for (int j = 0; j + 1 < m; j++)
		{
			Bm25Point	merged = point_merge(&pts[j], &pts[j + 1]);
			double		cost = point_typical_score(&merged, avglen) -
				Max(point_typical_score(&pts[j], avglen),
					point_typical_score(&pts[j + 1], avglen));

			if (j == 0 || cost < best_cost)
			{
				best = j;
				best_cost = cost;
			}
		}
		pts[best] = point_merge(&pts[best], &pts[best + 1]);
		memmove(&pts[best + 1], &pts[best + 2], (m - best - 2) * sizeof(Bm25Point));
		m--;
	}
	memcpy(out, pts, m * sizeof(Bm25Point));
	return m;
}

/* bytes of one encoded posting and one directory entry, at most */
#define BM25_POSTING_MAX (BM25_VARINT_MAX + 3 + 3 + 5 + 5)
#define BM25_ENTRY_MAX (BM25_VARINT_MAX + 3 + 1 + 1 + BM25_MAX_POINTS * (3 + 3 + 5 + 5))

/*
 * Encode postings [lo, hi) (at most BM25_MAX_POSTINGS) into buf, which holds
 * `cap` bytes; returns the payload's size.
 */
static Size
pack_block(const PackInput *in, int lo, int hi, uint8 *buf, Size cap)
{
	uint8		postings[BM25_MAX_POSTINGS * BM25_POSTING_MAX];
	uint8		head[BM25_HEADER_MAX + BM25_MAX_SUBBLOCKS * BM25_ENTRY_MAX];
	Size		sub_bytes[BM25_MAX_SUBBLOCKS];
	uint8	   *p = postings;
	uint8	   *h = head;
	int			nsub = (hi - lo + BM25_SUB_POSTINGS - 1) / BM25_SUB_POSTINGS;
	int64		prev = 0;
	Size		size;

	Assert(hi > lo && hi - lo <= BM25_MAX_POSTINGS);
	for (int s = 0; s < nsub; s++)
	{
		uint8	   *start = p;
		int			end = Min(hi, lo + (s + 1) * BM25_SUB_POSTINGS);

		for (int i = lo + s * BM25_SUB_POSTINGS; i < end; i++)
		{
			p = varint_put(p, (uint64) (in->id[i] - prev));
			p = varint_put(p, in->tf_title[i]);
			p = varint_put(p, in->tf_body[i]);
			p = varint_put(p, in->len_title[i]);
			p = varint_put(p, in->len_body[i]);
			prev = in->id[i];
		}
		sub_bytes[s] = p - start;
	}

	*h++ = BM25_FORMAT_VERSION;
	*h++ = 0;					/* flags */
	h = varint_put(h, hi - lo);
	*h++ = (uint8) nsub;
	prev = 0;
	for (int s = 0; s < nsub; s++)
	{
		int			first = lo + s * BM25_SUB_POSTINGS;
		int			end = Min(hi, first + BM25_SUB_POSTINGS);
		Bm25Point	pts[BM25_MAX_POINTS];
		int			npoints = pack_points(in, first, end, pts);

		h = varint_put(h, (uint64) (in->id[end - 1] - prev));
		prev = in->id[end - 1];
		h = varint_put(h, sub_bytes[s]);
		*h++ = (uint8) (end - first);
		*h++ = (uint8) npoints;
		for (int j = 0; j < npoints; j++)
		{
			h = varint_put(h, pts[j].tf_title);
			h = varint_put(h, pts[j].tf_body);
			h = varint_put(h, pts[j].len_title);
			h = varint_put(h, pts[j].len_body);
		}
	}
	/* the sizing in bm25_pack bounds this; checked anyway */
	size = (h - head) + (p - postings);
	if (size > cap)
		elog(ERROR, "bm25 block of %zu bytes is larger than sized", size);
	memcpy(buf, head, h - head);
	memcpy(buf + (h - head), postings, p - postings);
	return size;
}

static void
check_array(ArrayType *a, Oid elemtype, const char *name)
{
	if (ARR_NDIM(a) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s must be a one-dimensional array", name)));
	if (ARR_HASNULL(a) && array_contains_nulls(a))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not contain NULLs", name)));
	if (ARR_ELEMTYPE(a) != elemtype)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("%s has the wrong element type", name)));
}

static void
check_range(const int32 *v, int n, int32 max, const char *name)
{
	for (int i = 0; i < n; i++)
		if (v[i] < 0 || v[i] > max)
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("%s[%d] = %d is out of range 0..%d", name, i + 1, v[i], max)));
}

PG_FUNCTION_INFO_V1(bm25_pack);

/*
 * bm25_pack(chunk_ids bigint[], tf_title int4[], tf_body int4[],
 *			 len_title int4[], len_body int4[])
 *	 RETURNS TABLE (last_chunk bigint, n int4, data bytea)
 *
 * The postings of one lexeme, ascending by chunk id, as consecutive block rows
 * of at most BM25_MAX_POSTINGS postings and BM25_MAX_PAYLOAD bytes.
 */
Datum
bm25_pack(PG_FUNCTION_ARGS)
{
	static const char *const names[] = {"chunk_ids", "tf_title", "tf_body",
	"len_title", "len_body"};
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ArrayType  *arrays[5];
	PackInput	in;
	bytea	   *payload;
	int			start;
	Size		bytes;
	SubSize		sub;

	InitMaterializedSRF(fcinfo, 0);
	for (int a = 0; a < 5; a++)
	{
		arrays[a] = PG_GETARG_ARRAYTYPE_P(a);
		check_array(arrays[a], a == 0 ? INT8OID : INT4OID, names[a]);
	}
	in.n = ArrayGetNItems(ARR_NDIM(arrays[0]), ARR_DIMS(arrays[0]));
	for (int a = 1; a < 5; a++)
		if (ArrayGetNItems(ARR_NDIM(arrays[a]), ARR_DIMS(arrays[a])) != in.n)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("bm25_pack's arrays must have the same length"),
					 errdetail("chunk_ids has %d elements, %s has %d.", in.n, names[a],
							   ArrayGetNItems(ARR_NDIM(arrays[a]), ARR_DIMS(arrays[a])))));
	in.id = (const int64 *) ARR_DATA_PTR(arrays[0]);
	in.tf_title = (const int32 *) ARR_DATA_PTR(arrays[1]);
	in.tf_body = (const int32 *) ARR_DATA_PTR(arrays[2]);
	in.len_title = (const int32 *) ARR_DATA_PTR(arrays[3]);
	in.len_body = (const int32 *) ARR_DATA_PTR(arrays[4]);

	for (int i = 0; i < in.n; i++)
	{
		if (in.id[i] < 1)
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("chunk_ids[%d] = " INT64_FORMAT " is not a positive id",
							i + 1, in.id[i])));
		if (i > 0 && in.id[i] <= in.id[i - 1])
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("chunk_ids must be strictly ascending"),
					 errdetail("chunk_ids[%d] = " INT64_FORMAT " follows " INT64_FORMAT ".",
							   i + 1, in.id[i], in.id[i - 1])));
		if (in.tf_title[i] == 0 && in.tf_body[i] == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("posting %d has tf_title = tf_body = 0", i + 1)));
	}
	check_range(in.tf_title, in.n, BM25_MAX_TF, "tf_title");
	check_range(in.tf_body, in.n, BM25_MAX_TF, "tf_body");
	check_range(in.len_title, in.n, BM25_MAX_LEN, "len_title");
	check_range(in.len_body, in.n, BM25_MAX_LEN, "len_body");

	payload = palloc(VARHDRSZ + BM25_MAX_PAYLOAD);

	/*
	 * Greedy: a block takes postings while it has fewer than 1024 and its
	 * size, bounded from above as it grows (subsize_entry), stays within
	 * BM25_MAX_PAYLOAD.  A single posting always fits.
	 */
	start = 0;
	bytes = 0;					/* of the closed sub-blocks of the block */
	memset(&sub, 0, sizeof(sub));
	for (int i = 0; i <= in.n; i++)
	{
		bool		flush = (i == in.n);

		if (!flush && i > start)
		{
			SubSize		next = sub;
			Size		closed = bytes;
			Size		size;

			if (next.count == BM25_SUB_POSTINGS)
			{
				closed += subsize_entry(&next) + next.postings_bytes;
				memset(&next, 0, sizeof(next));
				next.base = sub.last;
				next.last = sub.last;
			}
			subsize_add(&next, &in, i);
			size = BM25_HEADER_MAX + closed + subsize_entry(&next) + next.postings_bytes;
			flush = (i - start == BM25_MAX_POSTINGS || size > BM25_MAX_PAYLOAD);
		}
		if (flush && i > start)
		{
			Datum		values[3];
			bool		nulls[3] = {false, false, false};
			Size		size;

			CHECK_FOR_INTERRUPTS();
			size = pack_block(&in, start, i, (uint8 *) VARDATA(payload), BM25_MAX_PAYLOAD);
			SET_VARSIZE(payload, VARHDRSZ + size);
			values[0] = Int64GetDatum(in.id[i - 1]);
			values[1] = Int32GetDatum(i - start);
			values[2] = PointerGetDatum(payload);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
			start = i;
			bytes = 0;
			memset(&sub, 0, sizeof(sub));
		}
		if (i == in.n)
			break;
		if (sub.count == BM25_SUB_POSTINGS)
		{
			int64		last = sub.last;

			bytes += subsize_entry(&sub) + sub.postings_bytes;
			memset(&sub, 0, sizeof(sub));
			sub.base = last;
			sub.last = last;
		}
		subsize_add(&sub, &in, i);
	}
	pfree(payload);
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(bm25_unpack);

/*
 * bm25_unpack(data bytea)
 *	 RETURNS TABLE (chunk_id bigint, tf_title int4, tf_body int4,
 *					len_title int4, len_body int4)
 *
 * The postings of one payload, validated completely.
 */
Datum
bm25_unpack(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bytea	   *data = PG_GETARG_BYTEA_PP(0);
	Bm25Block	block;
	Bm25Postings *postings = palloc(sizeof(Bm25Postings));

	InitMaterializedSRF(fcinfo, 0);
	bm25_block_parse((const uint8 *) VARDATA_ANY(data), VARSIZE_ANY_EXHDR(data), 0, &block);
	for (int s = 0; s < block.nsub; s++)
	{
		bm25_subblock_decode(&block, s, postings);
		bm25_subblock_check_points(&block.sub[s], postings);
	}
	/* all validated: only then return rows */
	for (int s = 0; s < block.nsub; s++)
	{
		bm25_subblock_decode(&block, s, postings);
		for (int i = 0; i < postings->count; i++)
		{
			Datum		values[5];
			bool		nulls[5] = {false, false, false, false, false};

			values[0] = Int64GetDatum(postings->id[i]);
			values[1] = Int32GetDatum(postings->tf_title[i]);
			values[2] = Int32GetDatum(postings->tf_body[i]);
			values[3] = Int32GetDatum(postings->len_title[i]);
			values[4] = Int32GetDatum(postings->len_body[i]);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	pfree(postings);
	return (Datum) 0;
}
