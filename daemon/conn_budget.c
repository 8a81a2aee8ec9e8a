// SPDX-License-Identifier: MIT
#include "conn_budget.h"

#include <stdio.h>

void conn_budget(unsigned slots, unsigned max_connections,
		 struct conn_budget *b)
{
	unsigned want = max_connections ? max_connections :
					  CONN_BUDGET_DEFAULT_MAX;
	unsigned sockets;

	b->capped = false;
	if (!slots) {
		b->file_reserve = 0;
		b->cap = want;
		return;
	}
	b->file_reserve = slots / 8 ? slots / 8 : 1;
	sockets = slots > b->file_reserve ? slots - b->file_reserve : 0;
	b->cap = want < sockets ? want : sockets;
	b->capped = max_connections && max_connections > sockets;
}

int conn_budget_describe(const struct conn_budget *b, unsigned slots,
			 unsigned max_connections, char *buf, size_t cap)
{
	if (!b->capped)
		return snprintf(buf, cap, "%s", "");
	return snprintf(
		buf, cap,
		"max_connections %u does not fit slots %u (a connection "
		"takes a slot, a download a second one, and %u stay for "
		"files): at most %u connections per worker",
		max_connections, slots, b->file_reserve, b->cap);
}
