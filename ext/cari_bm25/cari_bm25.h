/*
 * cari_bm25.h
 *		Shared declarations of the cari_bm25 extension: the block payload
 *		format (bm25format.c) and the query-time scoring used by the top-k
 *		walker (bm25topk.c).  The format itself is described at the top of
 *		bm25format.c.
 */
#ifndef CARI_BM25_H
#define CARI_BM25_H

#include "postgres.h"

/* payload format (see bm25format.c) */
#define BM25_FORMAT_VERSION		1
#define BM25_MAX_POSTINGS		1024	/* postings in one block row */
#define BM25_SUB_POSTINGS		128 /* postings in one sub-block */
#define BM25_MAX_SUBBLOCKS		(BM25_MAX_POSTINGS / BM25_SUB_POSTINGS)
#define BM25_MAX_POINTS			4	/* bound points of one sub-block */
#define BM25_MAX_PAYLOAD		1800	/* bytes: never TOASTed nor compressed */
#define BM25_MAX_TF				32767
#define BM25_MAX_LEN			PG_INT32_MAX

/*
 * A bound point: every posting of its sub-block is dominated by one of the
 * sub-block's points (tf_title and tf_body at most, len_title and len_body at
 * least the point's), so the point's BM25 part bounds the posting's for any
 * k1 >= 0, 0 <= b <= 1, avglen > 0, boost >= 0 and weight >= 0.
 */
typedef struct Bm25Point
{
	int32		tf_title;
	int32		tf_body;
	int32		len_title;
	int32		len_body;
} Bm25Point;

/* one directory entry, parsed and validated */
typedef struct Bm25SubBlock
{
	int64		last;			/* last (largest) chunk id */
	int64		floor;			/* every id is > floor */
	int64		base;			/* the first id's delta is relative to this */
	uint32		offset;			/* of its postings, from the payload start */
	uint32		length;			/* bytes of its postings */
	int			count;			/* postings, 1..BM25_SUB_POSTINGS */
	int			npoints;		/* 1..BM25_MAX_POINTS */
	Bm25Point	points[BM25_MAX_POINTS];
} Bm25SubBlock;

/* a payload whose header and directory were validated; postings not yet */
typedef struct Bm25Block
{
	const uint8 *data;
	uint32		size;
	int			n;				/* postings, 1..BM25_MAX_POSTINGS */
	int			nsub;			/* sub-blocks, 1..BM25_MAX_SUBBLOCKS */
	Bm25SubBlock sub[BM25_MAX_SUBBLOCKS];
} Bm25Block;

/* the postings of one sub-block, decoded and validated */
typedef struct Bm25Postings
{
	int			count;
	int64		id[BM25_SUB_POSTINGS];
	int32		tf_title[BM25_SUB_POSTINGS];
	int32		tf_body[BM25_SUB_POSTINGS];
	int32		len_title[BM25_SUB_POSTINGS];
	int32		len_body[BM25_SUB_POSTINGS];
} Bm25Postings;

/* Whether the point has tf_title, tf_body at least, len_title, len_body at most these. */
static inline bool
bm25_point_dominates(const Bm25Point *pt, int32 tf_title, int32 tf_body,
					 int32 len_title, int32 len_body)
{
	return pt->tf_title >= tf_title && pt->tf_body >= tf_body &&
		pt->len_title <= len_title && pt->len_body <= len_body;
}

/*
 * Whether one of the sub-block's bound points dominates the posting's fields
 * (tf_title, tf_body, len_title, len_body): what makes the point's part an
 * upper bound of the posting's for any query.  A structural check, the same
 * whatever the query's weights, k1, b or boost.
 */
static inline bool
bm25_posting_bounded(const Bm25SubBlock *sub, const int32 *fields)
{
	for (int j = 0; j < sub->npoints; j++)
		if (bm25_point_dominates(&sub->points[j], fields[0], fields[1], fields[2], fields[3]))
			return true;
	return false;
}

pg_noreturn extern void bm25_corrupt(const char *detail);
pg_noreturn extern void bm25_corrupt_value(const char *what, const char *why);

/*
 * Read one varint at *p, never at or past end; at most `max`.  Raises
 * ERRCODE_DATA_CORRUPTED when truncated, longer than 10 bytes, or above max.
 */
static inline uint64
bm25_varint_get(const uint8 **p, const uint8 *end, uint64 max, const char *what)
{
	const uint8 *q = *p;
	uint64		v = 0;

	if (likely(q < end && *q < 0x80))
		v = *q++;
	else
	{
		for (int shift = 0;; shift += 7)
		{
			uint64		byte;

			if (q >= end)
				bm25_corrupt_value(what, "truncated");
			byte = *q++;
			/* the 10th byte may only carry bit 63 */
			if (shift == 63 && byte > 1)
				bm25_corrupt_value(what, "overflows 64 bits");
			v |= (byte & 0x7f) << shift;
			if (byte < 0x80)
				break;
		}
	}
	if (unlikely(v > max))
		bm25_corrupt_value(what, "out of range");
	*p = q;
	return v;
}

/*
 * Read one posting at *p (the next after chunk `prev`), validated: returns its
 * chunk id, its tf_title, tf_body, len_title and len_body in fields[0..3].
 */
static inline int64
bm25_posting_get(const uint8 **p, const uint8 *end, int64 prev, int32 *fields)
{
	const uint8 *q = *p;
	uint64		delta;

	/*
	 * The usual posting of a frequent lexeme: its id delta, both tfs and the
	 * title's length one byte each, the body's length one or two bytes.  Read
	 * at once (no byte of it can be out of range); the generic decoder took
	 * about a third of a common-word query's walk, mostly in its branches.
	 */
	if (likely(end - q >= 6 && ((q[0] | q[1] | q[2] | q[3] | q[5]) & 0x80) == 0))
	{
		delta = q[0];
		fields[0] = q[1];
		fields[1] = q[2];
		fields[2] = q[3];
		if (q[4] & 0x80)
		{
			fields[3] = (q[4] & 0x7f) | ((int32) q[5] << 7);
			*p = q + 6;
		}
		else
		{
			fields[3] = q[4];
			*p = q + 5;
		}
	}
	else
	{
		delta = bm25_varint_get(p, end, PG_INT64_MAX, "chunk id delta");
		fields[0] = (int32) bm25_varint_get(p, end, BM25_MAX_TF, "tf_title");
		fields[1] = (int32) bm25_varint_get(p, end, BM25_MAX_TF, "tf_body");
		fields[2] = (int32) bm25_varint_get(p, end, BM25_MAX_LEN, "len_title");
		fields[3] = (int32) bm25_varint_get(p, end, BM25_MAX_LEN, "len_body");
	}
	if (unlikely(delta < 1 || delta > (uint64) (PG_INT64_MAX - prev)))
		bm25_corrupt("chunk ids do not ascend");
	if (unlikely(fields[0] == 0 && fields[1] == 0))
		bm25_corrupt("posting with no occurrence");
	return prev + (int64) delta;
}

extern void bm25_block_parse(const uint8 *data, Size size, int64 floor,
							 Bm25Block *block);
extern void bm25_subblock_decode(const Bm25Block *block, int sub,
								 Bm25Postings *out);
extern void bm25_subblock_check_points(const Bm25SubBlock *sub,
									   const Bm25Postings *postings);

/* query-time BM25 parameters, validated by the caller */
typedef struct Bm25Params
{
	double		k1;
	double		b;
	double		avglen;
	double		boost;
	double		k1_plus_1;		/* k1 + 1, as SQL computes it */
	double		one_minus_b;	/* 1 - b, as SQL computes it */
} Bm25Params;

/*
 * The BM25 part of one posting of a term weighing `weight`, with the operations
 * in the order of the SQL statement's
 *     weight * bm25_tf(tf_title * boost + tf_body, len_title * boost + len_body,
 *                      avglen, k1, b)
 * where bm25_tf = tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avglen)), so the
 * result is the same double.  A posting whose boosted tf is 0 (a title-only
 * posting with boost 0) scores 0 (SQL's 0 / x, or its division by zero when x
 * is 0 too).  Callers check the result is finite.
 */
static inline double
bm25_part(const Bm25Params *q, double weight,
		  int32 tf_title, int32 tf_body, int32 len_title, int32 len_body)
{
	double		tf = (double) tf_title * q->boost + (double) tf_body;
	double		len = (double) len_title * q->boost + (double) len_body;

	if (tf == 0.0)
		return 0.0;
	return weight * (tf * q->k1_plus_1 /
					 (tf + q->k1 * (q->one_minus_b + q->b * len / q->avglen)));
}

/* GUC cari_bm25.pruning */
extern bool bm25_pruning;

#endif							/* CARI_BM25_H */
