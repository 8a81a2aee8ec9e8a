// SPDX-License-Identifier: MIT
/*
 * Unit tests of daemon/http_cond.c: HTTP dates, ETags, the preconditions
 * (If-Match, If-Unmodified-Since, If-None-Match, If-Modified-Since,
 * If-Range) and their precedence, Range.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "http_cond.h"

static struct http_str S(const char *s) {
	struct http_str r = {s, strlen(s)};

	return r;
}

/* A list field whose lines are s split at '\n', as the parser keeps
 * them: empty lines left out, none past HTTP_LIST_LINES. */
static struct http_list L(const char *s)
{
	struct http_list l;

	memset(&l, 0, sizeof(l));
	while (l.n < HTTP_LIST_LINES) {
		const char *nl = strchr(s, '\n');
		size_t n = nl ? (size_t)(nl - s) : strlen(s);

		if (n)
			l.line[l.n++] = (struct http_str){s, n};
		if (!nl)
			break;
		s = nl + 1;
	}
	return l;
}

/* http_date_parse on an exact-size heap copy, so over-reads show. */
static int
parse_date(const char *s, size_t n, time_t *t)
{
	char *copy = malloc(n ? n : 1);
	int r;

	assert_non_null(copy);
	memcpy(copy, s, n);
	r = http_date_parse((struct http_str){copy, n}, t);
	free(copy);
	return r;
}

/* ---- dates ---- */

static void expect_format(time_t t, const char *want)
{
	char out[HTTP_DATE_LEN + 1];

	memset(out, 'x', sizeof(out));
	http_date_format(t, out);
	assert_string_equal(out, want);
	assert_int_equal(strlen(out), HTTP_DATE_LEN);
}

static void test_date_format_known(void **state)
{
	(void)state;
	expect_format(0, "Thu, 01 Jan 1970 00:00:00 GMT");
	expect_format(784111777, "Sun, 06 Nov 1994 08:49:37 GMT");
	expect_format(951782400, "Tue, 29 Feb 2000 00:00:00 GMT");
	expect_format(1704067199, "Sun, 31 Dec 2023 23:59:59 GMT");
	expect_format(-1, "Wed, 31 Dec 1969 23:59:59 GMT");
	expect_format(-2208988800LL, "Mon, 01 Jan 1900 00:00:00 GMT");
	/* Outside four-digit years the value is clamped, never longer. */
	expect_format(253402300799LL, "Fri, 31 Dec 9999 23:59:59 GMT");
	expect_format(253402300800LL, "Fri, 31 Dec 9999 23:59:59 GMT");
	expect_format((time_t)INT64_MAX, "Fri, 31 Dec 9999 23:59:59 GMT");
	expect_format((time_t)INT64_MIN, "Sat, 01 Jan 0000 00:00:00 GMT");
}

/* Against libc's gmtime_r over a sweep of 1800..2200, plus round trip. */
static void test_date_format_sweep(void **state)
{
	(void)state;
	static const char wd[7][4] = {"Sun", "Mon", "Tue", "Wed",
				      "Thu", "Fri", "Sat"};
	static const char mo[12][4] = {"Jan", "Feb", "Mar", "Apr",
				       "May", "Jun", "Jul", "Aug",
				       "Sep", "Oct", "Nov", "Dec"};
	char out[HTTP_DATE_LEN + 1], want[64];

	for (int64_t t = -5364662400LL; t < 7258118400LL;
	     t += 86400 * 13 + 3607) {
		struct tm tm;
		time_t back;

		assert_non_null(gmtime_r(&(time_t){(time_t)t}, &tm));
		snprintf(want, sizeof(want),
			 "%s, %02d %s %04d %02d:%02d:%02d GMT", wd[tm.tm_wday],
			 tm.tm_mday, mo[tm.tm_mon], tm.tm_year + 1900,
			 tm.tm_hour, tm.tm_min, tm.tm_sec);
		http_date_format((time_t)t, out);
		assert_string_equal(out, want);
		assert_int_equal(parse_date(out, strlen(out), &back), 0);
		assert_int_equal(back, t);
	}
}

static void test_date_parse_forms(void **state)
{
	(void)state;
	static const char *const good[] = {
		"Sun, 06 Nov 1994 08:49:37 GMT",  /* IMF-fixdate */
		"Sunday, 06-Nov-94 08:49:37 GMT", /* RFC 850 */
		"Sun Nov  6 08:49:37 1994",	  /* asctime */
		"Sun Nov 06 08:49:37 1994",
	};
	time_t t;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		t = 0;
		assert_int_equal(parse_date(good[i], strlen(good[i]), &t), 0);
		assert_int_equal(t, 784111777);
		/* Every proper prefix is invalid. */
		for (size_t k = 0; k < strlen(good[i]); k++)
			assert_int_equal(parse_date(good[i], k, &t), -EINVAL);
	}
	assert_int_equal(parse_date("Thu Jan 16 00:00:00 2025", 24, &t), 0);
	assert_int_equal(t, 1736985600);
	/* RFC 850 years: within 50 years ahead stays in this century. */
	assert_int_equal(
		http_date_parse(S("Friday, 01-Jan-10 00:00:00 GMT"), &t), 0);
	assert_int_equal(t, 1262304000);
	/* The weekday is not cross-checked (nor is it by nginx). */
	assert_int_equal(
		http_date_parse(S("Mon, 06 Nov 1994 08:49:37 GMT"), &t), 0);
	assert_int_equal(t, 784111777);
	/* Leap days. */
	assert_int_equal(
		http_date_parse(S("Thu, 29 Feb 1996 00:00:00 GMT"), &t), 0);
	assert_int_equal(t, 825552000);
	assert_int_equal(
		http_date_parse(S("Tue, 29 Feb 2000 00:00:00 GMT"), &t), 0);
	assert_int_equal(t, 951782400);
	/* A leap second counts as the next minute's first. */
	assert_int_equal(
		http_date_parse(S("Sat, 31 Dec 2016 23:59:60 GMT"), &t), 0);
	assert_int_equal(t, 1483228800);
}

static void test_date_parse_bad(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"",
		"Sun",
		"sun, 06 Nov 1994 08:49:37 GMT", /* case-sensitive */
		"Sun, 06 nov 1994 08:49:37 GMT",
		"Sun, 06 Nov 1994 08:49:37 gmt",
		"Sun, 06 Nov 1994 08:49:37 UTC",
		"Sun, 06 Nov 1994 08:49:37",
		"Sun, 06 Nov 1994 08:49:37 GMT ", /* trailing byte */
		" Sun, 06 Nov 1994 08:49:37 GMT",
		"Sun, 6 Nov 1994 08:49:37 GMT",
		"Sun,  06 Nov 1994 08:49:37 GMT",
		"Sun, 06 Nov 94 08:49:37 GMT",
		"Sun, 06 Nov 1994 8:49:37 GMT",
		"Sun, 06 Nov 1994 08:49 GMT",
		"Sun, 06 Nov 1994 08-49-37 GMT",
		"Xyz, 06 Nov 1994 08:49:37 GMT",
		"Sun, 06 Nox 1994 08:49:37 GMT",
		"Sun, 00 Nov 1994 08:49:37 GMT", /* ranges */
		"Sun, 31 Nov 1994 08:49:37 GMT",
		"Sun, 29 Feb 1995 08:49:37 GMT",
		"Sun, 29 Feb 1900 08:49:37 GMT",
		"Sun, 30 Feb 2000 08:49:37 GMT",
		"Sun, 06 Nov 1994 24:00:00 GMT",
		"Sun, 06 Nov 1994 08:60:00 GMT",
		"Sun, 06 Nov 1994 08:49:61 GMT",
		"Sunday, 06-Nov-1994 08:49:37 GMT",
		"Sunday, 06 Nov 94 08:49:37 GMT",
		"Sunday, 06-Nov-94 08:49:37",
		"Sun, 06-Nov-94 08:49:37 GMT",
		"Sunday 06-Nov-94 08:49:37 GMT",
		"Sun Nov 6 08:49:37 1994",
		"Sun Nov  6 08:49:37 94",
		"Sun Nov  6 08:49:37 1994 GMT",
		"Sun  Nov 6 08:49:37 1994",
		"1994-11-06T08:49:37Z",
		"784111777",
	};
	time_t t = 12345;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (parse_date(bad[i], strlen(bad[i]), &t) != -EINVAL)
			fail_msg("case %zu (%s) parsed", i, bad[i]);
	/* An absent field. */
	assert_int_equal(http_date_parse((struct http_str){NULL, 0}, &t),
			 -EINVAL);
}

/* ---- ETag ---- */

static void test_etag_make(void **state)
{
	(void)state;
	/* Exactly the promised size: ASan guards the bytes after it. */
	char out[HTTP_ETAG_MAX], other[HTTP_ETAG_MAX];

	http_etag_make(0x1234, 0x10, 1, 5, out);
	assert_string_equal(out, "\"3b9aca05-10-1234\"");
	http_etag_make(0x1234, 0x10, 1, 6, other);
	assert_string_not_equal(out, other);
	http_etag_make(0x1235, 0x10, 1, 5, other);
	assert_string_not_equal(out, other);
	http_etag_make(0x1234, 0x11, 1, 5, other);
	assert_string_not_equal(out, other);
	http_etag_make(0, 0, 0, 0, other);
	assert_string_equal(other, "\"0-0-0\"");
	http_etag_make(0xabcdef, 0x100, 0, 255, other);
	assert_string_equal(other, "\"ff-100-abcdef\"");
	/* The longest tag fits the buffer the header promises is enough. */
	http_etag_make(UINT64_MAX, UINT64_MAX, INT64_MAX / 1000000000,
		       999999999, out);
	assert_int_equal(out[0], '"');
	assert_int_equal(out[strlen(out) - 1], '"');
	assert_true(strlen(out) < HTTP_ETAG_MAX);
	assert_string_equal(out + 17, "-ffffffffffffffff-ffffffffffffffff\"");
}

/* ---- If-None-Match / If-Modified-Since ---- */

#define ETAG  "\"5f3-1a-2b\""
#define NOW   1800000000
#define MTIME 784111777 /* Sun, 06 Nov 1994 08:49:37 GMT */

static struct http_request req_with(enum http_method m, const char *inm,
				    const char *ims)
{
	struct http_request r;

	memset(&r, 0, sizeof(r));
	r.method = m;
	if (inm)
		r.if_none_match = L(inm);
	if (ims)
		r.if_modified_since = S(ims);
	return r;
}

static int pre(const char *inm, const char *ims)
{
	struct http_request r = req_with(HTTP_METHOD_GET, inm, ims);

	return http_precondition_at(&r, ETAG, MTIME, NOW);
}

static void test_if_none_match(void **state)
{
	(void)state;
	assert_int_equal(pre(NULL, NULL), 200);
	assert_int_equal(pre(ETAG, NULL), 304);
	assert_int_equal(pre("W/" ETAG, NULL), 304); /* weak comparison */
	assert_int_equal(pre("\"other\"", NULL), 200);
	assert_int_equal(pre("\"a\", " ETAG, NULL), 304);
	assert_int_equal(pre("\"a\",W/" ETAG ",\"b\"", NULL), 304);
	assert_int_equal(pre(" ,\"a\" ,, " ETAG " , ", NULL), 304);
	assert_int_equal(pre("\"a,b\", " ETAG, NULL), 304); /* comma in tag */
	assert_int_equal(pre("\"a\", \"b\"", NULL), 200);
	assert_int_equal(pre("*", NULL), 304);
	assert_int_equal(pre("  *\t", NULL), 304);
	/* Near misses. */
	assert_int_equal(pre("\"5f3-1a-2b", NULL), 200);
	assert_int_equal(pre("5f3-1a-2b", NULL), 200);
	assert_int_equal(pre("\"5f3-1a-2\"", NULL), 200);
	assert_int_equal(pre("\"5F3-1A-2B\"", NULL), 200); /* case matters */
	assert_int_equal(pre("w/" ETAG, NULL), 200);
	assert_int_equal(pre("W/ " ETAG, NULL), 200);
	/* A malformed list stops matching where it breaks. */
	assert_int_equal(pre("\"a\" junk, " ETAG, NULL), 200);
	assert_int_equal(pre("junk, " ETAG, NULL), 200);
	assert_int_equal(pre("*, " ETAG, NULL), 200);
	assert_int_equal(pre("\"a\" " ETAG, NULL), 200);
	/* Several lines are one list (RFC 9110 5.3): "a", ETAG. */
	assert_int_equal(pre("\"a\"\n" ETAG, NULL), 304);
	assert_int_equal(pre(ETAG "\n\"a\"", NULL), 304);
	assert_int_equal(pre("\"a\"\n\n" ETAG, NULL), 304); /* empty: none */
	assert_int_equal(pre("\"a\"\n\"b\"", NULL), 200);
	/* ... which breaks where any line breaks, "*" beside others too. */
	assert_int_equal(pre("\"a\" junk\n" ETAG, NULL), 200);
	assert_int_equal(pre("*\n" ETAG, NULL), 200);
	assert_int_equal(pre("\"a\"\n*", NULL), 200);
	assert_int_equal(pre(ETAG "\njunk", NULL), 304); /* hit first */
	/* Lines past the kept ones are absent: a 200, never a wrong 304. */
	assert_int_equal(pre("\"a\"\n\"b\"\n" ETAG, NULL), 200);
}

static void test_if_modified_since(void **state)
{
	(void)state;
	assert_int_equal(pre(NULL, "Sun, 06 Nov 1994 08:49:37 GMT"), 304);
	assert_int_equal(pre(NULL, "Sun, 06 Nov 1994 08:49:38 GMT"), 304);
	assert_int_equal(pre(NULL, "Sun, 06 Nov 1994 08:49:36 GMT"), 200);
	assert_int_equal(pre(NULL, "Sunday, 06-Nov-94 08:49:37 GMT"), 304);
	assert_int_equal(pre(NULL, "Sun Nov  6 08:49:37 1994"), 304);
	/* Unparsable: ignored. */
	assert_int_equal(pre(NULL, "yesterday"), 200);
	assert_int_equal(pre(NULL, "Sun, 06 Nov 1994 08:49:37 GMT; length=5"),
			 200);
	/* Later than now: invalid, ignored (RFC 9110 13.1.3)... */
	assert_int_equal(pre(NULL, "Fri, 15 Jan 2027 08:00:01 GMT"), 200);
	/* ...but exactly now is fine (NOW is 2027-01-15T08:00:00Z). */
	assert_int_equal(pre(NULL, "Fri, 15 Jan 2027 08:00:00 GMT"), 304);
	/* Surrounding whitespace does not matter. */
	assert_int_equal(pre(NULL, " Sun, 06 Nov 1994 08:49:37 GMT "), 304);
}

static void test_precedence(void **state)
{
	(void)state;
	/* If-None-Match present: If-Modified-Since is not looked at. */
	assert_int_equal(pre("\"other\"", "Sun, 06 Nov 1994 08:49:37 GMT"),
			 200);
	assert_int_equal(pre(ETAG, "Sun, 06 Nov 1994 08:49:36 GMT"), 304);
	assert_int_equal(pre("junk", "Sun, 06 Nov 1994 08:49:37 GMT"), 200);

	/* 304 is for GET and HEAD; another method fails If-None-Match
	 * with 412 and ignores If-Modified-Since (RFC 9110 13.1.2, 13.1.3;
	 * orcd answers such methods 405 before asking). */
	struct http_request r = req_with(HTTP_METHOD_HEAD, ETAG, NULL);

	assert_int_equal(http_precondition_at(&r, ETAG, MTIME, NOW), 304);
	r = req_with(HTTP_METHOD_HEAD, NULL, "Sun, 06 Nov 1994 08:49:37 GMT");
	assert_int_equal(http_precondition_at(&r, ETAG, MTIME, NOW), 304);
	r = req_with(HTTP_METHOD_OTHER, ETAG, NULL);
	assert_int_equal(http_precondition_at(&r, ETAG, MTIME, NOW), 412);
	r = req_with(HTTP_METHOD_OTHER, NULL, "Sun, 06 Nov 1994 08:49:37 GMT");
	assert_int_equal(http_precondition_at(&r, ETAG, MTIME, NOW), 200);

	/* Without an etag only "*" can match. */
	r = req_with(HTTP_METHOD_GET, "*", NULL);
	assert_int_equal(http_precondition_at(&r, NULL, MTIME, NOW), 304);
	r = req_with(HTTP_METHOD_GET, ETAG, NULL);
	assert_int_equal(http_precondition_at(&r, NULL, MTIME, NOW), 200);

	/* A weak own tag still matches by weak comparison. */
	assert_int_equal(http_precondition_at(&r, "W/" ETAG, MTIME, NOW), 304);

	/* The wrapper uses the real clock: a 1994 date is in the past. */
	r = req_with(HTTP_METHOD_GET, NULL, "Sun, 06 Nov 1994 08:49:37 GMT");
	assert_int_equal(http_precondition(&r, ETAG, MTIME), 304);
	r = req_with(HTTP_METHOD_GET, NULL, "Fri, 31 Dec 9999 23:59:59 GMT");
	assert_int_equal(http_precondition(&r, ETAG, MTIME), 200);
}

/* ---- the whole of RFC 9110 13.2.2 ---- */

#define GET   HTTP_METHOD_GET
#define HEAD  HTTP_METHOD_HEAD
#define OTHER HTTP_METHOD_OTHER
#define EQ    "Sun, 06 Nov 1994 08:49:37 GMT" /* == MTIME */
#define OLD   "Sun, 06 Nov 1994 08:49:36 GMT"
#define NEW   "Sun, 06 Nov 1994 08:49:38 GMT"
#define EPOCH "Thu, 01 Jan 1970 00:00:00 GMT"
#define LATER "Fri, 15 Jan 2027 08:00:01 GMT" /* NOW + 1 */
#define BAD   "yesterday"
#define RANGE "bytes=0-1"

struct cond_case {
	enum http_method m;
	const char *im, *ius, *inm, *ims, *range, *ir;
	int want; /* 200, 304, 412, or 206: 200 and the Range applies */
};

static int outcome(const struct cond_case *c, const char *etag)
{
	struct http_request r;
	int st;

	memset(&r, 0, sizeof(r));
	r.method = c->m;
	r.if_match = c->im ? L(c->im) : r.if_match;
	r.if_unmodified_since = c->ius ? S(c->ius) : r.if_unmodified_since;
	r.if_none_match = c->inm ? L(c->inm) : r.if_none_match;
	r.if_modified_since = c->ims ? S(c->ims) : r.if_modified_since;
	r.range = c->range ? S(c->range) : r.range;
	r.if_range = c->ir ? S(c->ir) : r.if_range;
	st = http_precondition_at(&r, etag, MTIME, NOW);
	if (st == 200 && http_range_applies(&r, etag, MTIME))
		st = 206;
	return st;
}

static void expect_outcomes(const struct cond_case *c, size_t n,
			    const char *etag)
{
	for (size_t i = 0; i < n; i++) {
		int got = outcome(&c[i], etag);

		if (got != c[i].want)
			fail_msg("case %zu (m %d, If-Match %s, IUS %s, INM %s, "
				 "IMS %s, Range %s, If-Range %s): %d, want %d",
				 i, c[i].m, c[i].im, c[i].ius, c[i].inm,
				 c[i].ims, c[i].range, c[i].ir, got, c[i].want);
	}
}

#define EXPECT_OUTCOMES(cases, etag) \
	expect_outcomes(cases, sizeof(cases) / sizeof(cases[0]), etag)

static void test_each_alone(void **state)
{
	(void)state;
	static const struct cond_case cases[] = {
		{GET, .want = 200},
		/* If-Match: strong comparison, lists, "*". */
		{GET, .im = ETAG, .want = 200},
		{GET, .im = "*", .want = 200},
		{GET, .im = " * ", .want = 200},
		{GET, .im = "\"a\", " ETAG, .want = 200},
		{GET, .im = ETAG ", \"b\"", .want = 200},
		{GET, .im = " ,\"a\" ,, " ETAG " , ", .want = 200},
		{GET, .im = "\"nope\"", .want = 412},
		{GET, .im = "\"a\", \"b\"", .want = 412},
		{GET, .im = "W/" ETAG, .want = 412}, /* weak never matches */
		{GET, .im = "\"a\", W/" ETAG, .want = 412},
		{GET, .im = "\"5F3-1A-2B\"", .want = 412},
		{GET, .im = "5f3-1a-2b", .want = 412},
		{GET, .im = "junk", .want = 412},
		{GET, .im = "*, " ETAG, .want = 412}, /* malformed */
		{GET, .im = "\"a\" junk, " ETAG, .want = 412},
		/* Several If-Match lines are one list. */
		{GET, .im = "\"a\"\n" ETAG, .want = 200},
		{GET, .im = ETAG "\n\"b\"", .want = 200},
		{GET, .im = "\"a\"\n\"b\"", .want = 412},
		{GET, .im = "*\n" ETAG, .want = 412}, /* "*" only alone */
		{GET, .im = "junk\n" ETAG, .want = 412},
		{GET, .im = "\"a\"\n\"b\"\n" ETAG,
		 .want = 412}, /* past the kept lines */
		{GET, .im = ETAG " junk", .want = 200}, /* matched before */
		/* If-Unmodified-Since: 412 when modified after it. */
		{GET, .ius = EQ, .want = 200},
		{GET, .ius = NEW, .want = 200},
		{GET, .ius = LATER, .want = 200},
		{GET, .ius = OLD, .want = 412},
		{GET, .ius = EPOCH, .want = 412},
		{GET, .ius = "Sunday, 06-Nov-94 08:49:36 GMT", .want = 412},
		{GET, .ius = "Sun Nov  6 08:49:36 1994", .want = 412},
		{GET, .ius = " " OLD " ", .want = 412},
		/* ...and an invalid date, a list included, is ignored. */
		{GET, .ius = BAD, .want = 200},
		{GET, .ius = OLD ", " OLD, .want = 200},
		{GET, .ius = "Sun, 06 Nov 1994 08:49:36", .want = 200},
		/* RFC 850: more than 50 years ahead of NOW (2027-01-15
		 * 08:00:00) is a century back, by the whole timestamp. */
		{GET, .ius = "Friday, 15-Jan-77 08:00:00 GMT", .want = 200},
		{GET, .ius = "Friday, 15-Jan-77 08:00:01 GMT", .want = 412},
		{GET, .ius = "Thursday, 14-Jan-77 23:59:59 GMT", .want = 200},
		{GET, .ius = "Saturday, 16-Jan-77 00:00:00 GMT", .want = 412},
		{GET, .ius = "Friday, 31-Dec-76 00:00:00 GMT", .want = 200},
		{GET, .ius = "Sunday, 01-Jan-78 00:00:00 GMT", .want = 412},
		/* If-None-Match: weak comparison. */
		{GET, .inm = ETAG, .want = 304},
		{GET, .inm = "W/" ETAG, .want = 304},
		{GET, .inm = "*", .want = 304},
		{GET, .inm = "\"nope\"", .want = 200},
		/* If-Modified-Since. */
		{GET, .ims = EQ, .want = 304},
		{GET, .ims = NEW, .want = 304},
		{GET, .ims = OLD, .want = 200},
		{GET, .ims = LATER, .want = 200},
		{GET, .ims = BAD, .want = 200},
		/* Range and If-Range. */
		{GET, .range = RANGE, .want = 206},
		{GET, .range = RANGE, .ir = ETAG, .want = 206},
		{GET, .range = RANGE, .ir = EQ, .want = 206},
		{GET, .range = RANGE, .ir = "\"nope\"", .want = 200},
		{GET, .range = RANGE, .ir = "W/" ETAG, .want = 200},
		{GET, .range = RANGE, .ir = OLD, .want = 200},
		{GET, .range = RANGE, .ir = NEW, .want = 200},
		{GET, .range = RANGE, .ir = BAD, .want = 200},
		{GET, .ir = ETAG, .want = 200}, /* If-Range without Range */
		/* A single-value field in several lines (http_parse.h):
		 * ignored, and as If-Range it never matches (a Range so
		 * spoilt is HTTP_RANGE_NONE: test_range). */
		{GET, .ius = ",", .want = 200},
		{GET, .ims = ",", .want = 200},
		{GET, .range = RANGE, .ir = ",", .want = 200},
	};

	EXPECT_OUTCOMES(cases, ETAG);
}

static void test_pairs_in_order(void **state)
{
	(void)state;
	static const struct cond_case cases[] = {
		/* 1 before 2: with If-Match, If-Unmodified-Since is
		 * ignored, whichever way either goes. */
		{GET, .im = ETAG, .ius = OLD, .want = 200},
		{GET, .im = "*", .ius = EPOCH, .want = 200},
		{GET, .im = "\"x\"", .ius = NEW, .want = 412},
		{GET, .im = "\"x\"", .ius = OLD, .want = 412},
		/* 1 and 2 before 3: a failure is 412 even where If-None-Match
		 * alone would be 304. */
		{GET, .im = "\"x\"", .inm = ETAG, .want = 412},
		{GET, .ius = OLD, .inm = ETAG, .want = 412},
		{GET, .ius = OLD, .inm = "\"x\"", .want = 412},
		{GET, .im = ETAG, .inm = ETAG, .want = 304},
		{GET, .im = ETAG, .inm = "\"x\"", .want = 200},
		{GET, .ius = NEW, .inm = ETAG, .want = 304},
		{GET, .ius = BAD, .inm = ETAG, .want = 304},
		/* 1 and 2 before 4. */
		{GET, .im = "\"x\"", .ims = EQ, .want = 412},
		{GET, .ius = OLD, .ims = EQ, .want = 412},
		{GET, .ius = EQ, .ims = EQ, .want = 304},
		/* 3 before 4: If-Modified-Since only without If-None-Match. */
		{GET, .inm = "\"x\"", .ims = EQ, .want = 200},
		{GET, .inm = "junk", .ims = EQ, .want = 200},
		{GET, .inm = ETAG, .ims = OLD, .want = 304},
		/* Everything before 5: Range only once the rest said 200. */
		{GET, .im = "\"x\"", .range = RANGE, .want = 412},
		{GET, .ius = OLD, .range = RANGE, .want = 412},
		{GET, .inm = ETAG, .range = RANGE, .ir = ETAG, .want = 304},
		{GET, .ims = EQ, .range = RANGE, .want = 304},
		{GET, .im = ETAG, .range = RANGE, .want = 206},
		{GET, .im = ETAG, .range = RANGE, .ir = "\"x\"", .want = 200},
		{GET, .inm = "\"x\"", .range = RANGE, .ir = ETAG, .want = 206},
		{GET, .ims = OLD, .range = RANGE, .ir = EQ, .want = 206},
		/* All at once, each passing. */
		{GET, .im = ETAG, .ius = OLD, .inm = "\"x\"", .ims = EQ,
		 .range = RANGE, .ir = ETAG, .want = 206},
	};

	EXPECT_OUTCOMES(cases, ETAG);
}

static void test_methods_and_own_tags(void **state)
{
	(void)state;
	static const struct cond_case cases[] = {
		/* HEAD answers as its GET would. */
		{HEAD, .im = "\"x\"", .want = 412},
		{HEAD, .ius = OLD, .want = 412},
		{HEAD, .inm = ETAG, .want = 304},
		{HEAD, .ims = EQ, .want = 304},
		{HEAD, .range = RANGE, .ir = ETAG, .want = 206},
		/* Other methods (orcd answers them 405 first): no 304, and
		 * no Range. */
		{OTHER, .im = "\"x\"", .want = 412},
		{OTHER, .im = ETAG, .want = 200},
		{OTHER, .ius = OLD, .want = 412},
		{OTHER, .inm = ETAG, .want = 412},
		{OTHER, .inm = "*", .want = 412},
		{OTHER, .inm = "\"x\"", .want = 200},
		{OTHER, .ims = EQ, .want = 200},
		{OTHER, .range = RANGE, .want = 200},
	};
	/* A weak tag of ours: only "*" passes If-Match, If-None-Match
	 * still matches weakly, and If-Range never. */
	static const struct cond_case weak[] = {
		{GET, .im = "W/" ETAG, .want = 412},
		{GET, .im = ETAG, .want = 412},
		{GET, .im = "*", .want = 200},
		{GET, .inm = ETAG, .want = 304},
		{GET, .inm = "W/" ETAG, .want = 304},
		{GET, .range = RANGE, .ir = ETAG, .want = 200},
		{GET, .range = RANGE, .ir = "W/" ETAG, .want = 200},
	};
	/* No tag at all: only "*" matches. */
	static const struct cond_case none[] = {
		{GET, .im = "*", .want = 200},	{GET, .im = ETAG, .want = 412},
		{GET, .inm = "*", .want = 304}, {GET, .inm = ETAG, .want = 200},
		{GET, .ius = OLD, .want = 412},
	};

	EXPECT_OUTCOMES(cases, ETAG);
	EXPECT_OUTCOMES(weak, "W/" ETAG);
	EXPECT_OUTCOMES(none, NULL);
}

/* ---- Range ---- */

struct range_case {
	const char *field;
	uint64_t size;
	enum http_range_result res;
	uint64_t first, last;
};

static void test_range(void **state)
{
	(void)state;
	static const struct range_case cases[] = {
		{"bytes=0-499", 1000, HTTP_RANGE_OK, 0, 499},
		{"bytes=500-999", 1000, HTTP_RANGE_OK, 500, 999},
		{"bytes=500-", 1000, HTTP_RANGE_OK, 500, 999},
		{"bytes=-500", 1000, HTTP_RANGE_OK, 500, 999},
		{"bytes=-1", 1000, HTTP_RANGE_OK, 999, 999},
		{"bytes=-1000", 1000, HTTP_RANGE_OK, 0, 999},
		{"bytes=-1500", 1000, HTTP_RANGE_OK, 0, 999},
		{"bytes=0-0", 1000, HTTP_RANGE_OK, 0, 0},
		{"bytes=0-", 1, HTTP_RANGE_OK, 0, 0},
		{"bytes=0-5000", 1000, HTTP_RANGE_OK, 0, 999},
		{"bytes=999-", 1000, HTTP_RANGE_OK, 999, 999},
		{"bytes=999-999", 1000, HTTP_RANGE_OK, 999, 999},
		{"BYTES=1-2", 1000, HTTP_RANGE_OK, 1, 2},
		{"Bytes=1-2", 1000, HTTP_RANGE_OK, 1, 2},
		{"  bytes=1-2 \t", 1000, HTTP_RANGE_OK, 1, 2},
		{"bytes= 1-2", 1000, HTTP_RANGE_OK, 1, 2},
		{"bytes=1-2,,", 1000, HTTP_RANGE_OK, 1, 2},
		{"bytes=,1-2", 1000, HTTP_RANGE_OK, 1, 2},
		{"bytes=007-008", 1000, HTTP_RANGE_OK, 7, 8},
		/* saturated numbers keep their meaning */
		{"bytes=0-99999999999999999999999", 1000, HTTP_RANGE_OK, 0,
		 999},
		{"bytes=-99999999999999999999999", 1000, HTTP_RANGE_OK, 0, 999},
		/* 2^64 + 5 must not wrap to 5 */
		{"bytes=-18446744073709551621", 1000, HTTP_RANGE_OK, 0, 999},
		{"bytes=0-18446744073709551621", 1000, HTTP_RANGE_OK, 0, 999},
		{"bytes=18446744073709551614-", UINT64_MAX, HTTP_RANGE_OK,
		 UINT64_MAX - 1, UINT64_MAX - 1},
		{"bytes=-2", UINT64_MAX, HTTP_RANGE_OK, UINT64_MAX - 2,
		 UINT64_MAX - 1},
		/* unsatisfiable */
		{"bytes=1000-", 1000, HTTP_RANGE_UNSATISFIABLE, 0, 0},
		{"bytes=1000-2000", 1000, HTTP_RANGE_UNSATISFIABLE, 0, 0},
		{"bytes=99999999999999999999999-", 1000,
		 HTTP_RANGE_UNSATISFIABLE, 0, 0},
		{"bytes=18446744073709551621-", 1000, HTTP_RANGE_UNSATISFIABLE,
		 0, 0},
		{"bytes=-0", 1000, HTTP_RANGE_UNSATISFIABLE, 0, 0},
		{"bytes=-000", 1000, HTTP_RANGE_UNSATISFIABLE, 0, 0},
		{"bytes=0-", 0, HTTP_RANGE_UNSATISFIABLE, 0, 0},
		{"bytes=0-0", 0, HTTP_RANGE_UNSATISFIABLE, 0, 0},
		/* satisfiable (RFC 9110 14.1.1), yet no 206 holds 0 bytes */
		{"bytes=-5", 0, HTTP_RANGE_NONE, 0, 0},
		{"bytes=-0", 0, HTTP_RANGE_UNSATISFIABLE, 0, 0},
		/* several ranges: answered whole */
		{"bytes=0-1,2-3", 1000, HTTP_RANGE_MULTI, 0, 0},
		{"bytes=0-1, -5", 1000, HTTP_RANGE_MULTI, 0, 0},
		{"bytes=0-1 ,\t5-", 1000, HTTP_RANGE_MULTI, 0, 0},
		/* Several, none overlapping the file: 416, as for one. */
		{"bytes=2000-,3000-", 1000, HTTP_RANGE_UNSATISFIABLE, 0, 0},
		{"bytes=1000-,-0", 1000, HTTP_RANGE_UNSATISFIABLE, 0, 0},
		{"bytes=2000-,999-", 1000, HTTP_RANGE_MULTI, 0, 0},
		{"bytes=2000-,-1", 1000, HTTP_RANGE_MULTI, 0, 0},
		/* ignored: unknown unit or invalid syntax */
		{"items=0-1", 1000, HTTP_RANGE_NONE, 0, 0},
		{",", 1000, HTTP_RANGE_NONE, 0, 0}, /* HTTP_FIELD_REPEATED */
		{"byte=0-1", 1000, HTTP_RANGE_NONE, 0, 0},
		{"bytesx=0-1", 1000, HTTP_RANGE_NONE, 0, 0},
		{"bytes 0-1", 1000, HTTP_RANGE_NONE, 0, 0},
		{"bytes =0-1", 1000, HTTP_RANGE_NONE, 0, 0},
		{"bytes", 1000, HTTP_RANGE_NONE, 0, 0},
		{"bytes=", 1000, HTTP_RANGE_NONE, 0, 0},
		{"bytes=,", 1000, HTTP_RANGE_NONE, 0, 0},
		{"bytes=-", 1000, HTTP_RANGE_NONE, 0, 0},
		{"bytes=a-b", 1000, HTTP_RANGE_NONE, 0, 0},
		{"bytes=1", 1000, HTTP_RANGE_NONE, 0, 0},
		{"bytes=5-4", 1000, HTTP_RANGE_NONE, 0, 0},
		{"bytes=1-2-3", 1000, HTTP_RANGE_NONE, 0, 0},
		{"bytes=0 -1", 1000, HTTP_RANGE_NONE, 0, 0},
		{"bytes=0- 1", 1000, HTTP_RANGE_NONE, 0, 0},
		{"bytes=+1-2", 1000, HTTP_RANGE_NONE, 0, 0},
		{"bytes=-+1", 1000, HTTP_RANGE_NONE, 0, 0},
		{"bytes=--1", 1000, HTTP_RANGE_NONE, 0, 0},
		{"bytes=0x1-2", 1000, HTTP_RANGE_NONE, 0, 0},
		{"bytes=0-1x", 1000, HTTP_RANGE_NONE, 0, 0},
		{"bytes=0-1 2-3", 1000, HTTP_RANGE_NONE, 0, 0},
		{"bytes=0-1,5-4", 1000, HTTP_RANGE_NONE, 0, 0},
		{"bytes=0-1;x", 1000, HTTP_RANGE_NONE, 0, 0},
		{"bytes=5-4", 0, HTTP_RANGE_NONE, 0, 0},
		{"", 1000, HTTP_RANGE_NONE, 0, 0},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct range_case *c = &cases[i];
		size_t n = strlen(c->field);
		char *copy = malloc(n ? n : 1);
		uint64_t first = 77, last = 77;
		enum http_range_result r;

		assert_non_null(copy);
		memcpy(copy, c->field, n);
		r = http_range_parse((struct http_str){copy, n}, c->size,
				     &first, &last);
		free(copy);
		if (r != c->res)
			fail_msg("case %zu (%s, %llu): result %d, want %d", i,
				 c->field, (unsigned long long)c->size, r,
				 c->res);
		if (r == HTTP_RANGE_OK &&
		    (first != c->first || last != c->last))
			fail_msg("case %zu (%s): %llu-%llu, want %llu-%llu", i,
				 c->field, (unsigned long long)first,
				 (unsigned long long)last,
				 (unsigned long long)c->first,
				 (unsigned long long)c->last);
	}
}

/* ---- If-Range ---- */

static void test_if_range(void **state)
{
	(void)state;
	assert_true(http_if_range_ok(S(""), ETAG, MTIME));
	assert_true(http_if_range_ok(S(ETAG), ETAG, MTIME));
	assert_true(http_if_range_ok(S(" " ETAG " "), ETAG, MTIME));
	assert_false(http_if_range_ok(S("\"other\""), ETAG, MTIME));
	assert_false(http_if_range_ok(S("\"5f3-1a-2b"), ETAG, MTIME));
	assert_false(http_if_range_ok(S("\"5f3-1a-2b\"x"), ETAG, MTIME));
	/* Weak tags never match, on either side. */
	assert_false(http_if_range_ok(S("W/" ETAG), ETAG, MTIME));
	assert_false(http_if_range_ok(S(ETAG), "W/" ETAG, MTIME));
	assert_false(http_if_range_ok(S(ETAG), NULL, MTIME));
	/* Dates: equal only. */
	assert_true(http_if_range_ok(S("Sun, 06 Nov 1994 08:49:37 GMT"), ETAG,
				     MTIME));
	assert_true(
		http_if_range_ok(S("Sun Nov  6 08:49:37 1994"), ETAG, MTIME));
	assert_false(http_if_range_ok(S("Sun, 06 Nov 1994 08:49:38 GMT"), ETAG,
				      MTIME));
	assert_false(http_if_range_ok(S("Sun, 06 Nov 1994 08:49:36 GMT"), ETAG,
				      MTIME));
	assert_false(http_if_range_ok(S("not a date"), ETAG, MTIME));
	assert_false(http_if_range_ok(S("5f3-1a-2b"), ETAG, MTIME));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_date_format_known),
		cmocka_unit_test(test_date_format_sweep),
		cmocka_unit_test(test_date_parse_forms),
		cmocka_unit_test(test_date_parse_bad),
		cmocka_unit_test(test_etag_make),
		cmocka_unit_test(test_if_none_match),
		cmocka_unit_test(test_if_modified_since),
		cmocka_unit_test(test_precedence),
		cmocka_unit_test(test_each_alone),
		cmocka_unit_test(test_pairs_in_order),
		cmocka_unit_test(test_methods_and_own_tags),
		cmocka_unit_test(test_range),
		cmocka_unit_test(test_if_range),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
