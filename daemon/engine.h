/* SPDX-License-Identifier: MIT */
/*
 * An engine moves bytes: accepts connections, reads requests, executes
 * response plans. The HTTP core (respond.h) never knows which one runs,
 * as nginx's core never knows its event module.
 */
#ifndef ORCD_ENGINE_H
#define ORCD_ENGINE_H

#include <stddef.h>

#include "config.h"

struct orcd_server;
struct orcd_worker;

struct orcd_engine {
	const char *name;
	enum orcd_engine_kind kind;
	/* 0 when the engine can run here, else -errno and why ("io_uring
	 * disabled: EPERM"). Cheap; called once at start-up. */
	int (*probe)(const struct orcd_config *cfg, char *why, size_t cap);
	/* Process-wide set-up after privileges are dropped and before the
	 * workers start (may be NULL). */
	int (*setup)(struct orcd_server *srv, char *err, size_t cap);
	/* The descriptor slots each worker started now with cfg gets
	 * (cfg->slots, cut by what the process may hold), or -errno when
	 * it would get too few to start; NULL for an engine without slots.
	 * After setup. The workers size their budget by the same count. */
	int (*worker_slots)(const struct orcd_server *srv,
			    const struct orcd_config *cfg);
	/* One worker's event loop; returns when the server is stopping and
	 * the worker's in-flight responses are finished (or timed out). */
	int (*run)(struct orcd_worker *w);
};

extern const struct orcd_engine orcd_engine_epoll;
extern const struct orcd_engine orcd_engine_direct;
extern const struct orcd_engine orcd_engine_specific;

/*
 * Choose the engine for `kind`: auto tries specific, direct, epoll in that
 * order and writes a one-line reason into why; an explicit kind that cannot
 * run is an error (-ENOTSUP with why), never a silent fallback.
 */
int engine_select(const struct orcd_config *cfg, const struct orcd_engine **out,
		  char *why, size_t cap);

#endif
