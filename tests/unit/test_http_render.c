// SPDX-License-Identifier: MIT
/*
 * Unit tests of daemon/http_render.c: exact response heads, every
 * optional field, Connection rules, the bounded writer (-ENOSPC without
 * writing past cap), refused values (-EINVAL), reason phrases and error
 * bodies.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http_render.h"

#define T1994 784111777	 /* Sun, 06 Nov 1994 08:49:37 GMT */
#define T2024 1704067200 /* Mon, 01 Jan 2024 00:00:00 GMT */

static struct http_response base(int status)
{
	struct http_response r;

	memset(&r, 0, sizeof(r));
	r.status = status;
	r.version_minor = 1;
	r.keep_alive = true;
	r.now = T2024;
	r.content_length = -1;
	return r;
}

/* Render into a buffer of exactly cap bytes followed by a guard zone;
 * the guard must survive whatever happens. */
static ssize_t render_cap(const struct http_response *r, size_t cap, char *out,
			  size_t outsz)
{
	const size_t guard = 32;
	char *buf = malloc(cap + guard);
	ssize_t n;

	assert_non_null(buf);
	memset(buf, 0x5a, cap + guard);
	n = http_render_head(r, buf, cap);
	for (size_t i = cap; i < cap + guard; i++)
		assert_int_equal((unsigned char)buf[i], 0x5a);
	if (n >= 0) {
		assert_true((size_t)n <= cap);
		assert_true((size_t)n < outsz);
		memcpy(out, buf, (size_t)n);
		out[n] = '\0';
	}
	free(buf);
	return n;
}

static void expect_head(const struct http_response *r, const char *want)
{
	char out[1024];
	ssize_t n = render_cap(r, 1000, out, sizeof(out));

	assert_true(n > 0);
	assert_string_equal(out, want);
	assert_int_equal((size_t)n, strlen(want));
}

static void test_full_200(void **state)
{
	(void)state;
	struct http_response r = base(200);

	r.server = "orcd";
	r.content_type = "text/html; charset=utf-8";
	r.content_length = 1234;
	r.last_modified = T1994;
	r.has_last_modified = true;
	r.etag = "\"5f3-4d2-1\"";
	r.accept_ranges = true;
	expect_head(&r, "HTTP/1.1 200 OK\r\n"
			"Date: Mon, 01 Jan 2024 00:00:00 GMT\r\n"
			"Server: orcd\r\n"
			"Content-Type: text/html; charset=utf-8\r\n"
			"Content-Length: 1234\r\n"
			"Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
			"ETag: \"5f3-4d2-1\"\r\n"
			"Accept-Ranges: bytes\r\n"
			"\r\n");
}

static void test_minimal(void **state)
{
	(void)state;
	struct http_response r = base(204);

	/* Every optional field omitted. */
	expect_head(&r, "HTTP/1.1 204 No Content\r\n"
			"Date: Mon, 01 Jan 2024 00:00:00 GMT\r\n"
			"\r\n");
	r.content_length = 0;
	expect_head(&r, "HTTP/1.1 204 No Content\r\n"
			"Date: Mon, 01 Jan 2024 00:00:00 GMT\r\n"
			"Content-Length: 0\r\n"
			"\r\n");
	r.content_length = INT64_MAX;
	expect_head(&r, "HTTP/1.1 204 No Content\r\n"
			"Date: Mon, 01 Jan 2024 00:00:00 GMT\r\n"
			"Content-Length: 9223372036854775807\r\n"
			"\r\n");
}

/* With a clock, Date and Last-Modified are kept as text (Date by the
 * second, Last-Modified in HTTP_CLOCK_LM slots): a new second, a second
 * back, or another file whose time takes the same slot must still be
 * written as itself, and a head without a clock as before. */
static void test_dates_kept_by_the_clock(void **state)
{
	(void)state;
	static const struct {
		time_t now, lm;
		const char *date, *lm_text;
	} step[] = {
		{T2024, T1994, "Mon, 01 Jan 2024 00:00:00 GMT",
		 "Sun, 06 Nov 1994 08:49:37 GMT"},
		{T2024 + 1, T1994 + HTTP_CLOCK_LM, "Mon, 01 Jan 2024 00:00:01 GMT",
		 "Sun, 06 Nov 1994 08:49:45 GMT"},
		{T2024 + 1, T1994, "Mon, 01 Jan 2024 00:00:01 GMT",
		 "Sun, 06 Nov 1994 08:49:37 GMT"},
		{T2024 + 86400, T1994 + 1, "Tue, 02 Jan 2024 00:00:00 GMT",
		 "Sun, 06 Nov 1994 08:49:38 GMT"},
		{T2024, T1994 + HTTP_CLOCK_LM, "Mon, 01 Jan 2024 00:00:00 GMT",
		 "Sun, 06 Nov 1994 08:49:45 GMT"},
	};
	struct http_clock clock = {0};

	for (size_t i = 0; i < 2 * sizeof(step) / sizeof(step[0]); i++) {
		size_t k = i % (sizeof(step) / sizeof(step[0]));
		struct http_response r = base(200);
		char want[256];

		r.now = clock.now = step[k].now;
		r.last_modified = step[k].lm;
		r.has_last_modified = true;
		/* The second lap alternates with heads that have no clock. */
		r.clock = i < sizeof(step) / sizeof(step[0]) || i % 2 ?
				  &clock :
				  NULL;
		snprintf(want, sizeof(want),
			 "HTTP/1.1 200 OK\r\nDate: %s\r\n"
			 "Last-Modified: %s\r\n\r\n",
			 step[k].date, step[k].lm_text);
		expect_head(&r, want);
	}
}

static void test_connection(void **state)
{
	(void)state;
	struct http_response r = base(200);
	const char *head = "HTTP/1.1 200 OK\r\n"
			   "Date: Mon, 01 Jan 2024 00:00:00 GMT\r\n";
	char want[256];

	/* 1.1 kept alive: nothing to say. */
	snprintf(want, sizeof(want), "%s\r\n", head);
	expect_head(&r, want);
	/* 1.1 closing. */
	r.keep_alive = false;
	snprintf(want, sizeof(want), "%sConnection: close\r\n\r\n", head);
	expect_head(&r, want);
	/* 1.0 closing: same; the status line stays HTTP/1.1. */
	r.version_minor = 0;
	expect_head(&r, want);
	/* 1.0 kept alive must say so. */
	r.keep_alive = true;
	snprintf(want, sizeof(want), "%sConnection: keep-alive\r\n\r\n", head);
	expect_head(&r, want);
}

static void test_partial_content(void **state)
{
	(void)state;
	struct http_response r = base(206);

	r.content_length = 500;
	r.content_range = true;
	r.range_first = 500;
	r.range_last = 999;
	r.range_total = 1000;
	expect_head(&r, "HTTP/1.1 206 Partial Content\r\n"
			"Date: Mon, 01 Jan 2024 00:00:00 GMT\r\n"
			"Content-Length: 500\r\n"
			"Content-Range: bytes 500-999/1000\r\n"
			"\r\n");
	r.range_first = 0;
	r.range_last = UINT64_MAX - 1;
	r.range_total = UINT64_MAX;
	r.content_length = -1;
	expect_head(&r, "HTTP/1.1 206 Partial Content\r\n"
			"Date: Mon, 01 Jan 2024 00:00:00 GMT\r\n"
			"Content-Range: bytes 0-18446744073709551614/"
			"18446744073709551615\r\n"
			"\r\n");
}

static void test_unsatisfiable(void **state)
{
	(void)state;
	struct http_response r = base(416);

	r.range_unsatisfied = true;
	r.range_total = 1000;
	r.keep_alive = false;
	expect_head(&r, "HTTP/1.1 416 Range Not Satisfiable\r\n"
			"Date: Mon, 01 Jan 2024 00:00:00 GMT\r\n"
			"Content-Range: bytes */1000\r\n"
			"Connection: close\r\n"
			"\r\n");
	/* The unsatisfied form wins over stale range numbers. */
	r.content_range = true;
	r.range_first = 5;
	r.range_last = 1;
	r.range_total = 0;
	expect_head(&r, "HTTP/1.1 416 Range Not Satisfiable\r\n"
			"Date: Mon, 01 Jan 2024 00:00:00 GMT\r\n"
			"Content-Range: bytes */0\r\n"
			"Connection: close\r\n"
			"\r\n");
}

static void test_location_allow(void **state)
{
	(void)state;
	struct http_response r = base(301);

	r.location = "/docs/";
	r.content_type = "text/html";
	r.content_length = 10;
	expect_head(&r, "HTTP/1.1 301 Moved Permanently\r\n"
			"Date: Mon, 01 Jan 2024 00:00:00 GMT\r\n"
			"Content-Type: text/html\r\n"
			"Content-Length: 10\r\n"
			"Location: /docs/\r\n"
			"\r\n");
	r = base(405);
	r.allow = "GET, HEAD";
	expect_head(&r, "HTTP/1.1 405 Method Not Allowed\r\n"
			"Date: Mon, 01 Jan 2024 00:00:00 GMT\r\n"
			"Allow: GET, HEAD\r\n"
			"\r\n");
}

static void test_304(void **state)
{
	(void)state;
	struct http_response r = base(304);

	r.server = "orcd";
	r.etag = "\"x\"";
	r.last_modified = T1994;
	r.has_last_modified = true;
	expect_head(&r, "HTTP/1.1 304 Not Modified\r\n"
			"Date: Mon, 01 Jan 2024 00:00:00 GMT\r\n"
			"Server: orcd\r\n"
			"Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
			"ETag: \"x\"\r\n"
			"\r\n");
}

/* A file's mtime may be the epoch (reproducible builds): it is a date
 * like any other, and only has_last_modified leaves the field out. */
static void test_last_modified_at_the_epoch(void **state)
{
	(void)state;
	struct http_response r = base(304);

	r.last_modified = 0;
	r.has_last_modified = true;
	expect_head(&r, "HTTP/1.1 304 Not Modified\r\n"
			"Date: Mon, 01 Jan 2024 00:00:00 GMT\r\n"
			"Last-Modified: Thu, 01 Jan 1970 00:00:00 GMT\r\n"
			"\r\n");
	r.has_last_modified = false;
	expect_head(&r, "HTTP/1.1 304 Not Modified\r\n"
			"Date: Mon, 01 Jan 2024 00:00:00 GMT\r\n"
			"\r\n");
}

static void test_enospc_every_cap(void **state)
{
	(void)state;
	struct http_response r = base(206);
	char out[1024];
	ssize_t full;

	r.server = "orcd";
	r.content_type = "application/octet-stream";
	r.content_length = 1;
	r.last_modified = T1994;
	r.has_last_modified = true;
	r.etag = "\"abc\"";
	r.accept_ranges = true;
	r.content_range = true;
	r.range_first = r.range_last = 7;
	r.range_total = 8;
	r.location = "/x";
	r.allow = "GET, HEAD";
	r.keep_alive = false;
	full = render_cap(&r, sizeof(out) - 1, out, sizeof(out));
	assert_true(full > 0);
	/* Exactly enough fits; every byte less is -ENOSPC, and nothing is
	 * ever written past cap (render_cap checks its guard). */
	assert_int_equal(render_cap(&r, (size_t)full, out, sizeof(out)), full);
	for (size_t cap = 0; cap < (size_t)full; cap++)
		assert_int_equal(render_cap(&r, cap, out, sizeof(out)),
				 -ENOSPC);
	assert_int_equal(http_render_head(&r, NULL, 0), -ENOSPC);
}

static void test_einval(void **state)
{
	(void)state;
	char out[1024];
	struct http_response r = base(301);

	/* Response splitting through any string field is refused. */
	r.location = "/a\r\nSet-Cookie: x=1";
	assert_int_equal(render_cap(&r, 1000, out, sizeof(out)), -EINVAL);
	r.location = "/a\nb";
	assert_int_equal(render_cap(&r, 1000, out, sizeof(out)), -EINVAL);
	r.location = "/a\x7f";
	assert_int_equal(render_cap(&r, 1000, out, sizeof(out)), -EINVAL);
	r = base(200);
	r.server = "orcd\r\n";
	assert_int_equal(render_cap(&r, 1000, out, sizeof(out)), -EINVAL);
	r = base(200);
	r.content_type = "text/html\r";
	assert_int_equal(render_cap(&r, 1000, out, sizeof(out)), -EINVAL);
	r = base(200);
	r.etag = "\"a\x01\"";
	assert_int_equal(render_cap(&r, 1000, out, sizeof(out)), -EINVAL);
	r = base(405);
	r.allow = "GET\n";
	assert_int_equal(render_cap(&r, 1000, out, sizeof(out)), -EINVAL);
	/* HTAB and UTF-8 are fine in values. */
	r = base(301);
	r.location = "/caf\xc3\xa9\tx";
	assert_true(render_cap(&r, 1000, out, sizeof(out)) > 0);

	/* Status codes are three digits. */
	r = base(99);
	assert_int_equal(render_cap(&r, 1000, out, sizeof(out)), -EINVAL);
	r = base(1000);
	assert_int_equal(render_cap(&r, 1000, out, sizeof(out)), -EINVAL);
	r = base(-200);
	assert_int_equal(render_cap(&r, 1000, out, sizeof(out)), -EINVAL);
	r = base(100);
	assert_true(render_cap(&r, 1000, out, sizeof(out)) > 0);
	r = base(999);
	assert_true(render_cap(&r, 1000, out, sizeof(out)) > 0);
	assert_memory_equal(out, "HTTP/1.1 999 Unknown\r\n", 22);

	/* A self-contradicting Content-Range. */
	r = base(206);
	r.content_range = true;
	r.range_first = 5;
	r.range_last = 4;
	r.range_total = 10;
	assert_int_equal(render_cap(&r, 1000, out, sizeof(out)), -EINVAL);
	r.range_first = 0;
	r.range_last = 10;
	assert_int_equal(render_cap(&r, 1000, out, sizeof(out)), -EINVAL);
	r.range_total = 0;
	r.range_last = 0;
	assert_int_equal(render_cap(&r, 1000, out, sizeof(out)), -EINVAL);
	r.range_total = 11;
	r.range_last = 10;
	assert_true(render_cap(&r, 1000, out, sizeof(out)) > 0);
}

static void test_reasons(void **state)
{
	(void)state;
	static const struct {
		int status;
		const char *reason;
	} want[] = {
		{200, "OK"},
		{206, "Partial Content"},
		{301, "Moved Permanently"},
		{304, "Not Modified"},
		{400, "Bad Request"},
		{403, "Forbidden"},
		{404, "Not Found"},
		{405, "Method Not Allowed"},
		{408, "Request Timeout"},
		{412, "Precondition Failed"},
		{413, "Content Too Large"},
		{414, "URI Too Long"},
		{416, "Range Not Satisfiable"},
		{431, "Request Header Fields Too Large"},
		{500, "Internal Server Error"},
		{501, "Not Implemented"},
		{503, "Service Unavailable"},
		{505, "HTTP Version Not Supported"},
		{0, "Unknown"},
		{299, "Unknown"},
		{-1, "Unknown"},
	};

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		assert_string_equal(http_reason(want[i].status),
				    want[i].reason);
}

static void test_error_body(void **state)
{
	(void)state;
	const char *want = "<html><head><title>404 Not Found</title></head>"
			   "<body><h1>404 Not Found</h1></body></html>\n";
	char buf[256];
	size_t n;

	memset(buf, 'x', sizeof(buf));
	n = http_error_body(404, buf, sizeof(buf));
	assert_int_equal(n, strlen(want));
	assert_string_equal(buf, want);

	n = http_error_body(505, buf, sizeof(buf));
	assert_string_equal(buf, "<html><head><title>505 HTTP Version Not "
				 "Supported</title></head><body><h1>505 HTTP "
				 "Version Not Supported</h1></body></html>\n");
	assert_int_equal(n, strlen(buf));

	/* Truncated to cap, never past it, and the count says so. */
	for (size_t cap = 0; cap <= strlen(want); cap++) {
		memset(buf, 'x', sizeof(buf));
		n = http_error_body(404, buf, cap);
		assert_int_equal(n, cap);
		assert_memory_equal(buf, want, cap);
		if (cap < strlen(want))
			assert_int_equal(buf[cap], 'x');
	}
	assert_int_equal(http_error_body(404, NULL, 0), 0);
	/* Exactly the length: no room for the NUL, none written. */
	memset(buf, 'x', sizeof(buf));
	assert_int_equal(http_error_body(404, buf, strlen(want)), strlen(want));
	assert_int_equal(buf[strlen(want)], 'x');
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_full_200),
		cmocka_unit_test(test_last_modified_at_the_epoch),
		cmocka_unit_test(test_minimal),
		cmocka_unit_test(test_dates_kept_by_the_clock),
		cmocka_unit_test(test_connection),
		cmocka_unit_test(test_partial_content),
		cmocka_unit_test(test_unsatisfiable),
		cmocka_unit_test(test_location_allow),
		cmocka_unit_test(test_304),
		cmocka_unit_test(test_enospc_every_cap),
		cmocka_unit_test(test_einval),
		cmocka_unit_test(test_reasons),
		cmocka_unit_test(test_error_body),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
