/* SPDX-License-Identifier: MIT */
/* The status endpoint: counters in Prometheus text format. */
#ifndef ORCD_METRICS_H
#define ORCD_METRICS_H

#include <stddef.h>
#include <sys/types.h>

#include "server.h"

/* Render the exposition text for s's counters. Returns length or -ENOSPC. */
ssize_t metrics_render(const struct orcd_stats *t, const char *engine,
		       char *buf, size_t cap);

/*
 * Answer one connection on the metrics listener: read the request head
 * (bounded in size and time), answer GET/HEAD of cfg->metrics_path with
 * the counters, anything else with 404/405, and close. Runs on the main
 * thread, so a slow client costs at most the read timeout.
 */
void metrics_serve(struct orcd_server *s, int listen_fd);

#endif
