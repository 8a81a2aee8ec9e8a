// SPDX-License-Identifier: MIT
#include "logbuf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int logbuf_init(struct logbuf *b, size_t cap,
		void (*out)(void *ctx, const char *p, size_t n), void *ctx)
{
	memset(b, 0, sizeof(*b));
	b->out = out;
	b->ctx = ctx;
	b->data = malloc(cap);
	if (!b->data)
		return -ENOMEM; /* cap 0: every line goes out alone */
	b->cap = cap;
	return 0;
}

void logbuf_fini(struct logbuf *b)
{
	if (!b->data)
		return;
	logbuf_flush(b);
	free(b->data);
	b->data = NULL;
}

void logbuf_flush(struct logbuf *b)
{
	if (!b->len)
		return;
	b->out(b->ctx, b->data, b->len);
	b->len = 0;
}

void logbuf_tick(struct logbuf *b, int64_t now_ms)
{
	if (b->len && now_ms - b->first_ms >= LOGBUF_AGE_MS)
		logbuf_flush(b);
}

void logbuf_add(struct logbuf *b, const char *line, size_t n, int64_t now_ms)
{
	if (n > b->cap - b->len)
		logbuf_flush(b);
	if (n > b->cap) { /* alone, still in one piece */
		b->out(b->ctx, line, n);
		return;
	}
	if (!b->len)
		b->first_ms = now_ms;
	memcpy(b->data + b->len, line, n);
	b->len += n;
	if (b->len == b->cap)
		logbuf_flush(b);
	else
		logbuf_tick(b, now_ms);
}
