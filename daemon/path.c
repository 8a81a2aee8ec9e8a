// SPDX-License-Identifier: MIT
/*
 * Request path normalisation: one pass over the encoded path, decoding each
 * byte exactly once and building the normalised result directly in `out`.
 *
 * A decoded "%2F" is a separator like a literal '/': the path is decoded
 * once and then normalised, so no encoded form of "." or ".." can survive
 * into the result and reach the filesystem.
 *
 * The way back, a directory redirect's Location, is built from that
 * normalised result too, never from the raw target.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "path.h"

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Per-segment state while scanning. */
struct seg {
	size_t start; /* where the segment begins in out (after its '/') */
	size_t len;   /* decoded length, stored or not */
	bool dots;    /* every byte so far is '.' */
	bool stored;  /* every byte so far fit into out */
};

struct norm {
	char *out;
	size_t cap; /* bytes usable for the path, the NUL excluded */
	size_t o;   /* length of the normalised path so far */
	/*
	 * Segments that did not fit into out. The result can still fit if
	 * later ".." segments remove them all, so count them instead of
	 * failing early; nothing of them is ever written.
	 */
	size_t hidden;
};

static void seg_begin(struct norm *n, struct seg *s)
{
	/* A separator is needed before every segment but the first. */
	s->start = n->o ? n->o + 1 : 0;
	s->len = 0;
	s->dots = true;
	s->stored = n->hidden == 0 && s->start <= n->cap;
}

static void seg_put(struct norm *n, struct seg *s, char c)
{
	s->dots = s->dots && c == '.';
	if (s->stored && s->start + s->len < n->cap)
		n->out[s->start + s->len] = c;
	else
		s->stored = false;
	s->len++;
}

/* Drop the last stored segment; false when there is none (above root). */
static bool pop_segment(struct norm *n)
{
	if (n->hidden) {
		n->hidden--;
		return true;
	}
	if (n->o == 0)
		return false;
	while (n->o > 0 && n->out[n->o - 1] != '/')
		n->o--;
	if (n->o > 0)
		n->o--; /* the separator itself */
	return true;
}

static int seg_end(struct norm *n, const struct seg *s)
{
	if (s->len == 0 || (s->dots && s->len == 1))
		return 0;
	if (s->dots && s->len == 2)
		return pop_segment(n) ? 0 : -EINVAL;
	if (!s->stored) {
		n->hidden++;
		return 0;
	}
	if (s->start > 0)
		n->out[s->start - 1] = '/';
	n->o = s->start + s->len;
	return 0;
}

/* Dotfiles are refused after normalisation: "/.a/../b" is fine. */
static bool has_dot_segment(const char *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] == '.' && (i == 0 || p[i - 1] == '/'))
			return true;
	return false;
}

int path_normalize(const char *raw, size_t len, char *out, size_t cap,
		   bool *trailing_slash)
{
	struct norm n = {.out = out, .cap = cap ? cap - 1 : 0};
	struct seg s;
	bool slash_last = false;
	int ret;

	if (len == 0 || raw[0] != '/')
		return -EINVAL;
	seg_begin(&n, &s);
	for (size_t i = 1; i < len; i++) {
		unsigned char c = (unsigned char)raw[i];

		if (c == '%') {
			int hi, lo;

			if (len - i < 3)
				return -EINVAL;
			hi = hexval((unsigned char)raw[i + 1]);
			lo = hexval((unsigned char)raw[i + 2]);
			if (hi < 0 || lo < 0)
				return -EINVAL;
			c = (unsigned char)(hi << 4 | lo);
			i += 2;
		}
		if (c < 0x20 || c == 0x7f)
			return -EINVAL;
		slash_last = c == '/';
		if (c == '/') {
			ret = seg_end(&n, &s);
			if (ret)
				return ret;
			seg_begin(&n, &s);
		} else {
			seg_put(&n, &s, (char)c);
		}
	}
	/* A last "." or ".." leaves a directory behind it: "/a/b/.." is
	 * "/a/" (RFC 3986 5.2.4), so "/file.txt/." names no file. */
	if (s.dots && (s.len == 1 || s.len == 2))
		slash_last = true;
	ret = seg_end(&n, &s);
	if (ret)
		return ret;
	if (n.hidden || cap == 0)
		return -ENAMETOOLONG;
	out[n.o] = '\0';
	if (has_dot_segment(out, n.o))
		return -ENOENT;
	if (trailing_slash)
		*trailing_slash = len == 1 || slash_last;
	return 0;
}

/* pchar without pct-encoded (RFC 3986 3.3): unreserved, sub-delims, ':'
 * and '@'. */
static bool is_pchar(unsigned char c)
{
	if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
	    (c >= 'A' && c <= 'Z'))
		return true;
	return c != '\0' && strchr("-._~!$&'()*+,;=:@", c) != NULL;
}

struct loc {
	char *out;
	size_t cap; /* bytes usable, the NUL excluded */
	size_t o;
	bool full;
};

static void loc_put(struct loc *l, const char *s, size_t n)
{
	if (l->full || n > l->cap - l->o) {
		l->full = true;
		return;
	}
	memcpy(l->out + l->o, s, n);
	l->o += n;
}

static void loc_byte(struct loc *l, unsigned char c, bool keep)
{
	static const char hex[] = "0123456789ABCDEF";
	char esc[3] = {'%', hex[c >> 4], hex[c & 15]};

	if (keep)
		loc_put(l, (const char *)&c, 1);
	else
		loc_put(l, esc, 3);
}

int path_dir_location(const char *relpath, const char *query, size_t qlen,
		      char *out, size_t cap)
{
	struct loc l = {.out = out, .cap = cap ? cap - 1 : 0};

	loc_put(&l, "/", 1);
	for (const char *p = relpath; *p; p++) {
		unsigned char c = (unsigned char)*p;

		loc_byte(&l, c, c == '/' || is_pchar(c));
	}
	/* The root is "/" itself: "/" + "" + "/" would be "//". */
	if (relpath[0])
		loc_put(&l, "/", 1);
	if (qlen)
		loc_put(&l, "?", 1);
	for (size_t i = 0; i < qlen; i++) {
		unsigned char c = (unsigned char)query[i];

		if (c == '%' && qlen - i >= 3 &&
		    hexval((unsigned char)query[i + 1]) >= 0 &&
		    hexval((unsigned char)query[i + 2]) >= 0) {
			loc_put(&l, query + i, 3);
			i += 2;
			continue;
		}
		loc_byte(&l, c, c == '/' || c == '?' || is_pchar(c));
	}
	if (l.full || cap == 0)
		return -ENAMETOOLONG;
	out[l.o] = '\0';
	return (int)l.o;
}
