/*-------------------------------------------------------------------------
 *
 * cari_bm25.c
 *		Module entry: the module magic and the extension's settings.
 *
 * cari_bm25 keeps Cari's BM25 postings packed in block rows (bm25format.c)
 * and computes the exact top k of a query over them (bm25topk.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/guc.h"

#include "cari_bm25.h"

PG_MODULE_MAGIC_EXT(.name = "cari_bm25",.version = "1.1");

/* skip what cannot reach the top k (on), or sum every posting (off, for tests) */
bool		bm25_pruning = true;

void		_PG_init(void);

void
_PG_init(void)
{
	DefineCustomBoolVariable("cari_bm25.pruning",
							 "Skips postings that cannot reach the top k.",
							 "Off sums every posting; the result is the same.",
							 &bm25_pruning,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	MarkGUCPrefixReserved("cari_bm25");
}
