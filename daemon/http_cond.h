/* SPDX-License-Identifier: MIT */
/*
 * Validators and preconditions (RFC 9110 sections 8.8, 13, 14): HTTP dates,
 * ETags, If-Match / If-Unmodified-Since / If-None-Match / If-Modified-Since
 * / If-Range, Range. Pure code.
 */
#ifndef ORCD_HTTP_COND_H
#define ORCD_HTTP_COND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "http_parse.h"

#define HTTP_DATE_LEN 29 /* "Sun, 06 Nov 1994 08:49:37 GMT" */
/* 3 x 16 hex digits, 2 dashes, 2 quotes, NUL = 53 (48 did not fit). */
#define HTTP_ETAG_MAX 56

/* Writes IMF-fixdate plus NUL into out (at least HTTP_DATE_LEN + 1). */
void http_date_format(time_t t, char *out);
/* Parses IMF-fixdate, RFC 850 and asctime forms. 0 or -EINVAL. */
int http_date_parse(struct http_str s, time_t *out);

/* Strong ETag "\"<hex mtime ns>-<hex size>-<hex ino>\"" into out (>= HTTP_ETAG_MAX). */
void http_etag_make(uint64_t ino, uint64_t size, int64_t mtime_sec,
		    long mtime_nsec, char *out);

/*
 * Evaluate a request's preconditions against a current representation
 * with the given strong etag (NULL: none) and Last-Modified, steps 1 to 4
 * of RFC 9110 13.2.2 in order:
 *  1. If-Match (strong comparison, list, "*"): 412 when it does not match;
 *  2. else If-Unmodified-Since: 412 when modified after it;
 *  3. If-None-Match (weak comparison, list, "*"): when it matches, 304 for
 *     GET and HEAD, 412 for other methods;
 *  4. else, for GET and HEAD, If-Modified-Since: 304 when not modified
 *     since.
 * An unparsable date is ignored, and so is an If-Modified-Since later
 * than now. Returns 200 (go on to step 5, http_range_applies), 304 or
 * 412. Call it only where the answer would otherwise be 2xx (13.2.1):
 * orcd answers other methods 405 or 501 and a missing file 404 before.
 */
int http_precondition(const struct http_request *req, const char *etag,
		      time_t mtime);
/* The same with the current time given (for tests and callers that have
 * it at hand); http_precondition uses time(NULL). */
int http_precondition_at(const struct http_request *req, const char *etag,
			 time_t mtime, time_t now);

/*
 * Step 5 of RFC 9110 13.2.2, once http_precondition said 200: true when
 * the request's Range is to be honoured, i.e. it has one, the method is
 * GET or HEAD (13.2.2 names GET; orcd answers a HEAD with the head its
 * GET would get, 206 included, as it always has) and If-Range is absent
 * or matches (http_if_range_ok).
 */
bool http_range_applies(const struct http_request *req, const char *etag,
			time_t mtime);

enum http_range_result {
	HTTP_RANGE_NONE,     /* no (usable) Range: serve the whole 200 */
	HTTP_RANGE_OK,       /* single satisfiable range: 206 */
	HTTP_RANGE_UNSATISFIABLE, /* 416 with Content-Range: bytes * /size */
	HTTP_RANGE_MULTI,    /* several ranges: we answer a plain 200 */
};

/*
 * Interpret a Range field for a representation of `size` bytes.
 * Unknown units and syntactically invalid fields -> HTTP_RANGE_NONE (RFC
 * 9110 14.2: ignore). first/last inclusive on HTTP_RANGE_OK.
 */
enum http_range_result http_range_parse(struct http_str range, uint64_t size,
					uint64_t *first, uint64_t *last);

/*
 * If-Range (RFC 9110 13.1.5): true when the Range may be honoured,
 * i.e. the field is absent, or it is a strong ETag equal to etag, or an
 * HTTP-date exactly equal to mtime. Weak ETags never match.
 */
bool http_if_range_ok(struct http_str if_range, const char *etag,
		      time_t mtime);

#endif
