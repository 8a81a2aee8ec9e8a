/* SPDX-License-Identifier: MIT */
/*
 * A worker's buffer of whole log lines, handed out in batches: one write
 * per batch instead of one per line, and never part of a line, so that
 * batches of several workers appended to one O_APPEND file never mix
 * inside a line. Pure: the clock and the writer come from the caller.
 */
#ifndef ORCD_LOGBUF_H
#define ORCD_LOGBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A batch is handed out once its first line is this old (at the next
 * line or tick), so a line waits at most this plus the caller's tick
 * period. */
#define LOGBUF_AGE_MS 500

struct logbuf {
	char *data;
	size_t len, cap;
	int64_t first_ms; /* when the oldest buffered line came */
	/* Takes one batch of whole lines (or one line larger than cap). */
	void (*out)(void *ctx, const char *p, size_t n);
	void *ctx;
};

/* 0, or -ENOMEM: then the buffer holds nothing and every line goes out
 * alone, as it comes. */
int logbuf_init(struct logbuf *b, size_t cap,
		void (*out)(void *ctx, const char *p, size_t n), void *ctx);
/* Hands out what is buffered, then frees. */
void logbuf_fini(struct logbuf *b);

/* One whole line (its '\n' included). What is buffered goes out first
 * when the line would not fit; the batch goes out when it is full or
 * LOGBUF_AGE_MS old. */
void logbuf_add(struct logbuf *b, const char *line, size_t n, int64_t now_ms);
/* The batch goes out if it is LOGBUF_AGE_MS old. */
void logbuf_tick(struct logbuf *b, int64_t now_ms);
/* Whatever is buffered goes out now. */
void logbuf_flush(struct logbuf *b);

#endif
