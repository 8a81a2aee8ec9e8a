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
 * The rule keeps that cost to busy workers. Arrivals are recvs that
 * brought bytes and accepted connections, not the worker's own sends,
 * opens and closes, nor its timers, signals or change events:
 * - a wait that filled (took at least the CQEs it asked for) with at
 *   least the arrivals it asked for, and two or more, doubles the ask, up
 *   to WB_MAX: clients keep up with it. A lone client brings one arrival
 *   per turn, so however many idle connections the worker has, its waits
 *   ask for one;
 * - a batched wait that ran out its batch_wait_us unfilled halves it,
 *   and the ask may not grow again for 1, 2, 4 ... WB_BACKOFF_MAX turns
 *   (doubling with each run-out) until a batched wait as large as the
 *   last that ran out fills. Clients served in one turn may have no
 *   recv armed until their sends' CQEs are handled in the next (a first
 *   request, or a kernel without multishot recv), so a wait asking for
 *   them right after cannot fill; and clients served in uneven groups
 *   leave some waits short: a few busy clients among many idle
 *   connections would otherwise wait out the min wait on every other
 *   request;
 * - at most one arrival per WB_CONNS_PER_ARRIVAL connections (none under
 *   16).
 * A batched wait adds the sends this turn submitted, whose CQEs mostly
 * post at once (inline) and would end it at once otherwise; one that
 * does not (a full socket) leaves the wait unfilled, which halves the ask.
 */
#ifndef ORCD_WAIT_BATCH_H
#define ORCD_WAIT_BATCH_H

#include <stdint.h>

/* Arrivals a wait asks for at most. */
#define WB_MAX		     32u
/* Turns a run of run-outs holds the ask down at most. */
#define WB_BACKOFF_MAX	     1024u
/* Connections per arrival asked for: 256 connections may ask for 32. */
#define WB_CONNS_PER_ARRIVAL 8u

struct wait_batch {
	unsigned min_us;     /* batch_wait_us; 0: every wait asks for one */
	unsigned want;	     /* arrivals a batched wait may ask for */
	unsigned hold;	     /* turns before the ask may grow again */
	unsigned backoff;    /* hold after the next run-out (doubles) */
	unsigned ran_out_at; /* the ask of the last run-out */
};

void wb_init(struct wait_batch *wb, unsigned min_us);
/* CQEs the next wait asks for, with `conns` connections open and
 * `sends` sends submitted since the last wait. 1: a plain wait, no
 * min wait. */
unsigned wb_ask(struct wait_batch *wb, unsigned conns, unsigned sends);
/* After a turn: the wait asked for `asked` CQEs and took `waited_us`;
 * the turn took `took` CQEs, `arrivals` of them arrivals. */
void wb_took(struct wait_batch *wb, unsigned asked, unsigned took,
	     unsigned arrivals, int64_t waited_us);

#endif
