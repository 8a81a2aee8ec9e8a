// SPDX-License-Identifier: MIT
/*
 * Extension -> media type table parsed from a mime.types file's text (the
 * caller reads the file: this module does no I/O).
 *
 * All strings live in one pool; the hash table (open addressing, linear
 * probing, power-of-two size, at most half full) holds offsets into it.
 * Keys are stored lowercased and looked up case-insensitively without
 * copying the request's extension.
 */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http_parse.h"
#include "mime.h"

struct mime_entry {
	size_t ext;  /* pool offset of the lowercase extension; 0 = empty */
	size_t type; /* pool offset of the media type */
};

struct mime_table {
	char *pool;
	size_t pool_len, pool_cap;
	struct mime_entry *slots;
	size_t mask; /* number of slots - 1 */
	size_t used;
};

static uint32_t hash_lower(const char *s, size_t len)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (size_t i = 0; i < len; i++) {
		h ^= (uint32_t)tolower((unsigned char)s[i]);
		h *= 16777619u;
	}
	return h;
}

/* Appends s (len bytes, lowercased if asked) and a NUL; 0 on ENOMEM. */
static size_t pool_add(struct mime_table *t, const char *s, size_t len,
		       bool lower)
{
	size_t off = t->pool_len;

	if (t->pool_cap - t->pool_len < len + 1) {
		size_t cap = t->pool_cap ? t->pool_cap : 4096;
		char *p;

		while (cap - t->pool_len < len + 1)
			cap *= 2;
		p = realloc(t->pool, cap);
		if (!p)
			return 0;
		t->pool = p;
		t->pool_cap = cap;
	}
	for (size_t i = 0; i < len; i++)
		t->pool[off + i] = lower ? (char)tolower((unsigned char)s[i]) :
					   s[i];
	t->pool[off + len] = '\0';
	t->pool_len += len + 1;
	return off;
}

/* The slot holding ext, or the empty slot where it would go. */
static struct mime_entry *find_slot(const struct mime_table *t, const char *ext,
				    size_t len)
{
	size_t i = hash_lower(ext, len) & t->mask;

	for (;;) {
		struct mime_entry *e = &t->slots[i];
		const char *key = t->pool + e->ext;

		if (!e->ext)
			return e;
		if (strlen(key) == len && !strncasecmp(key, ext, len))
			return e;
		i = (i + 1) & t->mask;
	}
}

static int grow(struct mime_table *t)
{
	size_t n = (t->mask + 1) * 2;
	struct mime_entry *old = t->slots;
	size_t old_n = t->mask + 1;

	t->slots = calloc(n, sizeof(*t->slots));
	if (!t->slots) {
		t->slots = old;
		return -ENOMEM;
	}
	t->mask = n - 1;
	for (size_t i = 0; i < old_n; i++) {
		const char *key = t->pool + old[i].ext;

		if (old[i].ext)
			*find_slot(t, key, strlen(key)) = old[i];
	}
	free(old);
	return 0;
}

/* Adds ext -> type unless ext is already there (first definition wins). */
static int insert(struct mime_table *t, const char *ext, size_t len,
		  size_t type)
{
	struct mime_entry *e;

	if ((t->used + 1) * 2 > t->mask + 1 && grow(t))
		return -ENOMEM;
	e = find_slot(t, ext, len);
	if (e->ext)
		return 0;
	e->ext = pool_add(t, ext, len, true);
	if (!e->ext)
		return -ENOMEM;
	e->type = type;
	t->used++;
	return 0;
}

struct mime_table *mime_empty(void)
{
	struct mime_table *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->slots = calloc(16, sizeof(*t->slots));
	/* Offset 0 means "empty slot", so the pool starts with a NUL. */
	if (!t->slots || pool_add(t, "", 0, false) != 0 || !t->pool) {
		mime_free(t);
		return NULL;
	}
	t->mask = 15;
	return t;
}

void mime_free(struct mime_table *t)
{
	if (!t)
		return;
	free(t->slots);
	free(t->pool);
	free(t);
}

static const char *skip_space(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
		p++;
	return p;
}

static const char *token_end(const char *p)
{
	while (*p && *p != ' ' && *p != '\t' && *p != '\r' && *p != '\n' &&
	       *p != '#')
		p++;
	return p;
}

static size_t token_len(const char *s, size_t i, size_t len)
{
	size_t k = i;

	while (k < len && http_tchar((unsigned char)s[k]))
		k++;
	return k - i;
}

/* A quoted-string at s[i] (RFC 9110 5.6.4): its length, 0 if none. */
static size_t quoted_len(const char *s, size_t i, size_t len)
{
	size_t k = i + 1;

	if (i >= len || s[i] != '"')
		return 0;
	for (; k < len; k++) {
		unsigned char c = (unsigned char)s[k];

		if (c == '"')
			return k + 1 - i;
		if (c == '\\' && k + 1 < len)
			c = (unsigned char)s[++k];
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return 0;
	}
	return 0;
}

static size_t skip_ows(const char *s, size_t i, size_t len)
{
	while (i < len && (s[i] == ' ' || s[i] == '\t'))
		i++;
	return i;
}

bool mime_type_valid(const char *s, size_t len, bool params)
{
	size_t i = token_len(s, 0, len), n;

	if (!i || i >= len || s[i] != '/')
		return false;
	n = token_len(s, ++i, len);
	if (!n)
		return false;
	for (i += n; i < len;) {
		i = skip_ows(s, i, len);
		if (!params || i >= len || s[i] != ';')
			return false;
		i = skip_ows(s, i + 1, len);
		if (i >= len || s[i] == ';')
			continue;
		n = token_len(s, i, len);
		if (!n || i + n >= len || s[i + n] != '=')
			return false;
		i += n + 1;
		n = token_len(s, i, len);
		if (!n)
			n = quoted_len(s, i, len);
		if (!n)
			return false;
		i += n;
	}
	return true;
}

/*
 * One "type ext ext..." line. Blank lines, comments and types without
 * extensions add nothing; the type is pooled only when it has one.
 */
static int parse_line(struct mime_table *t, const char *line)
{
	const char *type = skip_space(line);
	const char *type_end = token_end(type), *p, *end;
	size_t type_off = 0;

	/* Not "major/minor": a comment, a blank line or junk. */
	if (!mime_type_valid(type, (size_t)(type_end - type), false))
		return 0;
	for (p = skip_space(type_end); *p && *p != '#'; p = skip_space(end)) {
		end = token_end(p);
		if (!type_off) {
			type_off = pool_add(t, type, (size_t)(type_end - type),
					    false);
			if (!type_off)
				return -ENOMEM;
		}
		if (insert(t, p, (size_t)(end - p), type_off))
			return -ENOMEM;
	}
	return 0;
}

int mime_parse(char *text, struct mime_table **out)
{
	struct mime_table *t;
	char *line = text, *nl;
	int ret = 0;

	*out = NULL;
	t = mime_empty();
	if (!t)
		return -ENOMEM;
	for (; line; line = nl) {
		nl = strchr(line, '\n');
		if (nl)
			*nl++ = '\0';
		ret = parse_line(t, line);
		if (ret) {
			mime_free(t);
			return ret;
		}
	}
	*out = t;
	return 0;
}

const char *mime_lookup(const struct mime_table *t, const char *path,
			const char *deflt)
{
	const char *name, *dot;
	const struct mime_entry *e;

	if (!t || !path)
		return deflt;
	name = strrchr(path, '/');
	name = name ? name + 1 : path;
	dot = strrchr(name, '.');
	/* No dot, a trailing dot, or only a leading one (".profile"): no
	 * extension. */
	if (!dot || dot == name || !dot[1])
		return deflt;
	e = find_slot(t, dot + 1, strlen(dot + 1));
	return e->ext ? t->pool + e->type : deflt;
}
