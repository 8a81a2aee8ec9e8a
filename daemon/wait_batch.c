// SPDX-License-Identifier: MIT
/* How many completions a worker's next wait asks for: see wait_batch.h. */
#include "wait_batch.h"

void wb_init(struct wait_batch *wb, unsigned min_us)
{
	wb->min_us = min_us;
	wb->want = 1;
	wb->hold = wb->backoff = wb->ran_out_at = 0;
}

unsigned wb_ask(struct wait_batch *wb, unsigned conns, unsigned sends)
{
	unsigned cap = conns / WB_CONNS_PER_ARRIVAL;

	if (cap > WB_MAX)
		cap = WB_MAX;
	if (wb->want > cap)
		wb->want = cap ? cap : 1;
	if (!wb->min_us || wb->want < 2)
		return 1;
	return sends + wb->want;
}

void wb_took(struct wait_batch *wb, unsigned asked, unsigned took,
	     unsigned arrivals, int64_t waited_us)
{
	if (!wb->min_us)
		return;
	if (took >= asked) {
		/* A batch as large as the last that ran out filled: the
		 * clients are there, the backoff starts over. */
		if (asked > 1 && wb->want >= wb->ran_out_at)
			wb->backoff = 0;
		if (wb->hold)
			wb->hold--;
		else if (arrivals >= wb->want && arrivals >= 2 &&
			 wb->want < WB_MAX)
			wb->want *= 2;
	} else if (asked > 1 && waited_us >= (int64_t)wb->min_us) {
		/* Ran out: fewer clients could send than it asked for
		 * (some were served the turn before and may have no recv
		 * armed yet, or there are fewer than it thought). */
		wb->ran_out_at = wb->want;
		if (wb->want > 1)
			wb->want /= 2;
		wb->backoff = wb->backoff ? wb->backoff * 2 : 1;
		if (wb->backoff > WB_BACKOFF_MAX)
			wb->backoff = WB_BACKOFF_MAX;
		wb->hold = wb->backoff;
	}
}
