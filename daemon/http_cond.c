// SPDX-License-Identifier: MIT
/*
 * Validators and preconditions (RFC 9110 sections 5.6.7, 8.8, 13, 14).
 *
 * Dates are converted with the proleptic Gregorian calendar directly, not
 * with gmtime/timegm: that keeps this file free of libc time-zone state
 * and gives the same answer for every time_t on every host.
 */
#include <errno.h>
#include <string.h>

#include "http_cond.h"

static const char wkday[7][4] = {"Sun", "Mon", "Tue", "Wed",
				 "Thu", "Fri", "Sat"};
static const char *const weekday[7] = {"Sunday",    "Monday",	"Tuesday",
				       "Wednesday", "Thursday", "Friday",
				       "Saturday"};
static const char month[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
				  "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

/* 0000-01-01T00:00:00Z and 9999-12-31T23:59:59Z: the years IMF-fixdate's
 * four digits can carry. */
#define DATE_MIN (-62167219200LL)
#define DATE_MAX 253402300799LL

/* Days since 1970-01-01 of a Gregorian date (m 1..12). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

/* The inverse: days since the epoch to year, month 1..12, day 1..31. */
static void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
	int64_t era, doe, yoe, doy, mp;

	z += 719468;
	era = (z >= 0 ? z : z - 146096) / 146097;
	doe = z - era * 146097;
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	*d = (int)(doy - (153 * mp + 2) / 5 + 1);
	*m = (int)(mp < 10 ? mp + 3 : mp - 9);
	*y = yoe + era * 400 + (*m <= 2);
}

static int64_t floor_div(int64_t a, int64_t b)
{
	return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

/* n decimal digits of v, zero-padded. */
static char *put_digits(char *out, unsigned v, int n)
{
	for (int i = n - 1; i >= 0; i--) {
		out[i] = (char)('0' + v % 10);
		v /= 10;
	}
	return out + n;
}

static char *put_str(char *out, const char *s)
{
	size_t n = strlen(s);

	memcpy(out, s, n);
	return out + n;
}

void http_date_format(time_t t, char *out)
{
	int64_t s = (int64_t)t, days, secs, y;
	int m, d;
	char *o = out;

	if (s < DATE_MIN)
		s = DATE_MIN;
	if (s > DATE_MAX)
		s = DATE_MAX;
	days = floor_div(s, 86400);
	secs = s - days * 86400;
	civil_from_days(days, &y, &m, &d);
	/* 1970-01-01 was a Thursday. */
	o = put_str(o, wkday[((days % 7) + 11) % 7]);
	o = put_str(o, ", ");
	o = put_digits(o, (unsigned)d, 2);
	*o++ = ' ';
	o = put_str(o, month[m - 1]);
	*o++ = ' ';
	o = put_digits(o, (unsigned)y, 4);
	*o++ = ' ';
	o = put_digits(o, (unsigned)(secs / 3600), 2);
	*o++ = ':';
	o = put_digits(o, (unsigned)(secs / 60 % 60), 2);
	*o++ = ':';
	o = put_digits(o, (unsigned)(secs % 60), 2);
	o = put_str(o, " GMT");
	*o = '\0';
}

/* --- parsing: every helper advances *p only on success --- */

struct cursor {
	const char *p;
	const char *end;
};

static bool lit(struct cursor *c, const char *s)
{
	size_t n = strlen(s);

	if ((size_t)(c->end - c->p) < n || memcmp(c->p, s, n) != 0)
		return false;
	c->p += n;
	return true;
}

/* Exactly n digits. */
static bool digits(struct cursor *c, int n, int *out)
{
	int v = 0;

	if (c->end - c->p < n)
		return false;
	for (int i = 0; i < n; i++) {
		if (c->p[i] < '0' || c->p[i] > '9')
			return false;
		v = v * 10 + (c->p[i] - '0');
	}
	c->p += n;
	*out = v;
	return true;
}

/* One of n names (case-sensitive, RFC 9110 5.6.7); its index or -1. */
static int name(struct cursor *c, const char *const *names, int n)
{
	for (int i = 0; i < n; i++)
		if (lit(c, names[i]))
			return i;
	return -1;
}

static int short_name(struct cursor *c, const char (*names)[4], int n)
{
	for (int i = 0; i < n; i++)
		if (lit(c, names[i]))
			return i;
	return -1;
}

/* "HH:MM:SS" */
static bool time_of_day(struct cursor *c, int *h, int *mi, int *s)
{
	return digits(c, 2, h) && lit(c, ":") && digits(c, 2, mi) &&
	       lit(c, ":") && digits(c, 2, s);
}

struct tm_parts {
	int64_t year;
	int mon; /* 0..11 */
	int day, hour, min, sec;
};

/* "Sun, 06 Nov 1994 08:49:37 GMT" after the day name. */
static bool imf_fixdate(struct cursor *c, struct tm_parts *t)
{
	int y;

	if (!lit(c, ", ") || !digits(c, 2, &t->day) || !lit(c, " "))
		return false;
	t->mon = short_name(c, month, 12);
	if (t->mon < 0 || !lit(c, " ") || !digits(c, 4, &y) || !lit(c, " ") ||
	    !time_of_day(c, &t->hour, &t->min, &t->sec) || !lit(c, " GMT"))
		return false;
	t->year = y;
	return true;
}

/* "Sun Nov  6 08:49:37 1994" after the day name. */
static bool asctime_date(struct cursor *c, struct tm_parts *t)
{
	int y;

	if (!lit(c, " "))
		return false;
	t->mon = short_name(c, month, 12);
	if (t->mon < 0 || !lit(c, " "))
		return false;
	if (!(lit(c, " ") ? digits(c, 1, &t->day) : digits(c, 2, &t->day)))
		return false;
	if (!lit(c, " ") || !time_of_day(c, &t->hour, &t->min, &t->sec) ||
	    !lit(c, " ") || !digits(c, 4, &y))
		return false;
	t->year = y;
	return true;
}

/* "Sunday, 06-Nov-94 08:49:37 GMT" after the day name. RFC 9110 5.6.7:
 * a timestamp with a two-digit year that would be more than 50 years in
 * the future is in the past: compared whole, so that in December 2026
 * "31-Dec-76" is 1976, not 2076 (the year alone is only 50 ahead). */
static bool rfc850_date(struct cursor *c, struct tm_parts *t, time_t now)
{
	int64_t cur, y, day = floor_div((int64_t)now, 86400);
	int64_t in_year, now_in_year;
	int yy, m, d;

	if (!lit(c, ", ") || !digits(c, 2, &t->day) || !lit(c, "-"))
		return false;
	t->mon = short_name(c, month, 12);
	if (t->mon < 0 || !lit(c, "-") || !digits(c, 2, &yy) || !lit(c, " ") ||
	    !time_of_day(c, &t->hour, &t->min, &t->sec) || !lit(c, " GMT"))
		return false;
	civil_from_days(day, &cur, &m, &d);
	y = cur - cur % 100 + yy;
	/* Where in its year each falls, ordered as the calendar is. */
	in_year = ((int64_t)(t->mon + 1) * 32 + t->day) * 86400 +
		  t->hour * 3600 + t->min * 60 + t->sec;
	now_in_year = ((int64_t)m * 32 + d) * 86400 + (now - day * 86400);
	if (y > cur + 50 || (y == cur + 50 && in_year > now_in_year))
		y -= 100;
	t->year = y;
	return true;
}

static bool leap(int64_t y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int date_parse_at(struct http_str s, time_t now, time_t *out)
{
	static const int mdays[12] = {31, 28, 31, 30, 31, 30,
				      31, 31, 30, 31, 30, 31};
	struct cursor c;
	struct tm_parts t;
	bool ok;
	int64_t v;

	/* An absent field is {NULL, 0}, and NULL + 0 is undefined in C. */
	if (s.n == 0)
		return -EINVAL;
	c.p = s.p;
	c.end = s.p + s.n;
	/* The long names first: "Sun" is a prefix of "Sunday". */
	if (name(&c, weekday, 7) >= 0)
		ok = rfc850_date(&c, &t, now);
	else if (short_name(&c, wkday, 7) >= 0)
		ok = c.p < c.end && *c.p == ',' ? imf_fixdate(&c, &t) :
						  asctime_date(&c, &t);
	else
		ok = false;
	if (!ok || c.p != c.end)
		return -EINVAL;
	/* second may be 60 (a leap second); it then counts as the next
	 * minute's 00, as POSIX time does. */
	if (t.day < 1 || t.day > mdays[t.mon] + (t.mon == 1 && leap(t.year)) ||
	    t.hour > 23 || t.min > 59 || t.sec > 60)
		return -EINVAL;
	v = days_from_civil(t.year, t.mon + 1, t.day) * 86400 + t.hour * 3600 +
	    t.min * 60 + t.sec;
	*out = (time_t)v;
	return 0;
}

int http_date_parse(struct http_str s, time_t *out)
{
	return date_parse_at(s, time(NULL), out);
}

/* v in lower-case hex, no leading zeros, at p; returns the end. */
static char *hex(char *p, uint64_t v)
{
	char digits[16];
	int n = 0;

	do {
		digits[n++] = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	while (n)
		*p++ = digits[--n];
	return p;
}

/* Every response of a file carries one: by hand, since snprintf's
 * format parsing was 1 % of a 16 KiB request's CPU (perf). */
void http_etag_make(uint64_t ino, uint64_t size, int64_t mtime_sec,
		    long mtime_nsec, char *out)
{
	/* Unsigned arithmetic: a pre-1970 mtime wraps instead of being
	 * undefined, and still gives a distinct tag. */
	uint64_t ns = (uint64_t)mtime_sec * 1000000000u + (uint64_t)mtime_nsec;
	char *p = out;

	*p++ = '"';
	p = hex(p, ns);
	*p++ = '-';
	p = hex(p, size);
	*p++ = '-';
	p = hex(p, ino);
	*p++ = '"';
	*p = '\0';
}

static bool is_ows(char c)
{
	return c == ' ' || c == '\t';
}

static struct http_str trim(struct http_str s)
{
	while (s.n && is_ows(s.p[0])) {
		s.p++;
		s.n--;
	}
	while (s.n && is_ows(s.p[s.n - 1]))
		s.n--;
	return s;
}

/* The opaque-tag of an entity-tag: without a W/ prefix. */
static struct http_str opaque(const char *etag)
{
	struct http_str s = {etag, strlen(etag)};

	if (s.n >= 2 && etag[0] == 'W' && etag[1] == '/') {
		s.p += 2;
		s.n -= 2;
	}
	return s;
}

/* How far one line of an entity-tag list got (etag_line). */
enum tag_scan {
	TAG_MISS,   /* read to its end: no tag names ours */
	TAG_HIT,    /* a tag names ours */
	TAG_BROKEN, /* not an entity-tag list from some point on */
};

/* One line of a #entity-tag list against mine (an opaque-tag): the
 * strong comparison (both strong and equal) or the weak one (the
 * opaque-tags equal, whatever their W/ prefixes). */
static enum tag_scan etag_line(struct http_str v, struct http_str mine,
			       bool strong)
{
	size_t i = 0;

	for (;;) {
		const char *close;
		size_t start;
		bool weak = false;

		while (i < v.n && (is_ows(v.p[i]) || v.p[i] == ','))
			i++;
		if (i == v.n)
			return TAG_MISS;
		if (v.n - i >= 2 && v.p[i] == 'W' && v.p[i + 1] == '/') {
			i += 2;
			weak = true;
		}
		if (i == v.n || v.p[i] != '"')
			return TAG_BROKEN;
		start = i;
		close = memchr(v.p + i + 1, '"', v.n - i - 1);
		if (!close)
			return TAG_BROKEN;
		i = (size_t)(close - v.p) + 1;
		if (!(strong && weak) && i - start == mine.n &&
		    memcmp(v.p + start, mine.p, mine.n) == 0)
			return TAG_HIT;
		while (i < v.n && is_ows(v.p[i]))
			i++;
		if (i < v.n && v.p[i] != ',')
			return TAG_BROKEN;
	}
}

/*
 * Whether a field "*" / #entity-tag names etag (RFC 9110 13.1.1, 13.1.2),
 * its lines read as one list (5.3): strong for If-Match, weak for
 * If-None-Match. "*" names any current representation, and only alone:
 * beside other lines it breaks the list, as it would joined to them.
 * A malformed list stops matching where it breaks: for If-None-Match a
 * wrong 304 would be worse than a 200, for If-Match a 412 is safer than
 * a representation the client did not ask for. Lines the parser did not
 * keep count as absent, which errs the same ways.
 */
static bool etag_list_hits(const struct http_list *l, const char *etag,
			   bool strong)
{
	struct http_str mine;

	if (l->n == 1) {
		struct http_str v = trim(l->line[0]);

		if (v.n == 1 && v.p[0] == '*')
			return true;
	}
	/* A weak tag of ours never matches strongly. */
	if (!etag || (strong && etag[0] == 'W'))
		return false;
	mine = opaque(etag);
	for (unsigned k = 0; k < l->n; k++) {
		switch (etag_line(l->line[k], mine, strong)) {
		case TAG_HIT:
			return true;
		case TAG_BROKEN:
			return false;
		case TAG_MISS:
			break;
		}
	}
	return false;
}

/* A field's HTTP-date, or false when it is absent or invalid (then the
 * field is ignored: RFC 9110 13.1.3, 13.1.4). */
static bool field_date(struct http_str v, time_t now, time_t *out)
{
	return v.n && date_parse_at(trim(v), now, out) == 0;
}

int http_precondition_at(const struct http_request *req, const char *etag,
			 time_t mtime, time_t now)
{
	bool get = req->method == HTTP_METHOD_GET ||
		   req->method == HTTP_METHOD_HEAD;
	time_t t;

	/* RFC 9110 13.2.2, steps 1 to 4 in order. */
	if (req->if_match.n) {
		if (!etag_list_hits(&req->if_match, etag, true))
			return 412;
	} else if (field_date(req->if_unmodified_since, now, &t) && mtime > t) {
		return 412;
	}
	if (req->if_none_match.n) {
		if (etag_list_hits(&req->if_none_match, etag, false))
			return get ? 304 : 412;
	} else if (get && field_date(req->if_modified_since, now, &t) &&
		   t <= now && mtime <= t) {
		/* A date later than now is no date (13.1.3). */
		return 304;
	}
	return 200;
}

int http_precondition(const struct http_request *req, const char *etag,
		      time_t mtime)
{
	return http_precondition_at(req, etag, mtime, time(NULL));
}

/* 1*DIGIT, saturating at UINT64_MAX: a position past any size stays past
 * it, so saturation never changes the answer. */
static bool range_int(struct http_str s, size_t *i, uint64_t *out)
{
	uint64_t v = 0;
	size_t start = *i;

	while (*i < s.n && s.p[*i] >= '0' && s.p[*i] <= '9') {
		unsigned d = (unsigned)(s.p[*i] - '0');

		v = v > (UINT64_MAX - d) / 10 ? UINT64_MAX : v * 10 + d;
		(*i)++;
	}
	*out = v;
	return *i > start;
}

/* One range-spec at *i. suffix: "-N"; otherwise "F-" (has_last false) or
 * "F-L". */
static bool range_spec(struct http_str s, size_t *i, bool *suffix, uint64_t *a,
		       bool *has_last, uint64_t *b)
{
	*suffix = *i < s.n && s.p[*i] == '-';
	if (*suffix) {
		(*i)++;
		return range_int(s, i, a);
	}
	if (!range_int(s, i, a) || *i == s.n || s.p[*i] != '-')
		return false;
	(*i)++;
	*has_last = range_int(s, i, b);
	/* RFC 9110 14.1.1: last < first makes the range-spec invalid. */
	return !*has_last || *b >= *a;
}

enum http_range_result http_range_parse(struct http_str range, uint64_t size,
					uint64_t *first, uint64_t *last)
{
	bool suffix = false, has_last = false;
	uint64_t a = 0, b = 0;
	unsigned count = 0;
	bool any_satisfiable = false;
	size_t i;

	*first = 0;
	*last = 0;
	range = trim(range);
	/* range-unit is case-insensitive (RFC 9110 14.1). */
	if (range.n < 6 ||
	    !http_str_eq_ci((struct http_str){range.p, 5}, "bytes") ||
	    range.p[5] != '=')
		return HTTP_RANGE_NONE;
	i = 6;
	/* 1#range-spec: empty list elements and OWS around commas allowed. */
	for (;;) {
		bool sfx, hl = false;
		uint64_t x, y = 0;

		while (i < range.n && (is_ows(range.p[i]) || range.p[i] == ','))
			i++;
		if (i == range.n)
			break;
		if (!range_spec(range, &i, &sfx, &x, &hl, &y))
			return HTTP_RANGE_NONE;
		/* As for one range below: a suffix of more than zero bytes,
		 * or a first position before the end. */
		if (sfx ? x > 0 : x < size)
			any_satisfiable = true;
		if (count++ == 0) {
			suffix = sfx;
			a = x;
			has_last = hl;
			b = y;
		}
		while (i < range.n && is_ows(range.p[i]))
			i++;
		if (i < range.n && range.p[i] != ',')
			return HTTP_RANGE_NONE;
	}
	if (count == 0)
		return HTTP_RANGE_NONE;
	/* Several: served whole (RFC 9110 14.2 lets a server ignore Range),
	 * unless none of them overlaps the file, which is a 416 (15.5.17),
	 * as for one. */
	if (count > 1)
		return any_satisfiable ? HTTP_RANGE_MULTI :
					 HTTP_RANGE_UNSATISFIABLE;
	/* A suffix of zero bytes selects nothing, nor does a first position
	 * at or past the end. A suffix of more is satisfiable even on an
	 * empty representation (RFC 9110 14.1.1), but no 206 can carry zero
	 * bytes: the Range is then ignored (14.2) and the answer is 200. */
	if ((suffix && a == 0) || (!suffix && a >= size))
		return HTTP_RANGE_UNSATISFIABLE;
	if (size == 0)
		return HTTP_RANGE_NONE;
	if (suffix) {
		*first = a >= size ? 0 : size - a;
		*last = size - 1;
	} else {
		*first = a;
		*last = has_last && b < size - 1 ? b : size - 1;
	}
	return HTTP_RANGE_OK;
}

bool http_range_applies(const struct http_request *req, const char *etag,
			time_t mtime)
{
	if (req->method != HTTP_METHOD_GET && req->method != HTTP_METHOD_HEAD)
		return false;
	return req->range.n && http_if_range_ok(req->if_range, etag, mtime);
}

bool http_if_range_ok(struct http_str if_range, const char *etag, time_t mtime)
{
	time_t t;

	if_range = trim(if_range);
	if (if_range.n == 0)
		return true;
	/* If-Range needs the strong comparison (RFC 9110 13.1.5): a weak
	 * tag on either side never matches. A W/ field is neither quoted
	 * nor a date, so it falls through to false; a weak own etag starts
	 * with W and cannot equal a quoted field. */
	if (if_range.p[0] == '"')
		return etag && strlen(etag) == if_range.n &&
		       memcmp(etag, if_range.p, if_range.n) == 0;
	if (http_date_parse(if_range, &t))
		return false;
	return t == mtime;
}
