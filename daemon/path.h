/* SPDX-License-Identifier: MIT */
/*
 * Request path -> path relative to the document root, and back into a
 * redirect's Location. Pure: the filesystem side (openat2
 * RESOLVE_BENEATH, symlinks) is in file_meta.c.
 */
#ifndef ORCD_PATH_H
#define ORCD_PATH_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Decode the encoded request path `raw` (query already stripped; must
 * start with '/') exactly once, and normalise it:
 *   - "%XY" decoded once ("%252e" stays "%2e" after decoding: no double
 *     decoding); a bad escape ("%g1", "%2") -> -EINVAL
 *   - decoded NUL or any control byte (< 0x20, 0x7f) -> -EINVAL
 *   - empty segments ("//") and "." segments dropped
 *   - ".." removes the previous segment; ".." above the root -> -EINVAL
 *   - a segment that starts with '.' after normalisation (dotfiles,
 *     ".git", ".well-known" included) -> -ENOENT
 * On success writes the relative path without leading or trailing slash
 * ("" for the root, "a/b.html") into out, sets *trailing_slash when the
 * decoded path ended with '/' (or was "/"), and returns 0.
 * -ENAMETOOLONG when the result does not fit in cap (incl. NUL).
 */
int path_normalize(const char *raw, size_t len, char *out, size_t cap,
		   bool *trailing_slash);

/*
 * The Location of the redirect from a directory named without its
 * trailing slash: "/" + relpath (as path_normalize() wrote it)
 * percent-encoded + "/", then "?" + query when query is not empty.
 * Built from the normalised path, never from the raw target, so it always
 * names a path on this server: exactly one leading slash ("//" would be
 * another host to a browser), no empty segment, no backslash. Every byte
 * outside unreserved, sub-delims, ':', '@' and '/' is encoded as "%XX";
 * the query keeps its valid "%XX" escapes, '/' and '?', and has the rest
 * encoded the same way.
 * Returns the length written (a NUL follows), or -ENAMETOOLONG when that
 * does not fit in cap bytes, NUL included.
 */
int path_dir_location(const char *relpath, const char *query, size_t qlen,
		      char *out, size_t cap);

#endif
