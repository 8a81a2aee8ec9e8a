// SPDX-License-Identifier: MIT
/*
 * See stat_cache.h for what may be cached and why an entry stays true.
 *
 * Entries are keyed by the root-relative path respond_plan() looks up.
 * Some entries carry no metadata: they only record that a directory on
 * the way to a cached file has its watch already, so the next file in
 * the same directory costs one add_watch (its own), not one per level.
 *
 * Any event empties the cache and replaces the inotify instance with a
 * fresh one on the same fd number (which drops every watch at once).
 * Changes to a static site come in bursts far apart, so one coarse rule
 * beats tracking which entry an event touched, and cannot get that wrong.
 */
#include "stat_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "log.h"

/* Everything that can change what an O_PATH lookup and fstat return:
 * content and size (MODIFY, CLOSE_WRITE), mode, times and link count
 * (ATTRIB), and the namespace (CREATE, DELETE, MOVED_*, *_SELF). Our own
 * opens and reads (OPEN, ACCESS, CLOSE_NOWRITE) are left out. */
#define WATCH_MASK                                                             \
	(IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM |              \
	 IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF | \
	 IN_DONT_FOLLOW)

struct sc_entry {
	struct sc_entry *next;
	uint64_t hash;
	bool has_meta;
	bool watched; /* a directory whose watch is in place */
	struct file_meta meta;
	struct sc_body *body; /* the file's bytes as of meta, or NULL */
	char key[];
};

struct stat_cache {
	unsigned max, n;
	unsigned mask; /* buckets - 1 */
	struct sc_entry **bucket;
	int ifd;    /* inotify, made with the cache; -1 if that failed */
	bool dirty; /* watches were added since ifd was made */
	struct orcd_config *cfg; /* referenced: what the entries are under */
	bool usable;		 /* cfg's root can be cached */
	bool unsynced;		 /* a batch was taken since the last sync */
	size_t data_bytes;	 /* copied into entries' bodies */
	size_t map_bytes;	 /* mapped by entries' bodies */
	unsigned map_fds;	 /* mapped files kept open by them */
	_Atomic uint64_t *ctr;
};

static void count(struct stat_cache *sc, int which)
{
	_Atomic uint64_t *c = &sc->ctr[which];

	atomic_store_explicit(c,
			      atomic_load_explicit(c, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

bool stat_cache_fs_ok(const char *fstype)
{
	static const char *const local[] = {
		"ext2",	 "ext3",   "ext4", "xfs",      "btrfs",	  "tmpfs",
		"ramfs", "rootfs", "f2fs", "squashfs", "overlay",
	};

	/* NFS, CIFS, FUSE, 9p (a QEMU guest's shared folder), ...: another
	 * machine may change them without telling us. */
	for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++)
		if (!strcmp(fstype, local[i]))
			return true;
	return false;
}

/*
 * The type of the mount fd is on, by name from /proc/self/mountinfo.
 * Not statfs(): 9p (and FUSE) pass on the f_type of the filesystem on
 * the other side, so a guest's share of a host's ext4 says ext4.
 */
int stat_cache_fstype(int fd, char *out, size_t cap)
{
	char line[4096], want[32];
	struct stat st;
	int ret = -ENOENT;
	FILE *f;

	if (fstat(fd, &st) < 0)
		return -errno;
	snprintf(want, sizeof(want), "%u:%u", major(st.st_dev),
		 minor(st.st_dev));
	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		/* id parent major:minor root mountpoint opts [tags] - type */
		char *dev, *sep, *save = NULL;

		strtok_r(line, " ", &save);
		strtok_r(NULL, " ", &save);
		dev = strtok_r(NULL, " ", &save);
		if (!dev || strcmp(dev, want))
			continue;
		sep = strstr(save ? save : "", " - ");
		if (!sep)
			continue;
		sep += 3;
		sep[strcspn(sep, " \n")] = '\0';
		snprintf(out, cap, "%s", sep);
		ret = 0; /* the last mount of the device wins, like the
			  * kernel's view of stacked mounts */
	}
	fclose(f);
	return ret;
}

struct stat_cache *stat_cache_new(struct orcd_config *cfg,
				  _Atomic uint64_t *ctr)
{
	struct stat_cache *sc = calloc(1, sizeof(*sc));
	unsigned nb = 16;

	if (!sc)
		return NULL;
	while (nb < cfg->stat_cache && nb < (1u << 20))
		nb <<= 1;
	sc->bucket = calloc(nb, sizeof(*sc->bucket));
	if (!sc->bucket) {
		free(sc);
		return NULL;
	}
	sc->mask = nb - 1;
	sc->ctr = ctr;
	sc->ifd = -1;
	stat_cache_use(sc, cfg);
	return sc;
}

static void drop_entries(struct stat_cache *sc)
{
	for (unsigned i = 0; i <= sc->mask && sc->n; i++) {
		struct sc_entry *e = sc->bucket[i];

		while (e) {
			struct sc_entry *next = e->next;

			stat_cache_body_put(e->body);
			free(e);
			sc->n--;
			e = next;
		}
		sc->bucket[i] = NULL;
	}
	sc->data_bytes = 0;
	sc->map_bytes = 0;
	sc->map_fds = 0;
}

/* A fresh inotify instance on the same fd number: every watch goes at
 * once, and the process's fd count stays what it was. */
static void reset_watches(struct stat_cache *sc)
{
	int nfd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);

	if (nfd < 0) {
		close(sc->ifd);
		sc->ifd = -1;
		return;
	}
	if (sc->ifd < 0) {
		sc->ifd = nfd;
	} else if (dup3(nfd, sc->ifd, O_CLOEXEC) < 0) {
		close(sc->ifd);
		sc->ifd = nfd;
	} else {
		close(nfd);
	}
	sc->dirty = false;
}

void stat_cache_flush(struct stat_cache *sc)
{
	if (!sc)
		return;
	drop_entries(sc);
	if (sc->dirty || (sc->ifd < 0 && sc->max))
		reset_watches(sc);
}

void stat_cache_free(struct stat_cache *sc)
{
	if (!sc)
		return;
	drop_entries(sc);
	if (sc->ifd >= 0)
		close(sc->ifd);
	if (sc->cfg)
		config_put(sc->cfg);
	free(sc->bucket);
	free(sc);
}

void stat_cache_sync(struct stat_cache *sc)
{
	char buf[4096] __attribute__((aligned(8)));
	bool changed = false;
	ssize_t r;

	if (!sc)
		return;
	sc->unsynced = false;
	if (sc->ifd < 0 || !sc->n)
		return;
	while ((r = read(sc->ifd, buf, sizeof(buf))) > 0)
		changed = true;
	if (r < 0 && errno != EAGAIN)
		changed = true; /* cannot tell: assume the worst */
	if (changed) {
		count(sc, SC_FLUSHES);
		stat_cache_flush(sc);
	}
}

void stat_cache_batch(struct stat_cache *sc)
{
	if (sc)
		sc->unsynced = true;
}

unsigned stat_cache_entries(const struct stat_cache *sc)
{
	return sc->n;
}

static uint64_t hash_of(const char *s, size_t len)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)s[i];
		h *= 1099511628211ull;
	}
	return h;
}

static struct sc_entry *find(struct stat_cache *sc, const char *key, size_t len,
			     uint64_t h)
{
	for (struct sc_entry *e = sc->bucket[h & sc->mask]; e; e = e->next)
		if (e->hash == h && !memcmp(e->key, key, len) && !e->key[len])
			return e;
	return NULL;
}

static struct sc_entry *insert(struct stat_cache *sc, const char *key,
			       size_t len, uint64_t h)
{
	struct sc_entry *e = calloc(1, sizeof(*e) + len + 1);

	if (!e)
		return NULL;
	e->hash = h;
	memcpy(e->key, key, len);
	e->key[len] = '\0';
	e->next = sc->bucket[h & sc->mask];
	sc->bucket[h & sc->mask] = e;
	sc->n++;
	return e;
}

void stat_cache_use(struct stat_cache *sc, struct orcd_config *cfg)
{
	char fstype[64] = "?";
	bool fs_ok;

	if (!sc || cfg == sc->cfg)
		return;
	/* A new configuration may have a new root: nothing carries over. */
	sc->max = cfg->stat_cache;
	stat_cache_flush(sc);
	if (sc->cfg)
		config_put(sc->cfg);
	sc->cfg = config_get(cfg);
	fs_ok = stat_cache_fstype(cfg->root_fd, fstype, sizeof(fstype)) == 0 &&
		stat_cache_fs_ok(fstype);
	sc->usable = sc->max && fs_ok;
	if (sc->max && !fs_ok)
		log_msg(LOG_INFO,
			"stat cache off for root \"%s\": its filesystem (%s) "
			"may change without inotify events",
			cfg->root, fstype);
}

/* Watch root-relative path[0, len): "" is the root itself. The watch
 * goes through /proc/self/fd, so it lands on the directory root_fd
 * holds even if the root's name was since given to another. */
static int watch(struct stat_cache *sc, const char *path, size_t len)
{
	char p[PATH_MAX + 64];
	/* The root as ".": the fd's own name is a link, which
	 * IN_DONT_FOLLOW would watch instead of the directory. */
	int n = snprintf(p, sizeof(p), "/proc/self/fd/%d/%.*s",
			 sc->cfg->root_fd, len ? (int)len : 1,
			 len ? path : ".");

	if (n < 0 || (size_t)n >= sizeof(p))
		return -ENAMETOOLONG;
	sc->dirty = true;
	if (inotify_add_watch(sc->ifd, p, WATCH_MASK) < 0)
		return -errno;
	return 0;
}

/* Watch every directory above relpath (the root included) that has no
 * watch yet. Returns 0 or -errno. */
static int watch_parents(struct stat_cache *sc, const char *relpath)
{
	size_t len = 0;

	for (;;) {
		uint64_t h = hash_of(relpath, len);
		struct sc_entry *e = find(sc, relpath, len, h);
		const char *slash;
		int err;

		if (!e || !e->watched) {
			err = watch(sc, relpath, len);
			if (err)
				return err;
			if (!e)
				e = insert(sc, relpath, len, h);
			if (!e)
				return -ENOMEM;
			e->watched = true;
		}
		slash = strchr(relpath + len + (len ? 1 : 0), '/');
		if (!slash)
			return 0;
		len = (size_t)(slash - relpath);
	}
}

static unsigned depth_of(const char *relpath)
{
	unsigned d = 1;

	for (const char *p = relpath; *p; p++)
		d += *p == '/';
	return d;
}

int stat_cache_lookup(struct stat_cache *sc, struct orcd_config *cfg,
		      const char *relpath, struct file_meta *meta)
{
	size_t len = strlen(relpath);
	struct sc_entry *e;
	uint64_t h;
	int err;

	if (!sc)
		return file_meta_lookup(cfg->root_fd, relpath, 0, meta, NULL);
	if (sc->unsynced)
		stat_cache_sync(sc);
	/* A request planned under the configuration before a reload is
	 * answered without the cache, which follows the new one. */
	if (!sc->usable || cfg != sc->cfg || sc->ifd < 0)
		goto plain;
	h = hash_of(relpath, len);
	e = find(sc, relpath, len, h);
	if (e && e->has_meta) {
		count(sc, SC_HITS);
		*meta = e->meta;
		return 0;
	}
	/* Room for the file and every directory above it, counted high. */
	if (sc->n + depth_of(relpath) + 1 > sc->max)
		goto plain;
	/* Watches first, then the lookup: a change after the watch is an
	 * event; a change before it is in what the lookup sees. */
	if (watch_parents(sc, relpath) || (len && watch(sc, relpath, len)))
		goto plain;
	err = file_meta_lookup(cfg->root_fd, relpath,
			       RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV, meta,
			       NULL);
	if (err == -ELOOP || err == -EXDEV)
		goto plain; /* a symlink or mount on the way: not ours */
	if (err) {
		count(sc, SC_BYPASS);
		return err;
	}
	e = find(sc, relpath, len, h);
	if (!e)
		e = insert(sc, relpath, len, h);
	if (!e) {
		count(sc, SC_BYPASS);
		return 0;
	}
	e->meta = *meta;
	e->has_meta = true;
	/* The root's own watch was set by watch_parents(). */
	if (len && S_ISDIR(meta->mode))
		e->watched = true;
	count(sc, SC_MISSES);
	return 0;
plain:
	count(sc, SC_BYPASS);
	return file_meta_lookup(cfg->root_fd, relpath, 0, meta, NULL);
}

/* Same file, same version: what a response's head was rendered from. */
static bool same_version(const struct file_meta *a, const struct file_meta *b)
{
	return a->ino == b->ino && a->dev == b->dev && a->size == b->size &&
	       a->mtime_sec == b->mtime_sec && a->mtime_nsec == b->mtime_nsec;
}

static struct sc_entry *entry_of(struct stat_cache *sc,
				 const struct orcd_config *cfg,
				 const char *relpath,
				 const struct file_meta *meta)
{
	size_t len = strlen(relpath);
	struct sc_entry *e;

	if (!sc || !sc->usable || cfg != sc->cfg)
		return NULL;
	e = find(sc, relpath, len, hash_of(relpath, len));
	if (!e || !e->has_meta || !same_version(&e->meta, meta))
		return NULL;
	return e;
}

struct sc_body *stat_cache_body(struct stat_cache *sc,
				const struct orcd_config *cfg,
				const char *relpath,
				const struct file_meta *meta)
{
	struct sc_entry *e = entry_of(sc, cfg, relpath, meta);

	if (!e || !e->body)
		return NULL;
	count(sc, SC_DATA_HITS);
	e->body->refs++;
	return e->body;
}

void stat_cache_body_put(struct sc_body *b)
{
	if (!b || --b->refs)
		return;
	if (b->mapped)
		munmap(b->data, b->len);
	if (b->fd >= 0)
		close(b->fd);
	free(b);
}

/* The entry that may take a body for this version: its facts still the
 * plan's after reading pending change events. */
static struct sc_entry *entry_for_body(struct stat_cache *sc,
				       const struct orcd_config *cfg,
				       const char *relpath,
				       const struct file_meta *meta)
{
	struct sc_entry *e;

	/* Any change since the lookup has queued its event by now (it
	 * completed before our read returned, or our read saw none of it):
	 * read them first, so that only a version still current is kept. */
	stat_cache_sync(sc);
	e = entry_of(sc, cfg, relpath, meta);
	return e && !e->body ? e : NULL;
}

void stat_cache_keep_data(struct stat_cache *sc, const struct orcd_config *cfg,
			  const char *relpath, const struct file_meta *meta,
			  const char *data, size_t len)
{
	struct sc_entry *e;
	struct sc_body *b;

	if (!sc || len != meta->size || !len || len > STAT_CACHE_DATA_FILE ||
	    sc->data_bytes + len > STAT_CACHE_DATA_TOTAL)
		return;
	e = entry_for_body(sc, cfg, relpath, meta);
	if (!e || !(b = malloc(sizeof(*b) + len)))
		return;
	b->refs = 1;
	b->len = len;
	b->mapped = false;
	b->fd = -1;
	b->data = (char *)(b + 1);
	memcpy(b->data, data, len);
	e->body = b;
	sc->data_bytes += len;
}

void stat_cache_keep_map(struct stat_cache *sc, const struct orcd_config *cfg,
			 const char *relpath, const struct file_meta *meta)
{
	struct file_meta now;
	struct sc_entry *e;
	struct sc_body *b;
	void *map;
	int fd;

	if (!sc || meta->size <= STAT_CACHE_DATA_FILE ||
	    meta->size > STAT_CACHE_MAP_FILE ||
	    sc->map_bytes + meta->size > STAT_CACHE_MAP_TOTAL)
		return;
	e = entry_for_body(sc, cfg, relpath, meta);
	if (!e)
		return;
	/* The same walk beneath the root as every lookup; the mapping is of
	 * the version the facts describe, or none. */
	if (file_meta_lookup(cfg->root_fd, relpath, 0, &now, &fd))
		return;
	map = same_version(&now, meta) ?
		      mmap(NULL, meta->size, PROT_READ, MAP_SHARED, fd, 0) :
		      MAP_FAILED;
	b = map == MAP_FAILED ? NULL : malloc(sizeof(*b));
	if (!b) {
		if (map != MAP_FAILED)
			munmap(map, meta->size);
		close(fd);
		return;
	}
	if (sc->map_fds < STAT_CACHE_MAP_FDS) {
		sc->map_fds++;
	} else {
		close(fd);
		fd = -1;
	}
	b->refs = 1;
	b->len = meta->size;
	b->mapped = true;
	b->fd = fd;
	b->data = map;
	e->body = b;
	sc->map_bytes += meta->size;
}

bool stat_cache_active(const struct stat_cache *sc)
{
	return sc && sc->usable && sc->ifd >= 0;
}
