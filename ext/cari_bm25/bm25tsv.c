/*-------------------------------------------------------------------------
 *
 * bm25tsv.c
 *		The postings of a chunk not yet folded into blocks, read from its own
 *		tsvector (chunks.tsv): the unfolded delta stores one row per chunk,
 *		not one per posting.
 *
 * bm25_tsv_postings(tsv, lexemes) returns, for each of the lexemes the
 * tsvector holds, its counts in the title (positions of weight A) and in the
 * body (any other weight) and the chunk's title and body lengths (the same
 * counts summed over every lexeme), exactly as the migrations count a
 * posting from unnest(tsv).  A lexeme without positions counts nothing (a
 * generated tsvector always has them).  The tsvector's layout is checked
 * against its size before anything is read: a corrupt value is an ERROR.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "tsearch/ts_type.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "cari_bm25.h"

#define BM25_TSV_MAX_LEXEMES	4096	/* as the walker's query lexemes */

PG_FUNCTION_INFO_V1(bm25_tsv_postings);
PG_FUNCTION_INFO_V1(bm25_tsv_terms);

/* the tsvector's entries, checked to lie within it */
static WordEntry *
tsv_entries(TSVector tsv)
{
	if (VARSIZE(tsv) < DATAHDRSIZE || tsv->size < 0 ||
		(Size) tsv->size > (VARSIZE(tsv) - DATAHDRSIZE) / sizeof(WordEntry))
		bm25_corrupt("a tsvector's entry count exceeds its size");
	return ARRPTR(tsv);
}

/* an entry's title (weight A) and body (other weights) positions, checked to lie within it */
static void
tsv_counts(TSVector tsv, WordEntry *we, int32 *title, int32 *body)
{
	const char *end = (const char *) tsv + VARSIZE(tsv);
	const char *strbase = STRPTR(tsv);
	const char *posstart;
	uint16		npos;
	WordEntryPos *pos;

	*title = 0;
	*body = 0;
	if (strbase + we->pos + we->len > end)
		bm25_corrupt("a tsvector's lexeme lies outside it");
	if (!we->haspos)
		return;
	posstart = strbase + SHORTALIGN(we->pos + we->len);
	if (posstart + sizeof(uint16) > end)
		bm25_corrupt("a tsvector's positions lie outside it");
	memcpy(&npos, posstart, sizeof(uint16));
	if (posstart + sizeof(uint16) + (Size) npos * sizeof(WordEntryPos) > end)
		bm25_corrupt("a tsvector's positions lie outside it");
	pos = (WordEntryPos *) (posstart + sizeof(uint16));
	for (int j = 0; j < npos; j++)
	{
		if (WEP_GETWEIGHT(pos[j]) == 3)
			(*title)++;
		else
			(*body)++;
	}
}

/*
 * bm25_tsv_terms(tsv) -> (lexeme, tf_title, tf_body): every lexeme with its counts, as
 * unnest(tsv) counts them (a write's document frequencies and lengths).
 */
Datum
bm25_tsv_terms(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TSVector	tsv = PG_GETARG_TSVECTOR(0);
	WordEntry  *entries = tsv_entries(tsv);
	const char *strbase = STRPTR(tsv);

	InitMaterializedSRF(fcinfo, 0);
	for (int i = 0; i < tsv->size; i++)
	{
		Datum		values[3];
		bool		isnull[3] = {false, false, false};
		int32		title;
		int32		body;

		if ((i & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
		tsv_counts(tsv, &entries[i], &title, &body);
		values[0] = PointerGetDatum(cstring_to_text_with_len(strbase + entries[i].pos,
															 entries[i].len));
		values[1] = Int32GetDatum(title);
		values[2] = Int32GetDatum(body);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, isnull);
	}
	PG_RETURN_NULL();
}

/* memcmp on the shorter length, then the shorter first: tsvector's order */
static int
lexeme_cmp(const char *a, int lena, const char *b, int lenb)
{
	int			cmp = memcmp(a, b, Min(lena, lenb));

	if (cmp != 0)
		return cmp;
	return (lena < lenb) ? -1 : (lena > lenb) ? 1 : 0;
}

Datum
bm25_tsv_postings(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TSVector	tsv = PG_GETARG_TSVECTOR(0);
	ArrayType  *lexemes = PG_GETARG_ARRAYTYPE_P(1);
	WordEntry  *entries;
	const char *strbase;
	int32		nentries = tsv->size;
	int64		len_title = 0;
	int64		len_body = 0;
	int32	   *tf_title;
	int32	   *tf_body;
	Datum	   *elems;
	bool	   *nulls;
	int			n;

	InitMaterializedSRF(fcinfo, 0);

	if (ARR_NDIM(lexemes) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("lexemes must be a one-dimensional array")));
	deconstruct_array_builtin(lexemes, TEXTOID, &elems, &nulls, &n);
	if (n > BM25_TSV_MAX_LEXEMES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("at most %d lexemes, got %d", BM25_TSV_MAX_LEXEMES, n)));

	entries = tsv_entries(tsv);
	strbase = STRPTR(tsv);

	tf_title = palloc0(sizeof(int32) * Max(n, 1));
	tf_body = palloc0(sizeof(int32) * Max(n, 1));

	/* the lengths: every position of every lexeme */
	for (int i = 0; i < nentries; i++)
	{
		int32		title;
		int32		body;

		if ((i & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
		tsv_counts(tsv, &entries[i], &title, &body);
		len_title += title;
		len_body += body;
	}
	if (len_title > PG_INT32_MAX || len_body > PG_INT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("a chunk's length exceeds the integer range")));

	/* each query lexeme: a binary search in the sorted entries */
	for (int k = 0; k < n; k++)
	{
		const char *word;
		int			wordlen;
		int			lo = 0;
		int			hi = nentries - 1;

		if (nulls[k])
			continue;
		word = VARDATA_ANY(DatumGetPointer(elems[k]));
		wordlen = VARSIZE_ANY_EXHDR(DatumGetPointer(elems[k]));
		while (lo <= hi)
		{
			int			mid = lo + (hi - lo) / 2;
			WordEntry  *we = &entries[mid];
			int			cmp = lexeme_cmp(strbase + we->pos, we->len, word, wordlen);

			if (cmp == 0)
			{
				tsv_counts(tsv, we, &tf_title[k], &tf_body[k]);
				break;
			}
			if (cmp < 0)
				lo = mid + 1;
			else
				hi = mid - 1;
		}
	}

	for (int k = 0; k < n; k++)
	{
		Datum		values[5];
		bool		isnull[5] = {false, false, false, false, false};

		if (tf_title[k] == 0 && tf_body[k] == 0)
			continue;
		values[0] = elems[k];
		values[1] = Int32GetDatum(tf_title[k]);
		values[2] = Int32GetDatum(tf_body[k]);
		values[3] = Int32GetDatum((int32) len_title);
		values[4] = Int32GetDatum((int32) len_body);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, isnull);
	}
	PG_RETURN_NULL();
}
