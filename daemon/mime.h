/* SPDX-License-Identifier: MIT */
/* File-extension -> media type, from a mime.types file (Debian media-types). */
#ifndef ORCD_MIME_H
#define ORCD_MIME_H

#include <stdbool.h>
#include <stddef.h>

struct mime_table;

/*
 * Parse a mime.types file's text ("type ext1 ext2 ..." lines, '#'
 * comments; NUL-terminated, cut into lines in place). Later duplicates
 * of an extension do not override earlier ones. Returns 0 or -ENOMEM.
 */
int mime_parse(char *text, struct mime_table **out);
/* An empty table (every lookup gives the default). */
struct mime_table *mime_empty(void);
void mime_free(struct mime_table *t);

/*
 * Whether s is a media type as Content-Type carries it (RFC 9110 8.3.1):
 * type "/" subtype, tokens both, then *( OWS ";" OWS [ token "="
 * ( token / quoted-string ) ] ) when params (else nothing after it).
 */
bool mime_type_valid(const char *s, size_t len, bool params);

/*
 * Media type for the extension of the last path segment of `path`,
 * compared case-insensitively; `deflt` when none. "text/..." types get
 * no charset appended (the caller decides).
 */
const char *mime_lookup(const struct mime_table *t, const char *path,
			const char *deflt);

#endif
