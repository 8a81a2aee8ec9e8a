// SPDX-License-Identifier: MIT
/* How many completions a worker's next wait asks for: see wait_batch.h. */
#include "wait_batch.h"

void wb_init(struct wait_batch *wb, unsigned min_us)
{
	wb->min_us = min_us;
	wb->want = 1;
	wb->last = wb->before_last = 0;
}

unsigned wb_ask(struct wait_batch *wb, unsigned conns, unsigned sends)
{
	unsigned cap = conns / WB_CONNS_PER_ARRIVAL, n;

	if (cap > WB_MAX)
		cap = WB_MAX;
	if (wb->want > cap)
		wb->want = cap ? cap : 1;
	n = wb->want < wb->before_last ? wb->want : wb->before_last;
	if (!wb->min_us || n < 2)
		return 1;
	return sends + n;
}

void wb_took(struct wait_batch *wb, unsigned asked, unsigned took,
	     unsigned arrivals, int64_t waited_us)
{
	if (!wb->min_us)
		return;
	wb->before_last = wb->last;
	wb->last = arrivals;
	if (took >= asked) {
		if (arrivals >= wb->want && arrivals >= 2 && wb->want < WB_MAX)
			wb->want *= 2;
	} else if (waited_us >= (int64_t)wb->min_us) {
		wb->want = 1;
	}
}
