/*-------------------------------------------------------------------------
 *
 * bm25topk.c
 *		bm25_topk: the exact BM25 top k of a query over the block rows of
 *		bm25_blocks, by block-max MaxScore.
 *
 * Each query term (lexeme) reads its rows of bm25_blocks in chunk id order
 * through one scan of the table's primary key btree (collection_id, lexeme,
 * last_chunk), in the statement's snapshot, each payload in place in its
 * pinned buffer.  A row's directory is parsed when the row is reached; a
 * sub-block's postings are decoded only when a window needs them: in full for
 * an essential term, up to the probed chunk otherwise, each posting scored
 * when first read.
 *
 * The walk goes over windows of chunk ids [wstart, wend], in ascending order.
 * A term's bound in a window is the largest bound (its best bound point,
 * scored with the query's parameters) of its sub-blocks there; past the end
 * of the row it is in (a row not read yet) its ceiling, weight * (k1 + 1),
 * which no part exceeds.  A "unit" is an ungrouped term, or a group of terms
 * (a fired synonym rule) scoring its best alternative; a group's bound is the
 * largest sum of its alternatives' bounds.  With theta the k-th best score so
 * far (0 until k chunks scored above 0: only scores > 0 are returned):
 *	 - a window whose units' bounds add up to no more than theta is skipped
 *	   without decoding anything;
 *	 - otherwise the units sorted by bound, the longest prefix adding up to no
 *	   more than theta is non-essential: a chunk found only in those cannot
 *	   beat theta, so candidates are the chunks of the essential units' terms,
 *	   and each probes the non-essential units, largest bound first, stopping
 *	   once its score so far plus the bounds left cannot beat theta.
 * Windows are cut where an essential term's current sub-block ends, so each
 * essential term has one sub-block in a window, decoded in full; the others
 * do not cut them.  A window starts as long as the last window's essential
 * terms allow; if its own essential terms differ, it is cut shorter and its
 * bounds taken again (they only shrink), at most once per term.  Cutting at
 * every term's sub-block ends made windows of a few dozen chunks with many
 * frequent terms, each paying the units' setup again.
 * A window shorter than dense_span (BM25_DENSE_SPAN chunk ids) that is not
 * skipped is made dense_span long, its bounds taken again, and walked term at
 * a time (dense_window), its terms' sub-blocks not cutting it; a longer one
 * is walked document at a time from the essential terms' cursors.  Frequent
 * terms make short windows: at a quarter of a million postings a query,
 * windows of a few hundred chunk ids each paid the units' setup, and the
 * merge of cursors and each candidate's probes cost more than decoding.
 * Chunks are met in ascending id order, so a chunk scoring exactly theta would
 * rank after the k-th (same score, larger id): "cannot beat" is "<= theta",
 * which keeps the result exact under ties.  Bounds and the running sums
 * differ from the exact scores by a few ulps at most, so the comparisons
 * carry a relative slack of 1e-9 (and 1e-300 absolute for subnormals).
 *
 * A chunk's score is summed in one canonical order (units in the order of
 * their first term, a group's alternatives term by term), whatever order the
 * pruning probed them in, so cari_bm25.pruning = off, which sums every
 * posting of every window, returns the very same doubles.
 *
 * Memory: the terms' cursors (a parsed directory and one decoded sub-block
 * each), the units, the heap of k hits, a dense window's sums and each term's
 * parts there (2 MB at most: dense_span shrinks past BM25_DENSE_TERMS terms),
 * and the allowed/dead arrays: all in a context deleted at the end of the
 * call.  Nothing is sized by the corpus.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <float.h>
#include <math.h>

#include "access/genam.h"
#include "access/relscan.h"
#include "access/skey.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "port/pg_bitutils.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"
#include "utils/tuplestore.h"

#include "cari_bm25.h"

/*
 * A search's query is at most 4,000 characters (cari.limits.QueryText), so at most ~2,000
 * words, each a lexeme in one or a few of the collection's languages; a term costs ~8 kB here
 * (its index scan, its row and its decoded sub-block), 32 MB at this bound.
 */
#define BM25_MAX_TERMS		4096
#define BM25_MAX_K			100000
#define BOUND_SLACK			1e-9
#define BOUND_SLACK_ABS		1e-300
/* a window this long or shorter is walked term at a time, made this long (32 kB of sums) */
#define BM25_DENSE_SPAN		4096
/* beyond this many terms the span shrinks, so the terms' parts there stay at 2 MB */
#define BM25_DENSE_TERMS	64

/* a query term and its cursor over its block rows */
typedef struct Term
{
	double		weight;
	double		ceiling;		/* bounds any part: weight * (k1 + 1) */
	int			unit;
	int			alt;			/* its alternative within its group, dense */

	IndexScanDesc scan;
	TupleTableSlot *slot;
	ScanKeyData keys[2];
	bool		exhausted;
	int64		row_last;		/* last id of the row before the current one */
	struct varlena *copy;		/* the payload, when it was not inline */
	Bm25Block	block;			/* the current row */
	double		bound[BM25_MAX_SUBBLOCKS];	/* of each sub-block, this query */
	int			sub;			/* the current sub-block */

	/*
	 * The current sub-block, decoded lazily: its first `count` postings of
	 * `total`, each part scored when first read (NaN until then).
	 */
	bool		decoded;		/* decoding started */
	const uint8 *next;			/* its next posting in the payload */
	const uint8 *end;
	int			total;
	int			count;
	int			pos;			/* the cursor, in [0, count] */
	int64		ids[BM25_SUB_POSTINGS];
	double		parts[BM25_SUB_POSTINGS];
	int32		fields[BM25_SUB_POSTINGS][4];	/* tf_title, tf_body, len_title,
												 * len_body */

	bool		in_window;		/* its current sub-block meets the window */
	double	   *dparts;			/* dense_window: its part in each chunk */
	uint64	   *dwritten;		/* and which of them hold one */
	bool		cuts;			/* essential in the last window: its sub-block
								 * ends cut the next */
	double		cur;			/* its part in the current chunk */
} Term;

/* an ungrouped term, or a group scoring its best alternative */
typedef struct Unit
{
	int			nterms;
	int		   *terms;			/* ascending */
	int			nalts;			/* 0: an ungrouped term */
	bool		present;		/* has a term in the window */
	double		bound;			/* in the window */
} Unit;

typedef struct Hit
{
	double		score;
	int64		id;
} Hit;

typedef struct Walk
{
	Bm25Params	params;
	bool		pruning;

	Relation	heap;
	Relation	index;
	AttrNumber	att_last;
	AttrNumber	att_n;
	AttrNumber	att_data;

	int			nterms;
	Term	   *terms;
	int			nunits;
	Unit	   *units;
	double	   *alt_sums;		/* scratch: nterms */
	int		   *order;			/* present units by ascending bound */
	Term	  **ess;			/* the essential units' terms in the window */
	double	   *prefix;			/* prefix sums of their bounds */
	int			dense_span;		/* a window this long or shorter is dense */
	double	   *sums;			/* dense_window's, dense_span */
	uint64	   *seen;			/* and which of them hold a sum */
	uint64	   *alive;			/* the candidates not pruned yet */

	const int64 *allowed;		/* NULL: every chunk */
	int			nallowed;
	int			allowed_pos;
	const int64 *dead;
	int			ndead;
	int			dead_pos;

	int			k;
	int			nhits;
	Hit		   *hits;			/* a heap, the worst hit at the root */

	/* what the walk did, reported at DEBUG1 */
	int64		rows;
	int64		windows;
	int64		windows_skipped;
	int64		subblocks_decoded;
	int64		candidates;
	int64		candidates_pruned;
} Walk;

/* ---------------------------------------------------------------------------
 * the top k
 * ---------------------------------------------------------------------------
 */

/* a ranks before b: score DESC, chunk id ASC */
static inline bool
hit_before(double score_a, int64 id_a, const Hit *b)
{
	return score_a > b->score || (score_a == b->score && id_a < b->id);
}

static void
hits_sift_down(Hit *hits, int n, int i)
{
	Hit			h = hits[i];

	for (;;)
	{
		int			child = 2 * i + 1;

		if (child >= n)
			break;
		/* the worse child */
		if (child + 1 < n && hit_before(hits[child].score, hits[child].id, &hits[child + 1]))
			child++;
		if (!hit_before(h.score, h.id, &hits[child]))
			break;
		hits[i] = hits[child];
		i = child;
	}
	hits[i] = h;
}

static void
hits_offer(Walk *w, double score, int64 id)
{
	if (w->nhits < w->k)
	{
		int			i = w->nhits++;

		while (i > 0)
		{
			int			parent = (i - 1) / 2;

			if (!hit_before(w->hits[parent].score, w->hits[parent].id,
							&(Hit) {score, id}))
				break;
			w->hits[i] = w->hits[parent];
			i = parent;
		}
		w->hits[i].score = score;
		w->hits[i].id = id;
	}
	else if (hit_before(score, id, &w->hits[0]))
	{
		w->hits[0].score = score;
		w->hits[0].id = id;
		hits_sift_down(w->hits, w->nhits, 0);
	}
}

/* the score a chunk must beat to enter the top k */
static inline double
walk_theta(const Walk *w)
{
	return w->nhits == w->k ? w->hits[0].score : 0.0;
}

/* whether a chunk whose score is at most `bound` cannot enter the top k */
static inline bool
cannot_beat(double bound, double theta)
{
	return bound == 0.0 || bound * (1.0 + BOUND_SLACK) + BOUND_SLACK_ABS <= theta;
}

static int
hit_cmp(const void *a, const void *b)
{
	const Hit  *x = a;
	const Hit  *y = b;

	if (hit_before(x->score, x->id, y))
		return -1;
	if (hit_before(y->score, y->id, x))
		return 1;
	return 0;
}

/* ---------------------------------------------------------------------------
 * term cursors
 * ---------------------------------------------------------------------------
 */

/* the bound of one point: a true upper bound, 0 only for parts that are 0 */
static double
point_bound(const Bm25Params *q, double weight, const Bm25Point *pt)
{
	double		v = bm25_part(q, weight, pt->tf_title, pt->tf_body,
							  pt->len_title, pt->len_body);

	if (isnan(v))
		return INFINITY;
	/* an underflow to 0 must not claim that every part is exactly 0 */
	if (v == 0.0 && weight > 0.0 &&
		(double) pt->tf_title * q->boost + (double) pt->tf_body > 0.0)
		return DBL_MIN;
	return v;
}

/* Move to the term's next row of bm25_blocks, or mark it exhausted. */
static void
term_next_row(Walk *w, Term *t)
{
	Datum		d;
	bool		isnull;
	int64		last;
	int32		n;
	struct varlena *raw;
	struct varlena *payload;

	CHECK_FOR_INTERRUPTS();
	t->decoded = false;
	if (t->copy)
	{
		pfree(t->copy);
		t->copy = NULL;
	}
	if (!index_getnext_slot(t->scan, ForwardScanDirection, t->slot))
	{
		t->exhausted = true;
		return;
	}
	w->rows++;
	d = slot_getattr(t->slot, w->att_last, &isnull);
	if (isnull)
		bm25_corrupt("a row of bm25_blocks has no last_chunk");
	last = DatumGetInt64(d);
	d = slot_getattr(t->slot, w->att_n, &isnull);
	if (isnull)
		bm25_corrupt("a row of bm25_blocks has no n");
	n = DatumGetInt32(d);
	d = slot_getattr(t->slot, w->att_data, &isnull);
	if (isnull)
		bm25_corrupt("a row of bm25_blocks has no data");

	/* in place in the pinned buffer, unless compressed or TOASTed */
	raw = (struct varlena *) DatumGetPointer(d);
	payload = pg_detoast_datum_packed(raw);
	if (payload != raw)
		t->copy = payload;
	bm25_block_parse((const uint8 *) VARDATA_ANY(payload), VARSIZE_ANY_EXHDR(payload),
					 t->row_last, &t->block);
	if (t->block.sub[t->block.nsub - 1].last != last)
		bm25_corrupt(psprintf("payload ends at chunk " INT64_FORMAT
							  ", its row's last_chunk is " INT64_FORMAT,
							  t->block.sub[t->block.nsub - 1].last, last));
	if (t->block.n != n)
		bm25_corrupt(psprintf("payload holds %d postings, its row's n is %d",
							  t->block.n, n));
	t->row_last = last;
	for (int s = 0; s < t->block.nsub; s++)
	{
		const Bm25SubBlock *sub = &t->block.sub[s];
		double		bound = 0.0;

		for (int j = 0; j < sub->npoints; j++)
			bound = Max(bound, point_bound(&w->params, t->weight, &sub->points[j]));
		t->bound[s] = bound;
	}
	t->sub = 0;
}

/* Make the term's current sub-block the first whose last id is >= target. */
static inline void
term_seek(Walk *w, Term *t, int64 target)
{
	while (!t->exhausted && t->block.sub[t->sub].last < target)
	{
		if (t->sub + 1 < t->block.nsub)
		{
			t->sub++;
			t->decoded = false;
		}
		else
			term_next_row(w, t);
	}
}

/*
 * Read the posting at *p of a sub-block after chunk `prev`, checked to lie in
 * the sub-block's range and under one of its bound points.
 */
static inline int64
subblock_posting_get(const Bm25SubBlock *sub, const uint8 **p, const uint8 *end,
					 int64 prev, int32 *fields)
{
	int64		id = bm25_posting_get(p, end, prev, fields);

	if (unlikely(id <= sub->floor))
		bm25_corrupt("block overlaps the previous block");
	if (unlikely(id > sub->last))
		bm25_corrupt("chunk id beyond its sub-block's last id");
	if (unlikely(!bm25_posting_bounded(sub, fields)))
		bm25_corrupt(psprintf("posting of chunk " INT64_FORMAT
							  " above its sub-block's bound", id));
	return id;
}

/* Check that a sub-block whose last posting was read ended with it. */
static inline void
subblock_check_end(const Bm25SubBlock *sub, const uint8 *p, const uint8 *end, int64 id)
{
	if (p != end || id != sub->last)
		bm25_corrupt("sub-block ends before its bytes or its last id");
}

/*
 * Decode postings of the term's current sub-block until one at or after d, or
 * all of them (d = PG_INT64_MAX), are decoded.  Every posting is validated as
 * read; the sub-block's end (its bytes all used, its last id the directory's)
 * once the last is read.
 */
static void
term_fill(Walk *w, Term *t, int64 d)
{
	const Bm25SubBlock *sub = &t->block.sub[t->sub];
	int64		id;

	if (!t->decoded)
	{
		t->next = t->block.data + sub->offset;
		t->end = t->next + sub->length;
		t->total = sub->count;
		t->count = 0;
		t->pos = 0;
		t->decoded = true;
		w->subblocks_decoded++;
	}
	id = t->count > 0 ? t->ids[t->count - 1] : sub->base;
	if (t->count == t->total || (t->count > 0 && id >= d))
		return;
	do
	{
		id = subblock_posting_get(sub, &t->next, t->end, id, t->fields[t->count]);
		t->ids[t->count] = id;
		t->parts[t->count] = NAN;
		t->count++;
	} while ((id < d || d == PG_INT64_MAX) && t->count < t->total);
	if (t->count == t->total)
		subblock_check_end(sub, t->next, t->end, id);
}

/*
 * The part of the term's posting of chunk `id` with these fields (decoded by
 * subblock_posting_get, so under its sub-block's bound up to rounding, which
 * the pruning's slack covers).
 */
static inline double
part_checked(Walk *w, const Term *t, int64 id, const int32 *fields)
{
	double		part = bm25_part(&w->params, t->weight, fields[0], fields[1],
								 fields[2], fields[3]);

	if (unlikely(!isfinite(part)))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("BM25 score of chunk " INT64_FORMAT " is out of range", id),
				 errhint("Check the weights, avglen and boost.")));
	return part;
}

/* The part of the term's decoded posting i, scored on first use. */
static inline double
term_part(Walk *w, Term *t, int i)
{
	double		part = t->parts[i];

	if (likely(!isnan(part)))
		return part;
	part = part_checked(w, t, t->ids[i], t->fields[i]);
	t->parts[i] = part;
	return part;
}

/*
 * The term's part in chunk d (0 when absent); moves its cursor to >= d, over
 * the sub-blocks and rows a window may span.
 */
static inline double
term_part_at(Walk *w, Term *t, int64 d)
{
	if (!t->in_window)
		return 0.0;
	term_seek(w, t, d);
	if (t->exhausted)
		return 0.0;
	if (!t->decoded || (t->count < t->total && (t->count == 0 || t->ids[t->count - 1] < d)))
		term_fill(w, t, d);
	while (t->pos < t->count && t->ids[t->pos] < d)
		t->pos++;
	return (t->pos < t->count && t->ids[t->pos] == d) ? term_part(w, t, t->pos) : 0.0;
}

/*
 * The term's bound in a window ending at wend: the largest of its sub-blocks'
 * there, from its current one, or its ceiling where the window goes past its
 * row.
 */
static inline double
term_window_bound(const Term *t, int64 wend)
{
	double		bound = t->bound[t->sub];

	for (int s = t->sub + 1; s < t->block.nsub && t->block.sub[s].floor < wend; s++)
		bound = Max(bound, t->bound[s]);
	if (t->block.sub[t->block.nsub - 1].last < wend)
		bound = Max(bound, t->ceiling);
	return bound;
}

/* A unit's score in the current chunk, from its terms' parts there (cur). */
static inline double
unit_value(Walk *w, const Unit *u)
{
	double		best = 0.0;

	if (u->nalts == 0)
		return w->terms[u->terms[0]].cur;
	for (int a = 0; a < u->nalts; a++)
		w->alt_sums[a] = 0.0;
	for (int i = 0; i < u->nterms; i++)
	{
		const Term *t = &w->terms[u->terms[i]];

		w->alt_sums[t->alt] += t->cur;
	}
	for (int a = 0; a < u->nalts; a++)
		best = Max(best, w->alt_sums[a]);
	return best;
}

/* ---------------------------------------------------------------------------
 * the walk
 * ---------------------------------------------------------------------------
 */

/*
 * Whether chunk d is filtered out (dead, or not allowed); if so, *next is the
 * smallest id that might not be, or 0 when no later chunk can be allowed.
 */
static inline bool
chunk_filtered(Walk *w, int64 d, int64 *next)
{
	while (w->dead_pos < w->ndead && w->dead[w->dead_pos] < d)
		w->dead_pos++;
	if (w->dead_pos < w->ndead && w->dead[w->dead_pos] == d)
	{
		*next = d == PG_INT64_MAX ? 0 : d + 1;
		return true;
	}
	if (w->allowed)
	{
		while (w->allowed_pos < w->nallowed && w->allowed[w->allowed_pos] < d)
			w->allowed_pos++;
		if (w->allowed_pos == w->nallowed)
		{
			*next = 0;
			return true;
		}
		if (w->allowed[w->allowed_pos] != d)
		{
			*next = w->allowed[w->allowed_pos];
			return true;
		}
	}
	return false;
}

static void
units_sort(Walk *w, int np)
{
	/* insertion sort: a handful of units, nearly sorted from window to window */
	for (int i = 1; i < np; i++)
	{
		int			u = w->order[i];
		double		b = w->units[u].bound;
		int			j = i;

		while (j > 0 && w->units[w->order[j - 1]].bound > b)
		{
			w->order[j] = w->order[j - 1];
			j--;
		}
		w->order[j] = u;
	}
}

/* The smallest chunk id at the essential terms' positions, if any is left. */
static inline bool
essential_next(Walk *w, int ness, int64 *d)
{
	bool		found = false;

	*d = PG_INT64_MAX;
	for (int e = 0; e < ness; e++)
	{
		const Term *t = w->ess[e];

		if (t->pos < t->count && t->ids[t->pos] <= *d)
		{
			*d = t->ids[t->pos];
			found = true;
		}
	}
	return found;
}

/*
 * The units present in a window ending at wend, into w->order, and their
 * bounds there; returns how many.
 */
static int
window_units(Walk *w, int64 wend)
{
	int			np = 0;

	for (int i = 0; i < w->nterms; i++)
	{
		Term	   *t = &w->terms[i];

		t->in_window = !t->exhausted && t->block.sub[t->sub].floor < wend;
	}
	for (int u = 0; u < w->nunits; u++)
	{
		Unit	   *unit = &w->units[u];

		unit->present = false;
		unit->bound = 0.0;
		if (unit->nalts == 0)
		{
			Term	   *t = &w->terms[unit->terms[0]];

			unit->present = t->in_window;
			if (t->in_window)
				unit->bound = term_window_bound(t, wend);
		}
		else
		{
			for (int a = 0; a < unit->nalts; a++)
				w->alt_sums[a] = 0.0;
			for (int i = 0; i < unit->nterms; i++)
			{
				Term	   *t = &w->terms[unit->terms[i]];

				if (!t->in_window)
					continue;
				unit->present = true;
				w->alt_sums[t->alt] += term_window_bound(t, wend);
			}
			for (int a = 0; a < unit->nalts; a++)
				unit->bound = Max(unit->bound, w->alt_sums[a]);
		}
		if (unit->present)
			w->order[np++] = u;
	}
	return np;
}

/*
 * The smallest current sub-block end of the terms of units order[ne..np) in
 * the window, if below wend, else wend.
 */
static int64
essential_end(Walk *w, int ne, int np, int64 wend)
{
	for (int i = ne; i < np; i++)
	{
		const Unit *unit = &w->units[w->order[i]];

		for (int j = 0; j < unit->nterms; j++)
		{
			const Term *t = &w->terms[unit->terms[j]];

			if (t->in_window)
				wend = Min(wend, t->block.sub[t->sub].last);
		}
	}
	return wend;
}

/*
 * Score chunk d from its terms' parts there (their cur), summed in the
 * canonical order (units in their own order), and offer it.
 */
static void
chunk_offer(Walk *w, int64 d)
{
	double		score = 0.0;

	for (int u = 0; u < w->nunits; u++)
		if (w->units[u].present)
			score += unit_value(w, &w->units[u]);
	if (unlikely(!isfinite(score)))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("BM25 score of chunk " INT64_FORMAT " is out of range", d),
				 errhint("Check the weights, avglen and boost.")));
	if (score > 0.0)
		hits_offer(w, score, d);
}

/*
 * Finish candidate d, whose essential terms' parts sum to s: probe the others,
 * largest bound first, while d can still enter the top k; if it may, score it
 * in the canonical order (units in their own order) and offer it.  The
 * essential terms' parts in d (their cur) are set already, or here when
 * `ess_set` is false.
 */
static void
candidate_finish(Walk *w, int64 d, double s, int ne, int ness, bool ess_set)
{
	double		theta = walk_theta(w);

	for (int i = ne - 1; i >= 0; i--)
	{
		const Unit *unit = &w->units[w->order[i]];

		if (cannot_beat(s + w->prefix[i + 1], theta))
		{
			w->candidates_pruned++;
			return;
		}
		for (int j = 0; j < unit->nterms; j++)
		{
			Term	   *t = &w->terms[unit->terms[j]];

			t->cur = term_part_at(w, t, d);
		}
		s += unit_value(w, unit);
	}
	if (!ess_set)
	{
		for (int e = 0; e < ness; e++)
		{
			Term	   *t = w->ess[e];

			while (t->pos < t->count && t->ids[t->pos] < d)
				t->pos++;
			t->cur = t->pos < t->count && t->ids[t->pos] == d ? term_part(w, t, t->pos) : 0.0;
		}
	}
	chunk_offer(w, d);
}

/* Whether any chunk of slots [lo, hi] of a dense window is still a candidate. */
static inline bool
alive_any(const uint64 *alive, int lo, int hi)
{
	int			first = lo >> 6;
	int			last = hi >> 6;
	uint64		lo_mask = ~UINT64CONST(0) << (lo & 63);
	uint64		hi_mask = ~UINT64CONST(0) >> (63 - (hi & 63));

	if (first == last)
		return (alive[first] & lo_mask & hi_mask) != 0;
	if (alive[first] & lo_mask)
		return true;
	for (int word = first + 1; word < last; word++)
		if (alive[word])
			return true;
	return (alive[last] & hi_mask) != 0;
}

/* A term's parts in a dense window: none recorded yet. */
static void
dense_begin(Walk *w, Term *t, int nwords)
{
	if (t->dparts == NULL)
	{
		t->dparts = palloc(sizeof(double) * w->dense_span);
		t->dwritten = palloc(sizeof(uint64) * (w->dense_span / 64));
	}
	memset(t->dwritten, 0, sizeof(uint64) * nwords);
}

/* What a dense window does with a term's postings */
typedef enum DenseRole
{
	DENSE_ESSENTIAL,			/* every one: its part recorded and added to the
								 * chunk's sum, which makes the chunk a candidate */
	DENSE_ADD,					/* in the chunks alive: recorded and added (an
								 * ungrouped non-essential term) */
	DENSE_RECORD,				/* in the chunks alive: recorded (a term of a
								 * group, whose best alternative is added after) */
} DenseRole;

/* Whether a term in this role records its posting in chunk slot of a dense window. */
static inline bool
dense_wanted(const Walk *w, int slot, DenseRole role)
{
	return role == DENSE_ESSENTIAL || (w->alive[slot >> 6] & (UINT64CONST(1) << (slot & 63)));
}

/* Record a term's part in chunk slot of a dense window, in its role. */
static inline void
dense_record(Walk *w, Term *t, int slot, double part, DenseRole role)
{
	uint64		bit = UINT64CONST(1) << (slot & 63);

	t->dparts[slot] = part;
	t->dwritten[slot >> 6] |= bit;
	if (role == DENSE_ADD)
		w->sums[slot] += part;
	else if (role == DENSE_ESSENTIAL)
	{
		if (w->seen[slot >> 6] & bit)
			w->sums[slot] += part;
		else
		{
			w->seen[slot >> 6] |= bit;
			w->sums[slot] = part;
		}
	}
}

/*
 * Decode the term's current sub-block, all inside a dense window and not
 * started, straight into the window: every posting validated as term_fill
 * does, scored only where recorded.  The cursor stays before it, undecoded:
 * the walk moves past it.
 */
static void
dense_subblock(Walk *w, Term *t, int64 wstart, DenseRole role)
{
	const Bm25SubBlock *sub = &t->block.sub[t->sub];
	const uint8 *p = t->block.data + sub->offset;
	const uint8 *end = p + sub->length;
	int64		id = sub->base;
	int32		fields[4];

	w->subblocks_decoded++;
	for (int n = 0; n < sub->count; n++)
	{
		int			slot;

		id = subblock_posting_get(sub, &p, end, id, fields);
		slot = (int) (id - wstart);
		if (dense_wanted(w, slot, role))
			dense_record(w, t, slot, part_checked(w, t, id, fields), role);
	}
	subblock_check_end(sub, p, end, id);
}

/* The term's recorded part in chunk slot of the dense window (0 when absent). */
static inline double
dense_part(const Term *t, int slot)
{
	if (!t->in_window || !(t->dwritten[slot >> 6] & (UINT64CONST(1) << (slot & 63))))
		return 0.0;
	return t->dparts[slot];
}

/*
 * Record the term's parts in the chunks of a dense window, over the sub-blocks
 * and rows it spans: an essential term's in every chunk it has, each added to
 * the chunk's sum (the chunk is then a candidate); another's only in the
 * chunks still alive, and a sub-block with none alive in its range is not
 * decoded.  A sub-block all inside the window and not started is decoded
 * straight into it (dense_subblock); one the window cuts goes through the
 * cursor (term_fill), which the next window reads on from.
 */
static void
dense_walk(Walk *w, Term *t, int64 wstart, int64 wend, DenseRole role)
{
	while (!t->exhausted)
	{
		const Bm25SubBlock *sub = &t->block.sub[t->sub];
		int64		lo = Max(sub->floor + 1, wstart);
		int64		hi = Min(sub->last, wend);
		bool		wanted;

		if (sub->floor >= wend)
			break;
		wanted = role == DENSE_ESSENTIAL ||
			alive_any(w->alive, (int) (lo - wstart), (int) (hi - wstart));
		if (wanted && !t->decoded && sub->floor >= wstart - 1 && sub->last <= wend)
			dense_subblock(w, t, wstart, role);
		else if (wanted)
		{
			int			i;

			term_fill(w, t, hi);
			while (t->pos < t->count && t->ids[t->pos] < wstart)
				t->pos++;
			for (i = t->pos; i < t->count && t->ids[i] <= wend; i++)
			{
				int			slot = (int) (t->ids[i] - wstart);

				if (dense_wanted(w, slot, role))
					dense_record(w, t, slot, term_part(w, t, i), role);
			}
			t->pos = i;
		}
		if (sub->last >= wend)
			break;
		term_seek(w, t, sub->last + 1);
	}
}

/*
 * A window of at most dense_span chunks, term at a time.  With many frequent
 * terms nearly every chunk is a candidate, and going document at a time (the
 * merge of the essential terms' cursors, then each candidate's probes into
 * the others) cost more per candidate than decoding its postings; here each
 * posting is visited once, in a loop over one term's postings:
 *	 - the essential terms' parts are added up by chunk, and the chunks met
 *	   (the candidates) that cannot beat theta with every other unit at its
 *	   bound are dropped;
 *	 - each non-essential unit, largest bound first, adds its parts in the
 *	   candidates left, which are then dropped if they cannot beat theta with
 *	   the units still to come at their bounds;
 *	 - the chunks left are scored from their recorded parts in the canonical
 *	   order and offered.
 * The sums are in that order, not the canonical one, so they serve the
 * pruning only (which allows for a few ulps).  theta is the one at the
 * window's start: a lower theta prunes less, never wrongly.  False when the
 * walk is over.
 */
static bool
dense_window(Walk *w, int64 wstart, int64 wend, int ne, int ness)
{
	int			span = (int) (wend - wstart + 1);
	int			nwords = (span + 63) / 64;
	double		theta = walk_theta(w);
	bool		more = true;
	int			nalive = 0;
	uint32		ncandidates = 0;

	memset(w->seen, 0, sizeof(uint64) * nwords);
	memset(w->alive, 0, sizeof(uint64) * nwords);
	for (int e = 0; e < ness; e++)
	{
		dense_begin(w, w->ess[e], nwords);
		dense_walk(w, w->ess[e], wstart, wend, DENSE_ESSENTIAL);
	}

	/* the candidates, filtered, and pruned with every other unit at its bound */
	for (int word = 0; word < nwords && more; word++)
	{
		uint64		bits = w->seen[word];

		while (bits != 0)
		{
			int			slot = word * 64 + pg_rightmost_one_pos64(bits);
			int64		next;

			bits &= bits - 1;
			if ((++ncandidates & 1023) == 0)
				CHECK_FOR_INTERRUPTS();
			if (chunk_filtered(w, wstart + slot, &next))
			{
				if (next == 0)
				{
					more = false;	/* nothing later is allowed */
					break;
				}
				continue;
			}
			w->candidates++;
			if (cannot_beat(w->sums[slot] + w->prefix[ne], theta))
			{
				w->candidates_pruned++;
				continue;
			}
			w->alive[word] |= UINT64CONST(1) << (slot & 63);
			nalive++;
		}
	}

	/* the non-essential units, largest bound first */
	for (int i = ne - 1; i >= 0 && nalive > 0; i--)
	{
		const Unit *unit = &w->units[w->order[i]];

		for (int j = 0; j < unit->nterms; j++)
		{
			Term	   *t = &w->terms[unit->terms[j]];

			if (!t->in_window)
				continue;
			dense_begin(w, t, nwords);
			dense_walk(w, t, wstart, wend, unit->nalts == 0 ? DENSE_ADD : DENSE_RECORD);
		}
		for (int word = 0; word < nwords; word++)
		{
			uint64		bits = w->alive[word];

			while (bits != 0)
			{
				int			slot = word * 64 + pg_rightmost_one_pos64(bits);

				bits &= bits - 1;
				if (unit->nalts > 0)
				{
					for (int j = 0; j < unit->nterms; j++)
					{
						Term	   *t = &w->terms[unit->terms[j]];

						t->cur = dense_part(t, slot);
					}
					w->sums[slot] += unit_value(w, unit);
				}
				if (cannot_beat(w->sums[slot] + w->prefix[i], theta))
				{
					w->alive[word] &= ~(UINT64CONST(1) << (slot & 63));
					w->candidates_pruned++;
					nalive--;
				}
			}
		}
	}

	/* the chunks left, scored in the canonical order */
	for (int word = 0; word < nwords && nalive > 0; word++)
	{
		uint64		bits = w->alive[word];

		while (bits != 0)
		{
			int			slot = word * 64 + pg_rightmost_one_pos64(bits);

			bits &= bits - 1;
			for (int t = 0; t < w->nterms; t++)
				w->terms[t].cur = dense_part(&w->terms[t], slot);
			chunk_offer(w, wstart + slot);
		}
	}
	return more;
}

/*
 * Score the chunks of one window [wstart, *wend], cut shorter (*wend) where its
 * essential terms' sub-blocks end; false when the walk is over.
 */
static bool
walk_window(Walk *w, int64 wstart, int64 *wend_io)
{
	int			np;
	int			ne;
	double		theta = walk_theta(w);
	uint32		ncandidates = 0;
	int			ness;
	bool		ess_groups = false;
	bool		found;
	int64		d;
	int64		wend = *wend_io;
	bool		dense = false;

	/*
	 * The units present and their bounds; the essential ones, whose terms must
	 * each have one sub-block in the window: cut it where the first ends, and
	 * again, as the bounds shrink with it (at most once per term).
	 */
	for (;;)
	{
		int64		cut;

		np = window_units(w, wend);
		if (np == 0)
		{
			*wend_io = wend;
			return true;
		}
		ne = 0;
		if (w->pruning)
		{
			units_sort(w, np);
			w->prefix[0] = 0.0;
			for (int i = 0; i < np; i++)
				w->prefix[i + 1] = w->prefix[i] + w->units[w->order[i]].bound;
			if (cannot_beat(w->prefix[np], theta))
			{
				w->windows++;
				w->windows_skipped++;
				*wend_io = wend;
				return true;	/* nothing decoded */
			}
			while (ne < np && cannot_beat(w->prefix[ne + 1], theta))
				ne++;
		}
		if (dense)
			break;
		if (w->pruning && wend - wstart < w->dense_span)
		{
			/*
			 * Not skipped: a dense window, which its terms' sub-blocks do not
			 * cut, spans dense_span (its bounds taken again).
			 */
			dense = true;
			if (wstart <= PG_INT64_MAX - w->dense_span)
				wend = wstart + w->dense_span - 1;
			continue;
		}
		cut = essential_end(w, ne, np, wend);
		if (cut == wend)
			break;
		wend = cut;
	}
	*wend_io = wend;
	w->windows++;

	/* the essential terms cut the next window */
	for (int i = 0; i < w->nterms; i++)
		w->terms[i].cuts = false;
	for (int i = ne; i < np; i++)
	{
		const Unit *unit = &w->units[w->order[i]];

		for (int j = 0; j < unit->nterms; j++)
			w->terms[unit->terms[j]].cuts = true;
	}

	/*
	 * The essential units' terms, decoded and at wstart; the others' parts are
	 * 0 unless probed.
	 */
	for (int i = 0; i < w->nterms; i++)
		w->terms[i].cur = 0.0;
	ness = 0;
	for (int i = ne; i < np; i++)
	{
		const Unit *unit = &w->units[w->order[i]];

		ess_groups |= unit->nalts > 0;
		for (int j = 0; j < unit->nterms; j++)
		{
			Term	   *t = &w->terms[unit->terms[j]];

			if (!t->in_window)
				continue;
			if (!dense)
			{
				term_fill(w, t, PG_INT64_MAX);
				while (t->pos < t->count && t->ids[t->pos] < wstart)
					t->pos++;
			}
			w->ess[ness++] = t;
		}
	}

	if (dense)
		return dense_window(w, wstart, wend, ne, ness);
	found = essential_next(w, ness, &d);
	while (found && d <= wend)
	{
		int64		next;
		int64		after = PG_INT64_MAX;
		bool		more = false;
		double		s = 0.0;

		if ((++ncandidates & 1023) == 0)
			CHECK_FOR_INTERRUPTS();

		if (chunk_filtered(w, d, &next))
		{
			if (next == 0)
				return false;	/* nothing later is allowed */
			for (int e = 0; e < ness; e++)
			{
				Term	   *t = w->ess[e];

				while (t->pos < t->count && t->ids[t->pos] < next)
					t->pos++;
			}
			found = essential_next(w, ness, &d);
			continue;
		}

		/*
		 * One pass over the essential terms: their parts in d (summed: exact
		 * unless a group's alternatives are summed, an upper bound then), each
		 * moved past d, and the chunk after d.
		 */
		w->candidates++;
		for (int e = 0; e < ness; e++)
		{
			Term	   *t = w->ess[e];

			t->cur = 0.0;
			if (t->pos < t->count)
			{
				if (t->ids[t->pos] == d)
				{
					t->cur = term_part(w, t, t->pos++);
					s += t->cur;
				}
				if (t->pos < t->count && t->ids[t->pos] <= after)
				{
					after = t->ids[t->pos];
					more = true;
				}
			}
		}
		if (ess_groups && ne > 0)
		{
			s = 0.0;
			for (int i = ne; i < np; i++)
				s += unit_value(w, &w->units[w->order[i]]);
		}

		candidate_finish(w, d, s, ne, ness, true);
		d = after;
		found = more;
	}
	return true;
}

static void
walk_run(Walk *w)
{
	int64		wstart = 1;

	for (int i = 0; i < w->nterms; i++)
		w->terms[i].cuts = true;
	for (;;)
	{
		int64		wend = PG_INT64_MAX;
		bool		any = false;

		CHECK_FOR_INTERRUPTS();
		if (w->allowed)
		{
			while (w->allowed_pos < w->nallowed && w->allowed[w->allowed_pos] < wstart)
				w->allowed_pos++;
			if (w->allowed_pos == w->nallowed)
				return;
			wstart = w->allowed[w->allowed_pos];
		}
		for (int i = 0; i < w->nterms; i++)
		{
			Term	   *t = &w->terms[i];

			term_seek(w, t, wstart);
			if (t->exhausted)
				continue;
			any = true;
			if (t->cuts)
				wend = Min(wend, t->block.sub[t->sub].last);
		}
		if (!any)
			return;
		if (!walk_window(w, wstart, &wend))
			return;
		if (wend == PG_INT64_MAX)
			return;
		wstart = wend + 1;
	}
}

/* ---------------------------------------------------------------------------
 * arguments and relations
 * ---------------------------------------------------------------------------
 */

static ArrayType *
array_arg(FunctionCallInfo fcinfo, int argno, Oid elemtype, const char *name)
{
	ArrayType  *a;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("bm25_topk: %s must not be NULL", name)));
	a = PG_GETARG_ARRAYTYPE_P(argno);
	if (ARR_NDIM(a) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("bm25_topk: %s must be a one-dimensional array", name)));
	if (ARR_ELEMTYPE(a) != elemtype)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("bm25_topk: %s has the wrong element type", name)));
	return a;
}

static double
float8_arg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("bm25_topk: %s must not be NULL", name)));
	return PG_GETARG_FLOAT8(argno);
}

static int
int8_cmp(const void *a, const void *b)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return x < y ? -1 : (x > y ? 1 : 0);
}

/*
 * The ids of an optional bigint[] argument, ascending and unique (sorted and
 * deduplicated into a copy unless they already are); NULL elements refused.
 */
static const int64 *
id_set_arg(FunctionCallInfo fcinfo, int argno, const char *name, int *n)
{
	ArrayType  *a = array_arg(fcinfo, argno, INT8OID, name);
	const int64 *ids;
	int64	   *copy;
	int			m;

	if (ARR_HASNULL(a) && array_contains_nulls(a))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("bm25_topk: %s must not contain NULLs", name)));
	*n = ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a));
	ids = (const int64 *) ARR_DATA_PTR(a);
	for (int i = 1; i < *n; i++)
	{
		if (ids[i] > ids[i - 1])
			continue;
		/* not ascending: sort a copy */
		copy = palloc(sizeof(int64) * *n);
		memcpy(copy, ids, sizeof(int64) * *n);
		qsort(copy, *n, sizeof(int64), int8_cmp);
		m = 1;
		for (int j = 1; j < *n; j++)
			if (copy[j] != copy[m - 1])
				copy[m++] = copy[j];
		*n = m;
		return copy;
	}
	return ids;
}

static AttrNumber
column(Relation heap, const char *name, Oid type)
{
	AttrNumber	att = get_attnum(RelationGetRelid(heap), name);

	if (att == InvalidAttrNumber ||
		TupleDescAttr(RelationGetDescr(heap), att - 1)->atttypid != type)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("bm25_blocks has no column %s of type %s", name,
						format_type_be(type))));
	return att;
}

/*
 * Open bm25_blocks of the search path and its primary key, checking they are
 * what the walk reads: (collection_id bigint, lexeme text, last_chunk bigint)
 * in a btree of the default operator families, last_chunk ascending.
 */
static void
walk_open(Walk *w)
{
	Oid			relid;
	Oid			indexid;
	AclResult	acl;
	AttrNumber	att_collection;
	AttrNumber	att_lexeme;
	Form_pg_index ind;

	relid = RangeVarGetRelid(makeRangeVar(NULL, "bm25_blocks", -1), AccessShareLock, false);
	acl = pg_class_aclcheck(relid, GetUserId(), ACL_SELECT);
	if (acl != ACLCHECK_OK)
		aclcheck_error(acl, OBJECT_TABLE, "bm25_blocks");
	if (check_enable_rls(relid, InvalidOid, false) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("bm25_topk does not read bm25_blocks under row-level security")));
	w->heap = table_open(relid, NoLock);
	if (w->heap->rd_rel->relkind != RELKIND_RELATION)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("bm25_blocks is not a table")));
	att_collection = column(w->heap, "collection_id", INT8OID);
	att_lexeme = column(w->heap, "lexeme", TEXTOID);
	w->att_last = column(w->heap, "last_chunk", INT8OID);
	w->att_n = column(w->heap, "n", INT4OID);
	w->att_data = column(w->heap, "data", BYTEAOID);

	indexid = RelationGetPrimaryKeyIndex(w->heap, false);
	if (!OidIsValid(indexid))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("bm25_blocks has no primary key")));
	w->index = index_open(indexid, AccessShareLock);
	ind = w->index->rd_index;
	if (w->index->rd_rel->relam != BTREE_AM_OID ||
		ind->indnkeyatts != 3 ||
		ind->indkey.values[0] != att_collection ||
		ind->indkey.values[1] != att_lexeme ||
		ind->indkey.values[2] != w->att_last ||
		w->index->rd_opfamily[0] != INTEGER_BTREE_FAM_OID ||
		w->index->rd_opfamily[1] != TEXT_BTREE_FAM_OID ||
		w->index->rd_opfamily[2] != INTEGER_BTREE_FAM_OID ||
		(w->index->rd_indoption[2] & INDOPTION_DESC) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("bm25_blocks's primary key is not a btree on (collection_id, lexeme, last_chunk)")));
}

static void
walk_close(Walk *w)
{
	for (int i = 0; i < w->nterms; i++)
	{
		index_endscan(w->terms[i].scan);
		ExecDropSingleTupleTableSlot(w->terms[i].slot);
	}
	index_close(w->index, NoLock);
	table_close(w->heap, NoLock);
}

/*
 * The terms and their units: an ungrouped term is a unit; the terms of one
 * group are one unit, their alternatives numbered densely (a NULL alt is an
 * alternative of its own), units in the order of their first term.
 */
static void
walk_terms(Walk *w, int64 collection_id, Datum *lexemes, const int32 *groups,
		   const bool *group_nulls, const int32 *alts, const bool *alt_nulls,
		   const float8 *weights)
{
	int		   *unit_first = palloc(sizeof(int) * w->nterms);	/* a term of each unit */

	w->terms = palloc0(sizeof(Term) * w->nterms);
	w->units = palloc0(sizeof(Unit) * w->nterms);

	/* each term's unit, and each unit's size */
	w->nunits = 0;
	for (int i = 0; i < w->nterms; i++)
	{
		Term	   *t = &w->terms[i];

		t->unit = -1;
		for (int u = 0; u < w->nunits && t->unit < 0 && !group_nulls[i]; u++)
			if (!group_nulls[unit_first[u]] && groups[unit_first[u]] == groups[i])
				t->unit = u;
		if (t->unit < 0)
		{
			t->unit = w->nunits++;
			unit_first[t->unit] = i;
		}
		w->units[t->unit].nterms++;
	}
	for (int u = 0; u < w->nunits; u++)
	{
		w->units[u].terms = palloc(sizeof(int) * w->units[u].nterms);
		w->units[u].nterms = 0;
	}

	/* the terms of each unit, ascending; a group's alternatives numbered densely */
	for (int i = 0; i < w->nterms; i++)
	{
		Term	   *t = &w->terms[i];
		Unit	   *unit = &w->units[t->unit];

		t->weight = weights[i];
		/* tf (k1 + 1) / (tf + k1 norm) <= k1 + 1, as norm >= 0; a few ulps above at most */
		t->ceiling = t->weight * w->params.k1_plus_1;
		if (isnan(t->ceiling))
			t->ceiling = INFINITY;
		else if (t->ceiling == 0.0 && t->weight > 0.0)
			t->ceiling = DBL_MIN;
		t->alt = 0;
		if (!group_nulls[i])
		{
			t->alt = -1;
			for (int j = 0; j < unit->nterms && t->alt < 0; j++)
			{
				int			o = unit->terms[j];

				if (alt_nulls[o] == alt_nulls[i] && (alt_nulls[i] || alts[o] == alts[i]))
					t->alt = w->terms[o].alt;
			}
			if (t->alt < 0)
				t->alt = unit->nalts++;
		}
		unit->terms[unit->nterms++] = i;

		t->slot = table_slot_create(w->heap, NULL);
		ScanKeyEntryInitialize(&t->keys[0], 0, 1, BTEqualStrategyNumber, InvalidOid,
							   w->index->rd_indcollation[0], F_INT8EQ,
							   Int64GetDatum(collection_id));
		ScanKeyEntryInitialize(&t->keys[1], 0, 2, BTEqualStrategyNumber, InvalidOid,
							   w->index->rd_indcollation[1], F_TEXTEQ, lexemes[i]);
		t->scan = index_beginscan(w->heap, w->index, GetActiveSnapshot(), NULL, 2, 0);
		index_rescan(t->scan, t->keys, 2, NULL, 0);
		t->row_last = 0;
		t->exhausted = false;
	}

	/*
	 * A group of one term (a typo correction; a rule whose other alternatives
	 * the collection lacks) is walked as an ungrouped term: its best
	 * alternative is that term's part, the same double, and an ungrouped term
	 * is added as it is decoded where a group's parts are recorded, then
	 * weighed per candidate (5 % of the keyword statement's mean time on
	 * misspelled questions, 10 % of its p95: bench.keyword_builds).
	 */
	for (int u = 0; u < w->nunits; u++)
	{
		if (w->units[u].nterms == 1)
		{
			w->units[u].nalts = 0;
			w->terms[w->units[u].terms[0]].alt = 0;
		}
	}
	/* each term at its first row */
	for (int i = 0; i < w->nterms; i++)
		term_next_row(w, &w->terms[i]);
	pfree(unit_first);
}

PG_FUNCTION_INFO_V1(bm25_topk);

/*
 * bm25_topk(collection_id bigint, lexemes text[], groups int4[], alts int4[],
 *			 weights float8[], avglen float8, k1 float8, b float8,
 *			 boost float8, k int4, allowed bigint[], dead bigint[])
 *	 RETURNS TABLE (chunk_id bigint, score float8)
 */
Datum
bm25_topk(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext walk_cxt;
	MemoryContext old_cxt;
	Walk	   *w;
	int64		collection_id;
	ArrayType  *a;
	Datum	   *lexemes;
	bool	   *lexeme_nulls;
	int32	   *groups;
	bool	   *group_nulls;
	int32	   *alts;
	bool	   *alt_nulls;
	const float8 *weights;
	int			n;

	InitMaterializedSRF(fcinfo, 0);
	walk_cxt = AllocSetContextCreate(CurrentMemoryContext, "cari_bm25 top k",
									 ALLOCSET_DEFAULT_SIZES);
	old_cxt = MemoryContextSwitchTo(walk_cxt);
	w = palloc0(sizeof(Walk));
	w->pruning = bm25_pruning;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("bm25_topk: collection_id must not be NULL")));
	collection_id = PG_GETARG_INT64(0);

	a = array_arg(fcinfo, 1, TEXTOID, "lexemes");
	deconstruct_array_builtin(a, TEXTOID, &lexemes, &lexeme_nulls, &n);
	for (int i = 0; i < n; i++)
		if (lexeme_nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("bm25_topk: lexemes must not contain NULLs")));
	if (n > BM25_MAX_TERMS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("bm25_topk: at most %d lexemes, got %d", BM25_MAX_TERMS, n)));

	/* groups and alts: NULL elements allowed (no group; an alternative of its own) */
	groups = palloc0(sizeof(int32) * Max(n, 1));
	group_nulls = palloc(sizeof(bool) * Max(n, 1));
	alts = palloc0(sizeof(int32) * Max(n, 1));
	alt_nulls = palloc(sizeof(bool) * Max(n, 1));
	for (int arg = 2; arg <= 3; arg++)
	{
		const char *name = arg == 2 ? "groups" : "alts";
		int32	   *values = arg == 2 ? groups : alts;
		bool	   *nulls = arg == 2 ? group_nulls : alt_nulls;
		Datum	   *elems;
		bool	   *elem_nulls;
		int			m;

		a = array_arg(fcinfo, arg, INT4OID, name);
		deconstruct_array_builtin(a, INT4OID, &elems, &elem_nulls, &m);
		if (m != n)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("bm25_topk: %s has %d elements, lexemes %d", name, m, n)));
		for (int i = 0; i < n; i++)
		{
			nulls[i] = elem_nulls[i];
			values[i] = elem_nulls[i] ? 0 : DatumGetInt32(elems[i]);
		}
	}

	a = array_arg(fcinfo, 4, FLOAT8OID, "weights");
	if (ARR_HASNULL(a) && array_contains_nulls(a))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("bm25_topk: weights must not contain NULLs")));
	if (ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a)) != n)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("bm25_topk: weights has %d elements, lexemes %d",
						ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a)), n)));
	weights = (const float8 *) ARR_DATA_PTR(a);
	for (int i = 0; i < n; i++)
		if (!isfinite(weights[i]) || weights[i] < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("bm25_topk: weights[%d] = %g is not a finite number >= 0",
							i + 1, weights[i])));

	w->params.avglen = float8_arg(fcinfo, 5, "avglen");
	w->params.k1 = float8_arg(fcinfo, 6, "k1");
	w->params.b = float8_arg(fcinfo, 7, "b");
	w->params.boost = float8_arg(fcinfo, 8, "boost");
	if (!isfinite(w->params.avglen) || w->params.avglen <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bm25_topk: avglen = %g must be a finite number > 0",
						w->params.avglen)));
	if (!isfinite(w->params.k1) || w->params.k1 < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bm25_topk: k1 = %g must be a finite number >= 0", w->params.k1)));
	if (!(w->params.b >= 0 && w->params.b <= 1))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bm25_topk: b = %g must be between 0 and 1", w->params.b)));
	if (!isfinite(w->params.boost) || w->params.boost < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bm25_topk: boost = %g must be a finite number >= 0",
						w->params.boost)));
	w->params.k1_plus_1 = w->params.k1 + 1;
	w->params.one_minus_b = 1 - w->params.b;

	if (PG_ARGISNULL(9))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("bm25_topk: k must not be NULL")));
	w->k = PG_GETARG_INT32(9);
	if (w->k < 1 || w->k > BM25_MAX_K)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bm25_topk: k = %d must be between 1 and %d", w->k, BM25_MAX_K)));

	if (!PG_ARGISNULL(10))
		w->allowed = id_set_arg(fcinfo, 10, "allowed", &w->nallowed);
	if (!PG_ARGISNULL(11))
		w->dead = id_set_arg(fcinfo, 11, "dead", &w->ndead);

	if (n > 0 && !(w->allowed && w->nallowed == 0))
	{
		w->nterms = n;
		w->alt_sums = palloc(sizeof(double) * n);
		w->order = palloc(sizeof(int) * n);
		w->ess = palloc(sizeof(Term *) * n);
		/* each term's parts in a dense window: 2 MB at most */
		w->dense_span = BM25_DENSE_SPAN;
		if (n > BM25_DENSE_TERMS)
			w->dense_span = Max(64, (BM25_DENSE_SPAN * BM25_DENSE_TERMS / n) & ~63);
		w->sums = palloc(sizeof(double) * w->dense_span);
		w->seen = palloc(sizeof(uint64) * (w->dense_span / 64));
		w->alive = palloc(sizeof(uint64) * (w->dense_span / 64));
		w->prefix = palloc(sizeof(double) * (n + 1));
		w->hits = palloc(sizeof(Hit) * w->k);
		walk_open(w);
		walk_terms(w, collection_id, lexemes, groups, group_nulls, alts, alt_nulls, weights);
		walk_run(w);
		walk_close(w);
		elog(DEBUG1, "cari_bm25: %d terms, %d units, pruning %s: " INT64_FORMAT
			 " rows, " INT64_FORMAT " windows (" INT64_FORMAT " skipped), " INT64_FORMAT
			 " sub-blocks decoded, " INT64_FORMAT " candidates (" INT64_FORMAT " pruned)",
			 w->nterms, w->nunits, w->pruning ? "on" : "off", w->rows, w->windows,
			 w->windows_skipped, w->subblocks_decoded, w->candidates, w->candidates_pruned);

		qsort(w->hits, w->nhits, sizeof(Hit), hit_cmp);
		for (int i = 0; i < w->nhits; i++)
		{
			Datum		values[2];
			bool		nulls[2] = {false, false};

			values[0] = Int64GetDatum(w->hits[i].id);
			values[1] = Float8GetDatum(w->hits[i].score);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}

	MemoryContextSwitchTo(old_cxt);
	MemoryContextDelete(walk_cxt);
	return (Datum) 0;
}
