/* SPDX-License-Identifier: MIT */
/*
 * How many completions an io_uring worker's next wait asks for. Pure
 * arithmetic, no I/O.
 *
 * A worker that wakes for every completion pays an io_uring_enter and a
 * context switch each time: at 1 KiB keep-alive with wrk's 256
 * connections that was 0.5 system calls per request whenever the worker
 * ran faster than its clients. Since 6.12 (IORING_FEAT_MIN_TIMEOUT) a
 * wait can ask for nr completions and still return `batch_wait_us`
 * after it began, once at least one has come; so asking for more costs
 * at most that much latency, and only while completions keep arriving.
 *
 * The rule keeps that cost to busy workers:
 * - with fewer than WB_CONNS_PER_ARRIVAL connections per completion
 *   asked for, it asks for one (a single client pinging never waits);
 * - a turn that took at least what the wait asked for (arrivals: CQEs
 *   other than sends') doubles the ask, up to WB_MAX;
 * - a wait that ran out its batch_wait_us with fewer halves it.
 * A batched wait adds the sends this turn submitted, whose CQEs
 * usually post at once (inline) and would end it at once otherwise; a
 * send that does not complete then costs at most the min wait.
 */
#ifndef ORCD_WAIT_BATCH_H
#define ORCD_WAIT_BATCH_H

#include <stdint.h>

/* Arrivals a wait asks for at most. */
#define WB_MAX		     32u
/* Connections per arrival asked for: 256 connections may ask for 32. */
#define WB_CONNS_PER_ARRIVAL 8u

struct wait_batch {
	unsigned min_us; /* batch_wait_us; 0: every wait asks for one */
	unsigned want;	 /* arrivals the next batched wait asks for */
};

void wb_init(struct wait_batch *wb, unsigned min_us);
/* CQEs the next wait asks for, with `conns` connections open and
 * `sends` sends submitted since the last wait. 1: a plain wait, no
 * min wait. */
unsigned wb_ask(struct wait_batch *wb, unsigned conns, unsigned sends);
/* After a turn: `arrivals` CQEs other than sends' came, and the wait
 * took `waited_us`. */
void wb_took(struct wait_batch *wb, unsigned arrivals, int64_t waited_us);

#endif
