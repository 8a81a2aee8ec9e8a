/* SPDX-License-Identifier: MIT */
/*
 * What the server knows about a file under its root, and the one lookup
 * that finds it out: openat2 beneath the root, then fstat. Both the
 * response planner and the stat cache stand on this; neither knows the
 * other (cache_gen is the cache's stamp, which the planner only carries).
 */
#ifndef ORCD_FILE_META_H
#define ORCD_FILE_META_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct file_meta {
	uint64_t size;
	uint64_t ino;
	uint64_t dev;
	int64_t mtime_sec;
	long mtime_nsec;
	mode_t mode;
	/* Which fill of a stat cache entry these facts are (stat_cache.c),
	 * told apart from a later fill with the same facts; 0 when looked
	 * up past any cache. */
	uint64_t cache_gen;
};

/*
 * Look up metadata of relpath under root_fd without following symlinks
 * out of the root (openat2 RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS, plus
 * resolve_extra): an O_PATH lookup, which reads nothing, and fstat. If
 * fd_out is non-NULL and a regular file was found, it is then opened
 * O_RDONLY | O_NONBLOCK | O_NOCTTY, its fd returned there and the facts
 * are the opened file's; for anything else (a directory, FIFO, device,
 * socket: never opened for reading) *fd_out is -1. Returns 0, -ENOENT,
 * -EACCES, -EXDEV (escapes the root), ... The open for reading can also
 * fail where the lookup did not (-EACCES: no read permission).
 */
int file_meta_lookup(int root_fd, const char *relpath, uint64_t resolve_extra,
		     struct file_meta *meta, int *fd_out);

/* Whether a and b describe the same version of the same file. */
static inline bool file_meta_same(const struct file_meta *a,
				  const struct file_meta *b)
{
	return a->ino == b->ino && a->dev == b->dev && a->size == b->size &&
	       a->mtime_sec == b->mtime_sec && a->mtime_nsec == b->mtime_nsec;
}

#endif
