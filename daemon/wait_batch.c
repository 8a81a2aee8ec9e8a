// SPDX-License-Identifier: MIT
/* How many completions a worker's next wait asks for: see wait_batch.h. */
#include "wait_batch.h"

void wb_init(struct wait_batch *wb, unsigned min_us)
{
	wb->min_us = min_us;
	wb->want = 1;
	wb->hold = wb->backoff = 0;
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
		if (asked > 1)
			wb->backoff = 0; /* a batch filled: clients keep up */
		if (wb->hold)
			wb->hold--;
		else if (arrivals >= wb->want && arrivals >= 2 &&
			 wb->want < WB_MAX)
			wb->want *= 2;
	} else if (waited_us >= (int64_t)wb->min_us) {
		if (wb->want > 1)
			wb->want /= 2;
		if (arrivals)
			return; /* fewer came than asked for: load moved */
		/* None came: the clients asked for could not send (served
		 * in step the turn before), or there are none. */
		wb->backoff = wb->backoff ? wb->backoff * 2 : 1;
		if (wb->backoff > WB_BACKOFF_MAX)
			wb->backoff = WB_BACKOFF_MAX;
		wb->hold = wb->backoff;
	}
}
