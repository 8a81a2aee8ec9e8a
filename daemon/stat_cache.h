/* SPDX-License-Identifier: MIT */
/*
 * A worker's cache of metadata lookups (file_meta_lookup() without an fd),
 * so that a request for a file seen before costs no system call before
 * its body. Every engine uses it (epoll's batch is a turn of its loop).
 *
 * Validity comes from inotify, never from time: before a lookup is done
 * for the cache, every directory on the path and the file itself get a
 * watch, and the first lookup after each batch of completions was taken
 * from the ring (stat_cache_batch()) reads the inotify fd and forgets
 * what the events it finds name: the entry of a changed file, everything
 * beneath a changed or moved directory, a missing path once its name
 * (or that of the first missing directory on its way) is created, all
 * of it when events were lost. A change that has completed before a
 * request's bytes were received therefore always reaches the cache
 * before that request is planned: the event is queued inside the system
 * call that made the change, on a watch that was in place before the
 * entry's lookup (a change before the watch is in what the lookup
 * saw), the request's completion is posted later, and the read comes
 * after that completion was taken. Batches that plan nothing
 * (completions of sends and closes) cost no read, and an engine that
 * can prove no event is queued (a ring's poll on the inotify fd,
 * stat_cache_notify_fd()) does not mark the batch at all.
 *
 * Only what inotify can vouch for is cached: facts and the answers
 * ENOENT and ENOTDIR, for paths with no symlink and no mount point in them (the lookup is repeated with RESOLVE_NO_SYMLINKS
 * | RESOLVE_NO_XDEV; anything that fails it is looked up plainly, every
 * time), under a root on a local filesystem (a network or 9p filesystem
 * changed by another machine reports nothing here). The chain's own open
 * stays the authority: a stale entry can only cost a replan, which goes
 * around the cache.
 */
#ifndef ORCD_STAT_CACHE_H
#define ORCD_STAT_CACHE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "file_meta.h"

struct stat_cache;

/* Counters, in an array the caller owns (the worker's /metrics ones);
 * only the cache's own thread writes them. */
enum {
	SC_HITS,	/* answered from the cache (a missing file too) */
	SC_MISSES,	/* looked up and entered */
	SC_BYPASS,	/* looked up, not cacheable (or off) */
	SC_FLUSHES,	/* lost events (or a failed read) that emptied it */
	SC_DATA_HITS,	/* bodies answered from kept file contents */
	SC_EVICTIONS,	/* entries dropped to make room */
	SC_INVALIDATED, /* entries whose facts a change event dropped */
	SC_ENTRIES,	/* gauge: entries held (stat_cache_entries()) */
	SC_WATCHES,	/* gauge: inotify watches held */
	SC_NCOUNTERS,
};

/*
 * A cache for lookups under cfg's root, of at most cfg->stat_cache entries
 * (directories on the way included; the least recently used go first
 * when a new one needs room; 0: off, every lookup is counted as a
 * bypass). ctr points to
 * SC_NCOUNTERS counters. NULL: ENOMEM.
 */
struct stat_cache *stat_cache_new(struct orcd_config *cfg,
				  _Atomic uint64_t *ctr);

/*
 * Follow a new configuration (a reload): forget everything, hold cfg
 * instead of the old one. Lookups made with any other cfg bypass the
 * cache.
 */
void stat_cache_use(struct stat_cache *sc, struct orcd_config *cfg);
/* At most n mapped files kept open (STAT_CACHE_MAP_FDS unless an engine
 * whose sockets are fds too needs the rest: epoll under a low
 * RLIMIT_NOFILE). Files past it are still mapped, not kept open. */
void stat_cache_limit_fds(struct stat_cache *sc, unsigned n);
void stat_cache_free(struct stat_cache *sc);

/*
 * Like file_meta_lookup(cfg->root_fd, relpath, 0, meta, NULL), answered from
 * the cache when it can be. sc may be NULL (no cache).
 */
int stat_cache_lookup(struct stat_cache *sc, struct orcd_config *cfg,
		      const char *relpath, struct file_meta *meta);

/*
 * Read pending change events and forget what they name (everything
 * when events were lost). Costs one read() when entries exist, nothing
 * otherwise.
 */
void stat_cache_sync(struct stat_cache *sc);

/*
 * Whether relpath, whose facts a lookup just gave as meta, opens for
 * reading (0 or -errno as that open fails), as the open of a GET's chain
 * would find out: a HEAD has no chain. Answered from the entry when it
 * is known (permissions change only with an IN_ATTRIB of the file or of
 * a directory on the way, which forgets it), else by an open and a
 * close, which refresh meta.
 */
int stat_cache_readable(struct stat_cache *sc, struct orcd_config *cfg,
			const char *relpath, struct file_meta *meta);

/*
 * A batch of completions was just taken from the ring: the next lookup
 * runs stat_cache_sync() first. No system call here.
 */
void stat_cache_batch(struct stat_cache *sc);

/*
 * The inotify fd (-1: none), for an engine that polls it instead of
 * calling stat_cache_batch() after every batch: readable means a change
 * may be unread. *gen changes whenever the fd number comes to name a new
 * instance (a flush after lost events, a reload); a poll armed on an
 * older one sees nothing of the new one and must be armed again.
 */
int stat_cache_notify_fd(const struct stat_cache *sc, unsigned *gen);

/*
 * Mounts raise no inotify event: a directory mounted over (a release
 * switched by a bind mount, an image mounted under the root) or
 * uncovered would keep its old facts and bodies. The cache holds
 * /proc/self/mountinfo open (-1: none, and the cache stays off), which
 * polls POLLPRI once the process's mount table changed since the last
 * poll of that fd, and every sync polls it with the inotify fd (one
 * call): at a change it reads the table and drops what it holds at or
 * beneath each mount point under the root (lookups never cross one, so
 * all of that predates the mount). An engine that polls the inotify
 * fd instead of syncing after every batch polls this one too, for
 * POLLPRI, and calls stat_cache_mounts_changed() when it fires (its poll
 * may be the one that saw the change).
 */
int stat_cache_mounts_fd(const struct stat_cache *sc);
void stat_cache_mounts_changed(struct stat_cache *sc);

/*
 * Files' bytes, kept beside their facts and as true as they are, so that
 * a hot request is sends alone, with no open, read or close:
 * - a whole file of at most STAT_CACHE_DATA_FILE bytes is copied when a
 *   transfer has just read it, or read again once a transfer that read it
 *   in pieces has sent it (at most STAT_CACHE_DATA_TOTAL per worker);
 * - a larger one (up to STAT_CACHE_MAP_FILE) is mapped once a transfer
 *   has sent it (at most STAT_CACHE_MAP_TOTAL of address space), and the
 *   kernel sends from the page cache: one copy where read-and-send made
 *   two. The first STAT_CACHE_MAP_FDS of them also stay open, so that a
 *   transport with a real socket fd can sendfile() them: no copy at all.
 * Either is kept only while the cache still holds the plan's facts, from
 * the same fill (file_meta's cache_gen: equal facts found again after an
 * event are not the same), after reading pending change events; an event
 * that drops the entry's facts
 * (or its eviction) drops them too. A body is shared: sends in flight hold a reference, so a flush
 * never pulls bytes from under one.
 */
#define STAT_CACHE_DATA_FILE  (64u * 1024)
#define STAT_CACHE_DATA_TOTAL (32u * 1024 * 1024)
#define STAT_CACHE_MAP_FILE   (1ull << 30)
#define STAT_CACHE_MAP_TOTAL  (4ull << 30)
#define STAT_CACHE_MAP_FDS    256u

struct sc_body {
	unsigned refs;
	bool mapped;
	int fd; /* a mapped file kept open, or -1 */
	size_t len;
	char *data;
};

/* relpath's bytes as of meta, with a reference the caller puts; NULL
 * when not kept. */
struct sc_body *stat_cache_body(struct stat_cache *sc,
				const struct orcd_config *cfg,
				const char *relpath,
				const struct file_meta *meta);
void stat_cache_body_put(struct sc_body *b);
/* Keep data (len bytes, the whole file) for relpath as of meta. */
void stat_cache_keep_data(struct stat_cache *sc, const struct orcd_config *cfg,
			  const char *relpath, const struct file_meta *meta,
			  const char *data, size_t len);
/* Keep relpath's bytes as of meta, read from fd (open on that version;
 * a write racing the read queues an event that drops them). */
void stat_cache_keep_read(struct stat_cache *sc, const struct orcd_config *cfg,
			  const char *relpath, const struct file_meta *meta,
			  int fd);
/* Map relpath's file as of meta (a large one a transfer just sent); one
 * of at most STAT_CACHE_DATA_FILE bytes, which a transfer read in more
 * than one piece, is read into kept bytes instead. */
void stat_cache_keep_map(struct stat_cache *sc, const struct orcd_config *cfg,
			 const char *relpath, const struct file_meta *meta);

/* Whether lookups under cfg (the cache's) can be answered from it: on,
 * and the root on a filesystem inotify vouches for. */
bool stat_cache_active(const struct stat_cache *sc);

/* Forget everything (and drop the watches). */
void stat_cache_flush(struct stat_cache *sc);

/* Forget relpath's facts and everything beneath it (a transfer found
 * them wrong; the change's own event would do it at the next sync). */
void stat_cache_forget(struct stat_cache *sc, const char *relpath);

/* The three above with the cache as a void *ctx: the planner's lookup
 * (struct respond_lookup's fn and readable) and the core's
 * lookup_forget, as every engine wires them. */
int stat_cache_lookup_cb(void *ctx, struct orcd_config *cfg,
			 const char *relpath, struct file_meta *meta);
int stat_cache_readable_cb(void *ctx, struct orcd_config *cfg,
			   const char *relpath, struct file_meta *meta);
void stat_cache_forget_cb(void *ctx, const char *relpath);

/* Entries held now (directories that only carry a watch included). */
unsigned stat_cache_entries(const struct stat_cache *sc);
/* inotify watches held now: one per directory and file looked up (a
 * file under two cached names holds one). */
unsigned stat_cache_watches(const struct stat_cache *sc);
/* Hash buckets now: sized for the entries the configuration allows. */
unsigned stat_cache_buckets(const struct stat_cache *sc);

/* Whether a filesystem of this type (as /proc/self/mountinfo names it)
 * reports every change to inotify on this machine (local filesystems). */
bool stat_cache_fs_ok(const char *fstype);

/* The type of the filesystem fd is on, from /proc/self/mountinfo (not
 * statfs, which 9p and FUSE fill with the far side's type). 0 or -errno. */
int stat_cache_fstype(int fd, char *out, size_t cap);

#endif
