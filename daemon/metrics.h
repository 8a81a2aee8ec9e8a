/* SPDX-License-Identifier: MIT */
/* The status endpoint: counters in Prometheus text format. */
#ifndef ORCD_METRICS_H
#define ORCD_METRICS_H

#include <stddef.h>
#include <poll.h>
#include <sys/types.h>

#include "server.h"

/* Render the exposition text for s's counters. Returns length or -ENOSPC. */
ssize_t metrics_render(const struct orcd_stats *t, const char *engine,
		       char *buf, size_t cap);

/*
 * The metrics listener and the connections it answers, served from the
 * main thread's poll loop without ever blocking it: sockets are non-
 * blocking, a client has a second to send its request and a second to
 * take the answer, and at most 16 are answered at once (more wait in the
 * backlog). GET/HEAD of the metrics path get the counters, anything else
 * 404/405/501; every connection closes after its answer.
 *
 * The counters come from snapshot(), which fills a sum of the workers'
 * counters and the path the page lives at (the current config's).
 */
struct metrics;
typedef void (*metrics_snapshot_fn)(void *ctx, struct orcd_stats *out,
				    const char **path);

struct metrics *metrics_new(int listen_fd, const char *engine,
			    metrics_snapshot_fn snapshot, void *ctx);
void metrics_free(struct metrics *m);
/* The pollfds to wait on now (at most cap), and how long at most (ms, -1
 * for no bound); after poll(), metrics_handle() with the same entries. */
unsigned metrics_pollfds(const struct metrics *m, struct pollfd *p,
			 unsigned cap);
int metrics_timeout_ms(const struct metrics *m);
void metrics_handle(struct metrics *m, const struct pollfd *p, unsigned n);

#endif
