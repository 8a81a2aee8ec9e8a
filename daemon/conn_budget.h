/* SPDX-License-Identifier: MIT */
/*
 * How many connections one worker takes on: max_connections, within what
 * the io_uring engines' descriptor slots hold. Pure arithmetic, no I/O.
 *
 * A connection holds its socket's slot, and a second one (the file) while
 * a cold response's chain has its file open: a download counts twice. An
 * accept is armed only while the free slots exceed the files' reserve
 * plus one per accept already in flight, so each accept in flight but
 * the newest has a second slot free for the file its connection will
 * ask for, and the newest's may come from the reserve. Accepts leave an
 * eighth of the slots to
 * files, so that sockets can never starve the chains that answer them;
 * downloads in flight take their file slots out of the rest, so while
 * they run fewer sockets fit (the engine then closes idle connections to
 * make room, see http1.h shed). A max_connections beyond what the slots
 * hold cannot mean what it says: the engines cap it and the server says
 * so at start-up, in one line.
 */
#ifndef ORCD_CONN_BUDGET_H
#define ORCD_CONN_BUDGET_H

#include <stdbool.h>
#include <stddef.h>

/* max_connections when the configuration does not set it. */
#define CONN_BUDGET_DEFAULT_MAX 16384u

struct conn_budget {
	unsigned cap;	       /* connections (and accepts in flight) at most */
	unsigned file_reserve; /* slots accepts leave free for files */
	bool capped;	       /* max_connections asked for more than fits */
};

/*
 * slots: the worker's descriptor slots, 0 for an engine without them
 * (epoll). max_connections: as configured, 0 when unset (the default;
 * then a smaller cap from the slots is no contradiction).
 */
void conn_budget(unsigned slots, unsigned max_connections,
		 struct conn_budget *b);

/* The one start-up line for a capped budget ("" when not capped).
 * Returns what snprintf returns. */
int conn_budget_describe(const struct conn_budget *b, unsigned slots,
			 unsigned max_connections, char *buf, size_t cap);

#endif
