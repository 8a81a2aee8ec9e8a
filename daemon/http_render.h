/* SPDX-License-Identifier: MIT */
/* Response head renderer: writes into a caller's buffer (and keeps dates
 * as text in the caller's clock, when it passes one). */
#ifndef ORCD_HTTP_RENDER_H
#define ORCD_HTTP_RENDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "http_cond.h"

/*
 * A worker's wall clock for heads. Formatting a head's two dates costs
 * about as much as the rest of it, so the clock keeps them as text: Date
 * for the last second asked, and the last few Last-Modified values,
 * direct-mapped by the second. Each belongs to one thread (a worker's
 * h1_worker). The text is keyed by the second it was asked for, so a
 * clock whose `now` moves, or a head with another date, stays right.
 */
#define HTTP_CLOCK_LM 8

struct http_date_text {
	time_t t;
	bool set;
	char s[HTTP_DATE_LEN + 1];
};

struct http_clock {
	time_t now;
	struct http_date_text date, lm[HTTP_CLOCK_LM];
};

struct http_response {
	int status;
	int version_minor;	/* echo the request's 0/1; 1 when unknown */
	bool keep_alive;	/* Connection: keep-alive (1.0) / close (1.1) */
	time_t now;		/* Date */
	/* Where the dates are kept as text; NULL formats them each time. */
	struct http_clock *clock;
	const char *server;	/* Server; NULL omits */
	const char *content_type; /* NULL omits */
	int64_t content_length;	/* < 0 omits (never for our responses) */
	time_t last_modified;	/* sent when has_last_modified (a file's
				 * mtime may be 0: reproducible builds) */
	bool has_last_modified;
	const char *etag;	/* NULL omits */
	bool accept_ranges;	/* Accept-Ranges: bytes */
	bool content_range;	/* Content-Range: bytes first-last/total */
	bool range_unsatisfied;	/* Content-Range: bytes * /total */
	uint64_t range_first, range_last, range_total;
	const char *location;	/* Location (301) */
	const char *allow;	/* Allow (405) */
};

/* Reason phrase for a status ("Not Found"); "Unknown" for others. */
const char *http_reason(int status);

/*
 * Render the status line and fields plus the terminating CRLF.
 * Returns the length, or -ENOSPC if cap is too small (nothing useful is
 * left in buf then), or -EINVAL for a status outside 100..999, a CR, LF
 * or other control byte in a string field (response splitting), or a
 * content_range with first > last or last >= total. The status line is
 * always HTTP/1.1 (RFC 9110 2.5); version_minor only decides whether a
 * kept-alive response says "Connection: keep-alive" (1.0).
 */
ssize_t http_render_head(const struct http_response *r, char *buf, size_t cap);

/*
 * A small HTML body for an error status, e.g. for 404:
 * "<html><head><title>404 Not Found</title></head><body><h1>404 Not Found</h1></body></html>\n"
 * Returns the bytes written: at most cap (truncated, never -1), so the
 * result can be sent as is. A NUL follows when there is room, uncounted.
 */
size_t http_error_body(int status, char *buf, size_t cap);

#endif
