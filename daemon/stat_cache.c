// SPDX-License-Identifier: MIT
/*
 * See stat_cache.h for what may be cached and why an entry stays true.
 *
 * Entries are keyed by the root-relative path respond_plan() looks up,
 * and form a tree: every entry's parent is the entry of the path one
 * component shorter, up to the root (""). An entry may hold an inotify
 * watch on what its path named when the watch was added (directories on
 * the way and looked-up files hold one; an entry that records a missing
 * path holds none), and it may carry facts: metadata, or a lookup error
 * that inotify can vouch for (ENOENT, ENOTDIR), or a mark that the path
 * is not ours to cache (a symlink or a mount on the way).
 *
 * An event names a watch, and through it every entry holding it (a file
 * with two cached names has two), perhaps with a child's name:
 * - a change of a child's name (created, deleted, moved in or out) drops
 *   the child's entry and everything beneath it, and the facts of the
 *   directory itself (its times changed);
 * - a change of contents or attributes, of the watched thing or of a
 *   named child, forgets that entry's facts and everything beneath it
 *   (a directory's mode decides every lookup through it), but keeps the
 *   entry and its watch: the same inode is still there;
 * - the watched thing deleted, moved, or its watch gone (IN_IGNORED)
 *   drops the entries that hold it, with everything beneath them;
 * - a lost event (IN_Q_OVERFLOW) or a failed read empties the cache.
 * A watch whose last entry is dropped is removed. Watch descriptors are
 * handed out cyclically by the kernel, so an event still queued for a
 * removed one cannot name a newer watch.
 *
 * The entry count (directories included) is bounded by cfg->stat_cache:
 * a miss that needs room evicts the least recently used entries that
 * have no entries beneath them.
 */
#include "stat_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "log.h"
#include "mono.h"

/* Everything that can change what an O_PATH lookup and fstat return:
 * content and size (MODIFY, CLOSE_WRITE), mode, times and link count
 * (ATTRIB), and the namespace (CREATE, DELETE, MOVED_*, *_SELF). Our own
 * opens and reads (OPEN, ACCESS, CLOSE_NOWRITE) are left out. */
#define WATCH_MASK                                                             \
	(IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM |              \
	 IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF | \
	 IN_DONT_FOLLOW)
/* Events on a directory that change which names it holds. */
#define NAME_EVENTS (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO)
/* Events after which the watch no longer follows the path. */
#define GONE_EVENTS (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT)

struct sc_watch {
	struct sc_watch *next; /* in its wd bucket */
	struct sc_entry *holders;
	int wd;
	bool dead; /* the kernel removed it (IN_IGNORED) */
};

struct sc_entry {
	struct sc_entry *next; /* in its hash bucket */
	struct sc_entry *parent, *child, *sib_prev, *sib_next;
	struct sc_entry *lru_prev, *lru_next; /* leaves only */
	struct sc_watch *watch;		      /* held, or NULL */
	struct sc_entry *w_prev, *w_next;     /* holders of watch */
	uint64_t hash;
	bool has_meta;
	bool plain;	 /* not cacheable: every lookup goes to the fs */
	bool read_known; /* read_err says whether it opens for reading */
	int err;	 /* a cached failed lookup (-ENOENT, -ENOTDIR) */
	int read_err;
	uint64_t stamp; /* the last event that handled it */
	struct file_meta meta;
	struct sc_body *body; /* the file's bytes as of meta, or NULL */
	size_t len;
	char key[];
};

struct stat_cache {
	unsigned max, n, n_watches;
	uint64_t stamp; /* events handled */
	uint64_t fills; /* entries' facts set: their cache_gen */
	unsigned mask;	/* buckets - 1 */
	struct sc_entry **bucket;
	struct sc_watch **wbucket;	      /* by wd, mask + 1 of them */
	struct sc_entry *lru_head, *lru_tail; /* most, least recent */
	int ifd;	  /* inotify, made with the cache; -1 if that failed */
	unsigned ifd_gen; /* bumped whenever ifd names a new instance */
	int mfd;	  /* /proc/self/mountinfo: POLLPRI once mounts change */
	bool ignore_mounts; /* test knob: keep facts a mount made stale */
	bool dirty;	  /* watches were added since ifd was made */
	struct orcd_config *cfg; /* referenced: what the entries are under */
	bool usable;		 /* cfg's root can be cached */
	bool unsynced;		 /* a batch was taken since the last sync */
	size_t data_bytes;	 /* copied into entries' bodies */
	size_t map_bytes;	 /* mapped by entries' bodies */
	unsigned map_fds;	 /* mapped files kept open by them */
	unsigned map_fds_max;	 /* at most (stat_cache_limit_fds) */
	/* The watch limit was reached: lookups stay plain until then, not
	 * each one trying (and failing) to add a watch. */
	int64_t watch_full_until_ms;
	bool said_no_inotify, said_watch_full; /* each said once */
	_Atomic uint64_t *ctr;
};

/* A full watch table is tried again after this long. */
#define WATCH_FULL_MS 1000

static void count_by(struct stat_cache *sc, int which, uint64_t n)
{
	_Atomic uint64_t *c = &sc->ctr[which];

	atomic_store_explicit(c,
			      atomic_load_explicit(c, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

static void count(struct stat_cache *sc, int which)
{
	count_by(sc, which, 1);
}

static void gauges(struct stat_cache *sc)
{
	atomic_store_explicit(&sc->ctr[SC_ENTRIES], sc->n,
			      memory_order_relaxed);
	atomic_store_explicit(&sc->ctr[SC_WATCHES], sc->n_watches,
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

/* Buckets for max entries (a power of two, 16 to 2^20), for an empty
 * cache: at start and when a reload has emptied it. -ENOMEM keeps the
 * ones it has. */
static int size_buckets(struct stat_cache *sc, unsigned max)
{
	unsigned nb = 16;
	struct sc_entry **b;
	struct sc_watch **wb;

	while (nb < max && nb < (1u << 20))
		nb <<= 1;
	if (sc->bucket && nb == sc->mask + 1)
		return 0;
	b = calloc(nb, sizeof(*b));
	wb = calloc(nb, sizeof(*wb));
	if (!b || !wb) {
		free(b);
		free(wb);
		return -ENOMEM;
	}
	free(sc->bucket);
	free(sc->wbucket);
	sc->bucket = b;
	sc->wbucket = wb;
	sc->mask = nb - 1;
	return 0;
}

struct stat_cache *stat_cache_new(struct orcd_config *cfg,
				  _Atomic uint64_t *ctr)
{
	struct stat_cache *sc = calloc(1, sizeof(*sc));

	if (!sc)
		return NULL;
	if (size_buckets(sc, cfg->stat_cache)) {
		free(sc);
		return NULL;
	}
	sc->ctr = ctr;
	sc->ifd = -1;
	/* Before any entry: a mount made after this open is news to it. */
	sc->mfd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	if (sc->mfd < 0 && cfg->stat_cache)
		log_msg(LOG_WARNING,
			"stat cache off: /proc/self/mountinfo: %s (a mount "
			"under the root would go unseen)",
			strerror(errno));
	/* ORCD_TEST_IGNORE_MOUNTS: tests of the chain's own defences
	 * against facts gone stale (a FIFO mounted over a file). */
	sc->ignore_mounts = getenv("ORCD_TEST_IGNORE_MOUNTS") != NULL;
	sc->map_fds_max = STAT_CACHE_MAP_FDS;
	stat_cache_use(sc, cfg);
	return sc;
}

/* The least recently used list holds the entries with nothing beneath
 * them, the only ones eviction may take. */
static void lru_unlink(struct stat_cache *sc, struct sc_entry *e)
{
	if (e->lru_prev)
		e->lru_prev->lru_next = e->lru_next;
	else if (sc->lru_head == e)
		sc->lru_head = e->lru_next;
	else
		return; /* not in the list */
	if (e->lru_next)
		e->lru_next->lru_prev = e->lru_prev;
	else
		sc->lru_tail = e->lru_prev;
	e->lru_prev = e->lru_next = NULL;
}

static void lru_push(struct stat_cache *sc, struct sc_entry *e, bool hot)
{
	if (hot) {
		e->lru_next = sc->lru_head;
		if (sc->lru_head)
			sc->lru_head->lru_prev = e;
		else
			sc->lru_tail = e;
		sc->lru_head = e;
	} else {
		e->lru_prev = sc->lru_tail;
		if (sc->lru_tail)
			sc->lru_tail->lru_next = e;
		else
			sc->lru_head = e;
		sc->lru_tail = e;
	}
}

static void lru_touch(struct stat_cache *sc, struct sc_entry *e)
{
	if (sc->lru_head == e || (!e->lru_prev && !e->lru_next))
		return; /* first already, or not a leaf */
	lru_unlink(sc, e);
	lru_push(sc, e, true);
}

static struct sc_watch **wslot(struct stat_cache *sc, int wd)
{
	return &sc->wbucket[(unsigned)wd & sc->mask];
}

static struct sc_watch *watch_find(struct stat_cache *sc, int wd)
{
	struct sc_watch *w = *wslot(sc, wd);

	while (w && w->wd != wd)
		w = w->next;
	return w;
}

/* e stops holding its watch; the last holder removes it. */
static void watch_release(struct stat_cache *sc, struct sc_entry *e)
{
	struct sc_watch *w = e->watch, **pp;

	if (!w)
		return;
	if (e->w_prev)
		e->w_prev->w_next = e->w_next;
	else
		w->holders = e->w_next;
	if (e->w_next)
		e->w_next->w_prev = e->w_prev;
	e->watch = NULL;
	e->w_prev = e->w_next = NULL;
	if (w->holders)
		return;
	if (!w->dead && sc->ifd >= 0)
		inotify_rm_watch(sc->ifd, w->wd);
	for (pp = wslot(sc, w->wd); *pp != w; pp = &(*pp)->next)
		;
	*pp = w->next;
	free(w);
	sc->n_watches--;
	gauges(sc);
}

/* Whether name under dir is a mount's root (a mount point). */
static bool mount_root(int dir, const char *name)
{
	struct statx stx;

	return statx(dir, name,
		     AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT |
			     AT_STATX_DONT_SYNC,
		     0, &stx) == 0 &&
	       (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
	       (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

/* Watch what root-relative e->key names now, for e. The watch goes
 * through /proc/self/fd, so it lands on the directory root_fd holds even
 * if the root's name was since given to another. The directory holding
 * the name is opened first, beneath the root and through no symlink: a
 * path through one (even "out -> /etc") is never cached, and its watch
 * must not land on an inode outside the root. Nor through a mount
 * (-EXDEV, as for the lookups), and the name itself may not be one: a
 * watch there would be on the mounted tree, blind to the directory an
 * unmount uncovers (no table read would name it again). 0 or -errno. */
static int watch_take(struct stat_cache *sc, struct sc_entry *e)
{
	char p[PATH_MAX + 64];
	struct sc_watch *w;
	const char *slash = e->len ? memrchr(e->key, '/', e->len) : NULL;
	const char *name = !e->len ? "." : slash ? slash + 1 : e->key;
	int dir = sc->cfg->root_fd, n, wd;

	if (slash) {
		struct open_how how = {
			.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
			.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
				   RESOLVE_NO_XDEV,
		};
		char up[PATH_MAX];

		memcpy(up, e->key, (size_t)(slash - e->key));
		up[slash - e->key] = '\0';
		dir = (int)syscall(SYS_openat2, sc->cfg->root_fd, up, &how,
				   sizeof(how));
		if (dir < 0)
			return -errno;
	}
	/* The root as ".": the fd's own name is a link, which
	 * IN_DONT_FOLLOW would watch instead of the directory. The root
	 * itself may well be a mount's root. */
	n = snprintf(p, sizeof(p), "/proc/self/fd/%d/%s", dir, name);
	sc->dirty = true;
	if (n < 0 || (size_t)n >= sizeof(p))
		wd = -ENAMETOOLONG;
	else if (e->len && mount_root(dir, name))
		wd = -EXDEV;
	else if ((wd = inotify_add_watch(sc->ifd, p, WATCH_MASK)) < 0)
		wd = -errno;
	if (slash)
		close(dir);
	if (wd == -ENOSPC) {
		sc->watch_full_until_ms = mono_ms() + WATCH_FULL_MS;
		if (!sc->said_watch_full)
			log_msg(LOG_WARNING,
				"stat cache: the inotify watch limit is reached (%u watches held; sysctl fs.inotify.max_user_watches): files beyond them are looked up on every request",
				sc->n_watches);
		sc->said_watch_full = true;
	}
	if (wd < 0)
		return wd;
	w = watch_find(sc, wd); /* the inode is watched already */
	if (!w) {
		w = calloc(1, sizeof(*w));
		if (!w) {
			inotify_rm_watch(sc->ifd, wd);
			return -ENOMEM;
		}
		w->wd = wd;
		w->next = *wslot(sc, wd);
		*wslot(sc, wd) = w;
		sc->n_watches++;
		gauges(sc);
	}
	e->watch = w;
	e->w_next = w->holders;
	if (w->holders)
		w->holders->w_prev = e;
	w->holders = e;
	return 0;
}

static void body_drop(struct stat_cache *sc, struct sc_entry *e)
{
	struct sc_body *b = e->body;

	if (!b)
		return;
	if (!b->mapped)
		sc->data_bytes -= b->len;
	else
		sc->map_bytes -= b->len;
	if (b->fd >= 0)
		sc->map_fds--;
	e->body = NULL;
	stat_cache_body_put(b); /* a send in flight may hold it on */
}

static bool has_facts(const struct sc_entry *e)
{
	return e->has_meta || e->err || e->plain;
}

static void facts_drop(struct stat_cache *sc, struct sc_entry *e)
{
	e->has_meta = false;
	e->plain = false;
	e->read_known = false;
	e->err = 0;
	body_drop(sc, e);
}

/* Drop e, which has nothing beneath it. */
static void drop_one(struct stat_cache *sc, struct sc_entry *e)
{
	struct sc_entry **pp = &sc->bucket[e->hash & sc->mask];
	struct sc_entry *p = e->parent;

	while (*pp != e)
		pp = &(*pp)->next;
	*pp = e->next;
	lru_unlink(sc, e);
	if (p) {
		if (e->sib_prev)
			e->sib_prev->sib_next = e->sib_next;
		else
			p->child = e->sib_next;
		if (e->sib_next)
			e->sib_next->sib_prev = e->sib_prev;
		if (!p->child)
			lru_push(sc, p, false); /* a leaf now, and cold */
	}
	watch_release(sc, e);
	body_drop(sc, e);
	free(e);
	sc->n--;
	gauges(sc);
}

/* Drop e and everything beneath it; returns how many entries went. */
static unsigned drop_tree(struct stat_cache *sc, struct sc_entry *e)
{
	struct sc_entry *cur = e;
	unsigned n = 0;

	for (;;) {
		struct sc_entry *up;

		while (cur->child)
			cur = cur->child;
		up = cur->parent;
		drop_one(sc, cur);
		n++;
		if (cur == e)
			return n;
		cur = up;
	}
}

/* Forget e's facts and everything beneath it. An entry that holds a
 * watch stays, since what it watches is still at its path; one that
 * holds none has nothing left to keep. */
static unsigned forget(struct stat_cache *sc, struct sc_entry *e)
{
	unsigned n = 0;

	if (!e->watch)
		return drop_tree(sc, e);
	while (e->child)
		n += drop_tree(sc, e->child);
	if (has_facts(e))
		n++;
	facts_drop(sc, e);
	return n;
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
	for (unsigned i = 0; i <= sc->mask && sc->n_watches; i++) {
		struct sc_watch *w = sc->wbucket[i];

		while (w) {
			struct sc_watch *next = w->next;

			free(w);
			sc->n_watches--;
			w = next;
		}
		sc->wbucket[i] = NULL;
	}
	sc->lru_head = sc->lru_tail = NULL;
	sc->data_bytes = 0;
	sc->map_bytes = 0;
	sc->map_fds = 0;
	gauges(sc);
}

/*
 * No fresh instance to be had (fs.inotify.max_user_instances, or no fd
 * left): empty the one there is, a watch at a time, and read out what
 * it queued. An event a removed watch posts later names a wd no watch
 * has (the kernel hands wds out cyclically, so they are not soon used
 * again), which apply() passes by. False where the instance cannot be
 * read.
 */
static bool empty_instance(struct stat_cache *sc)
{
	char buf[4096] __attribute__((aligned(8)));

	for (unsigned i = 0; i <= sc->mask; i++)
		for (struct sc_watch *w = sc->wbucket[i]; w; w = w->next)
			if (!w->dead)
				inotify_rm_watch(sc->ifd, w->wd);
	while (read(sc->ifd, buf, sizeof(buf)) > 0)
		;
	return errno == EAGAIN;
}

/* A fresh inotify instance on the same fd number: every watch goes at
 * once, and the process's fd count stays what it was. Before the
 * entries and their watches are dropped. */
static void reset_watches(struct stat_cache *sc)
{
	int nfd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	int err = errno;

	sc->ifd_gen++; /* a poll on it arms again: a new instance, or emptied */

	if (nfd < 0 && sc->ifd >= 0 && empty_instance(sc)) {
		sc->dirty = false;
		return;
	}
	if (nfd < 0) {
		errno = err;
		if (!sc->said_no_inotify)
			log_msg(LOG_WARNING,
				"stat cache off: no inotify instance: %s (sysctl fs.inotify.max_user_instances); every lookup goes to the file system",
				strerror(errno));
		sc->said_no_inotify = true;
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
	if (sc->dirty || (sc->ifd < 0 && sc->max))
		reset_watches(sc);
	drop_entries(sc);
}

void stat_cache_free(struct stat_cache *sc)
{
	if (!sc)
		return;
	drop_entries(sc);
	if (sc->ifd >= 0)
		close(sc->ifd);
	if (sc->mfd >= 0)
		close(sc->mfd);
	if (sc->cfg)
		config_put(sc->cfg);
	free(sc->bucket);
	free(sc->wbucket);
	free(sc);
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
		if (e->hash == h && e->len == len && !memcmp(e->key, key, len))
			return e;
	return NULL;
}

/* A new entry for key[0, len), beneath parent (NULL for the root). */
static struct sc_entry *insert(struct stat_cache *sc, const char *key,
			       size_t len, uint64_t h, struct sc_entry *parent)
{
	struct sc_entry *e = calloc(1, sizeof(*e) + len + 1);

	if (!e)
		return NULL;
	e->hash = h;
	e->len = len;
	memcpy(e->key, key, len);
	e->key[len] = '\0';
	e->next = sc->bucket[h & sc->mask];
	sc->bucket[h & sc->mask] = e;
	e->parent = parent;
	if (parent) {
		if (!parent->child)
			lru_unlink(sc, parent); /* no longer a leaf */
		e->sib_next = parent->child;
		if (parent->child)
			parent->child->sib_prev = e;
		parent->child = e;
	}
	lru_push(sc, e, true);
	sc->n++;
	gauges(sc);
	return e;
}

/* One event, for every entry holding its watch. Returns entries whose
 * facts went. */
/* The next holder of watch wd not yet handled for this event (stamp).
 * Looked for afresh each time: handling one may drop others, or the
 * watch (a bind mount can show a directory beneath itself). */
static struct sc_entry *next_holder(struct stat_cache *sc, int wd,
				    uint64_t stamp)
{
	struct sc_watch *w = watch_find(sc, wd);

	for (struct sc_entry *e = w ? w->holders : NULL; e; e = e->w_next)
		if (e->stamp != stamp) {
			e->stamp = stamp;
			return e;
		}
	return NULL;
}

static unsigned apply(struct stat_cache *sc, const struct inotify_event *ev)
{
	struct sc_watch *w = watch_find(sc, ev->wd);
	uint64_t stamp = ++sc->stamp;
	unsigned n = 0;
	struct sc_entry *e, *d;
	char key[PATH_MAX];

	if (!w)
		return 0; /* a watch already removed */
	if (ev->mask & IN_IGNORED)
		w->dead = true;
	if (!ev->len) {
		if (ev->mask & GONE_EVENTS) {
			/* Each turn drops a holder; the last frees w. */
			while ((w = watch_find(sc, ev->wd)))
				n += drop_tree(sc, w->holders);
			return n;
		}
		while ((e = next_holder(sc, ev->wd, stamp)))
			n += forget(sc, e);
		return n;
	}
	while ((d = next_holder(sc, ev->wd, stamp))) {
		size_t nl = strlen(ev->name);
		size_t kl = d->len + (d->len ? 1 : 0) + nl;
		struct sc_entry *c;

		if (kl >= sizeof(key))
			continue; /* longer than any key */
		memcpy(key, d->key, d->len);
		if (d->len)
			key[d->len] = '/';
		memcpy(key + kl - nl, ev->name, nl);
		c = find(sc, key, kl, hash_of(key, kl));
		if (ev->mask & NAME_EVENTS) {
			if (c)
				n += drop_tree(sc, c);
			if (d->has_meta)
				n++;
			d->has_meta = false; /* its times changed */
		} else if (c) {
			n += forget(sc, c);
		}
	}
	return n;
}

int stat_cache_mounts_fd(const struct stat_cache *sc)
{
	return sc ? sc->mfd : -1;
}

/* The whole of /proc/self/mountinfo, NUL-terminated, or NULL. */
static char *read_mountinfo(int fd, size_t *len)
{
	size_t n = 0, cap = 16384;
	char *buf = malloc(cap), *nb;
	ssize_t r;

	if (!buf || lseek(fd, 0, SEEK_SET) < 0) {
		free(buf);
		return NULL;
	}
	while ((r = read(fd, buf + n, cap - n - 1)) > 0) {
		n += (size_t)r;
		if (cap - n - 1 == 0) {
			nb = realloc(buf, cap * 2);
			if (!nb)
				break;
			buf = nb;
			cap *= 2;
		}
	}
	if (r != 0) {
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	*len = n;
	return buf;
}

/* The root's path as mountinfo writes a mount point (' ', '\t', '\n'
 * and '\\' as octal escapes), looked up now: the root may have moved. */
static bool root_mount_path(const struct stat_cache *sc, char *out,
			    size_t cap)
{
	static const char deleted[] = " (deleted)";
	char link[64], path[PATH_MAX];
	ssize_t n;
	size_t o = 0;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", sc->cfg->root_fd);
	n = readlink(link, path, sizeof(path));
	if (n <= 0 || (size_t)n >= sizeof(path) || path[0] != '/')
		return false;
	path[n] = '\0';
	if ((size_t)n >= sizeof(deleted) - 1 &&
	    !strcmp(path + n - (sizeof(deleted) - 1), deleted))
		return false;
	for (const char *p = path; *p; p++) {
		if (o + 5 > cap)
			return false;
		if (strchr(" \t\n\\", *p))
			o += (size_t)snprintf(out + o, cap - o, "\\%03o",
					      (unsigned char)*p);
		else
			out[o++] = *p;
	}
	out[o] = '\0';
	return true;
}

/* A mount point's part after the root, unescaped into a relpath; false
 * when it does not fit. */
static bool mount_relpath(const char *m, size_t n, char *out, size_t cap)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		char c = m[i];

		if (c == '\\' && n - i >= 4) {
			c = (char)(((m[i + 1] - '0') << 6) |
				   ((m[i + 2] - '0') << 3) | (m[i + 3] - '0'));
			i += 3;
		}
		if (o + 1 >= cap)
			return false;
		out[o++] = c;
	}
	out[o] = '\0';
	return true;
}

/*
 * The mount table changed. Lookups and watches never cross a mount
 * point (RESOLVE_NO_XDEV, watch_take), so an entry at or beneath one
 * under the root was filled before that mount and is stale: drop
 * exactly those (a mount elsewhere, a container starting, drops
 * nothing; an unmount leaves nothing to drop: no entry is on the mounted
 * tree, and the uncovered one's watches are where they were). A mount
 * at the root itself changes nothing: lookups start from root_fd, which
 * holds the directory it covers. Without the table or the root's path,
 * everything goes.
 */
static void mounts_apply(struct stat_cache *sc)
{
	char root[PATH_MAX * 4 + 8], rel[PATH_MAX], *text, *line, *end;
	size_t len, rlen;
	unsigned gone = 0;

	if (sc->ignore_mounts || !sc->n)
		return;
	if (sc->mfd < 0 || !sc->cfg ||
	    !root_mount_path(sc, root, sizeof(root)) ||
	    !(text = read_mountinfo(sc->mfd, &len))) {
		count(sc, SC_FLUSHES);
		stat_cache_flush(sc);
		return;
	}
	rlen = strcmp(root, "/") ? strlen(root) : 0;
	for (line = text; line < text + len; line = end + 1) {
		const char *m = line, *sp;
		struct sc_entry *e;
		size_t mlen;

		end = memchr(line, '\n', (size_t)(text + len - line));
		if (!end)
			end = text + len;
		/* The fifth field: the mount point. */
		for (int i = 0; i < 4 && m; i++) {
			m = memchr(m, ' ', (size_t)(end - m));
			m = m ? m + 1 : NULL;
		}
		if (!m)
			continue;
		sp = memchr(m, ' ', (size_t)(end - m));
		mlen = (size_t)((sp ? sp : end) - m);
		/* Strictly beneath the root: "ROOT/..." ("/..." for "/"). */
		if (mlen <= rlen + 1 || memcmp(m, root, rlen) || m[rlen] != '/')
			continue;
		if (!mount_relpath(m + rlen + 1, mlen - rlen - 1, rel,
				   sizeof(rel)))
			continue; /* longer than any path looked up */
		e = find(sc, rel, strlen(rel), hash_of(rel, strlen(rel)));
		if (e)
			gone += drop_tree(sc, e);
	}
	free(text);
	count_by(sc, SC_INVALIDATED, gone);
}

void stat_cache_mounts_changed(struct stat_cache *sc)
{
	if (sc)
		mounts_apply(sc);
}

void stat_cache_sync(struct stat_cache *sc)
{
	char buf[4096] __attribute__((aligned(8)));
	struct pollfd pfd[2] = {{.fd = sc ? sc->ifd : -1, .events = POLLIN},
				{.fd = sc ? sc->mfd : -1, .events = POLLPRI}};
	unsigned gone = 0;
	bool lost = false;
	ssize_t r = -1;

	if (!sc)
		return;
	sc->unsynced = false;
	if (sc->ifd < 0 || !sc->n)
		return;
	/* One call, as the read it replaces when nothing is queued. A
	 * mount raises no inotify event: its fd says the table changed,
	 * and mounts_apply() drops what a mount now covers. */
	if (poll(pfd, 2, 0) < 0) {
		lost = true;
	} else {
		if (pfd[1].revents & (POLLPRI | POLLERR))
			mounts_apply(sc);
		/* (A flush there may have left no inotify instance.) */
		if (sc->ifd < 0 || !(pfd[0].revents & POLLIN))
			return;
	}
	while (!lost && (r = read(sc->ifd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + r;) {
			const struct inotify_event *ev = (const void *)p;

			if (ev->mask & IN_Q_OVERFLOW) {
				lost = true; /* some change we cannot name */
				break;
			}
			gone += apply(sc, ev);
			p += sizeof(*ev) + ev->len;
		}
	}
	if (!lost && r < 0 && errno != EAGAIN)
		lost = true; /* cannot tell: assume the worst */
	if (lost) {
		count(sc, SC_FLUSHES);
		stat_cache_flush(sc);
		return;
	}
	count_by(sc, SC_INVALIDATED, gone);
}

void stat_cache_batch(struct stat_cache *sc)
{
	if (sc)
		sc->unsynced = true;
}

int stat_cache_notify_fd(const struct stat_cache *sc, unsigned *gen)
{
	if (!sc)
		return -1;
	*gen = sc->ifd_gen;
	return sc->ifd;
}

unsigned stat_cache_entries(const struct stat_cache *sc)
{
	return sc->n;
}

unsigned stat_cache_watches(const struct stat_cache *sc)
{
	return sc->n_watches;
}

void stat_cache_limit_fds(struct stat_cache *sc, unsigned n)
{
	if (sc)
		sc->map_fds_max = n < STAT_CACHE_MAP_FDS ? n : STAT_CACHE_MAP_FDS;
}

unsigned stat_cache_buckets(const struct stat_cache *sc)
{
	return sc->mask + 1;
}

void stat_cache_forget(struct stat_cache *sc, const char *relpath)
{
	size_t len = strlen(relpath);
	struct sc_entry *e =
		sc ? find(sc, relpath, len, hash_of(relpath, len)) : NULL;

	if (e)
		forget(sc, e);
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
	/* Emptied: the buckets can follow a changed size (without memory
	 * the old ones serve on, with longer chains). */
	if (!sc->n && !sc->n_watches)
		size_buckets(sc, sc->max);
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

static unsigned depth_of(const char *relpath)
{
	unsigned d = 1;

	for (const char *p = relpath; *p; p++)
		d += *p == '/';
	return d;
}

/* Whether e is relpath or a directory on its way. */
static bool on_the_way(const struct sc_entry *e, const char *relpath,
		       size_t len)
{
	return e->len <= len && !memcmp(e->key, relpath, e->len) &&
	       (!e->len || e->len == len || relpath[e->len] == '/');
}

/* The length of the prefix of relpath after the one `at` long. */
static size_t next_prefix(const char *relpath, size_t len, size_t at)
{
	const char *slash = strchr(relpath + at + (at ? 1 : 0), '/');

	return slash ? (size_t)(slash - relpath) : len;
}

/* Evict until the entries relpath's lookup may add fit. */
static bool make_room(struct stat_cache *sc, const char *relpath, size_t len)
{
	unsigned need = 0, prefixes = len ? depth_of(relpath) + 1 : 1;
	size_t at = 0;

	if (prefixes > sc->max)
		return false;
	for (;;) {
		need += !find(sc, relpath, at, hash_of(relpath, at));
		if (at == len)
			break;
		at = next_prefix(relpath, len, at);
	}
	while (sc->n + need > sc->max) {
		struct sc_entry *e = sc->lru_tail;

		if (!e)
			return false;
		if (on_the_way(e, relpath, len))
			need++; /* made again below */
		drop_one(sc, e);
		count(sc, SC_EVICTIONS);
	}
	return true;
}

/*
 * An entry for each prefix of relpath from the root down, each watching
 * what its path names, in that order: a change to a directory on the way
 * made after its watch is an event, one made before is in what the next
 * watch and the lookup see. Returns relpath's entry, or that of the
 * first prefix that could not be watched (*gap: why), or NULL.
 */
static struct sc_entry *walk(struct stat_cache *sc, const char *relpath,
			     size_t len, int *gap)
{
	struct sc_entry *parent = NULL;
	size_t at = 0;

	*gap = 0;
	for (;;) {
		uint64_t h = hash_of(relpath, at);
		struct sc_entry *e = find(sc, relpath, at, h);

		if (!e)
			e = insert(sc, relpath, at, h, parent);
		if (!e)
			return NULL;
		if (!e->watch)
			*gap = e->plain ? -ELOOP : watch_take(sc, e);
		if (*gap || at == len)
			return e;
		at = next_prefix(relpath, len, at);
		parent = e;
	}
}

/* Drop e and the entries above it that hold nothing. */
static void prune(struct stat_cache *sc, struct sc_entry *e)
{
	while (e && !e->watch && !has_facts(e) && !e->child) {
		struct sc_entry *up = e->parent;

		drop_one(sc, e);
		e = up;
	}
}

/* relpath is missing (err) where the entry gap, whose parent is
 * watched, could not be watched: the answer holds until a name changes
 * in that parent, which drops gap and everything beneath it. */
static int enter_missing(struct stat_cache *sc, struct sc_entry *gap,
			 const char *relpath, size_t len, int err)
{
	struct sc_entry *e = gap;

	if (gap->len != len)
		e = insert(sc, relpath, len, hash_of(relpath, len), gap);
	if (!e) {
		prune(sc, gap);
		count(sc, SC_BYPASS);
		return err;
	}
	e->err = err;
	count(sc, SC_MISSES);
	return err;
}

static bool missing(int err)
{
	return err == -ENOENT || err == -ENOTDIR;
}

int stat_cache_lookup(struct stat_cache *sc, struct orcd_config *cfg,
		      const char *relpath, struct file_meta *meta)
{
	size_t len = strlen(relpath);
	struct sc_entry *e;
	int err, gap;

	if (!sc)
		return file_meta_lookup(cfg->root_fd, relpath, 0, meta, NULL);
	if (sc->unsynced)
		stat_cache_sync(sc);
	/* A request planned under the configuration before a reload is
	 * answered without the cache, which follows the new one. */
	if (!sc->usable || cfg != sc->cfg || sc->ifd < 0 || sc->mfd < 0)
		goto plain;
	e = find(sc, relpath, len, hash_of(relpath, len));
	if (e && has_facts(e) && !e->plain) {
		count(sc, SC_HITS);
		lru_touch(sc, e);
		if (e->err)
			return e->err;
		*meta = e->meta;
		return 0;
	}
	if ((e && e->plain) ||
	    (sc->watch_full_until_ms && mono_ms() < sc->watch_full_until_ms) ||
	    !make_room(sc, relpath, len))
		goto plain;
	e = walk(sc, relpath, len, &gap);
	if (!e)
		goto plain;
	err = file_meta_lookup(cfg->root_fd, relpath,
			       RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV, meta,
			       NULL);
	if (gap) {
		if (e->parent && missing(gap) && missing(err))
			return enter_missing(sc, e, relpath, len, err);
		if (gap == -ELOOP) {
			/* A symlink on the way (watch_take): not ours, until
			 * its directory's events drop it. */
			e->plain = true;
			goto plain;
		}
		prune(sc, e);
		goto plain;
	}
	if (err == -ELOOP || err == -EXDEV) {
		e->plain = true; /* a symlink or mount on the way: not ours */
		goto plain;
	}
	if (err) {
		count(sc, SC_BYPASS);
		return err;
	}
	meta->cache_gen = ++sc->fills;
	e->meta = *meta;
	e->has_meta = true;
	count(sc, SC_MISSES);
	return 0;
plain:
	count(sc, SC_BYPASS);
	return file_meta_lookup(cfg->root_fd, relpath, 0, meta, NULL);
}

/* Same file, same version: what a response's head was rendered from.
 * (Whether the facts come from the same lookup is entry_of's question.) */
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
	/* The fill too, not only the facts: an event that forgot them, and
	 * a lookup that found the same ones again (a rewrite in place with
	 * its times put back), lie between the plan's bytes and the entry. */
	if (!e || !e->has_meta || e->meta.cache_gen != meta->cache_gen ||
	    !same_version(&e->meta, meta))
		return NULL;
	return e;
}

int stat_cache_readable(struct stat_cache *sc, struct orcd_config *cfg,
			const char *relpath, struct file_meta *meta)
{
	struct sc_entry *e = entry_of(sc, cfg, relpath, meta);
	struct file_meta now;
	bool same;
	int err, fd;

	if (e && e->read_known)
		return e->read_err;
	err = file_meta_lookup(cfg->root_fd, relpath, 0, &now, &fd);
	if (!err && fd >= 0)
		close(fd);
	same = !err && same_version(&now, meta);
	/* Who may read it changes only with an IN_ATTRIB, of the file or of
	 * a directory on the way, which forgets the entry's facts. */
	if (e && (err == -EACCES || same)) {
		e->read_known = true;
		e->read_err = err;
	}
	if (!err) {
		/* The same version stays the same fill (what keeps match). */
		if (same)
			now.cache_gen = meta->cache_gen;
		*meta = now;
	}
	return err;
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

/* Whether len bytes may be copied: a small file, within the worker's
 * share (asked before entry_for_body()'s read of change events). */
static bool data_fits(const struct stat_cache *sc, size_t len)
{
	return len && len <= STAT_CACHE_DATA_FILE &&
	       sc->data_bytes + len <= STAT_CACHE_DATA_TOTAL;
}

/* A body of len bytes, to be filled at ->data; NULL without memory. */
static struct sc_body *data_body(size_t len)
{
	struct sc_body *b = malloc(sizeof(*b) + len);

	if (!b)
		return NULL;
	b->refs = 1;
	b->len = len;
	b->mapped = false;
	b->fd = -1;
	b->data = (char *)(b + 1);
	return b;
}

static void data_body_keep(struct stat_cache *sc, struct sc_entry *e,
			   struct sc_body *b)
{
	e->body = b;
	sc->data_bytes += b->len;
}

void stat_cache_keep_data(struct stat_cache *sc, const struct orcd_config *cfg,
			  const char *relpath, const struct file_meta *meta,
			  const char *data, size_t len)
{
	struct sc_entry *e;
	struct sc_body *b;

	if (!sc || len != meta->size || !data_fits(sc, len))
		return;
	e = entry_for_body(sc, cfg, relpath, meta);
	if (!e || !(b = data_body(len)))
		return;
	memcpy(b->data, data, len);
	data_body_keep(sc, e, b);
}

/* e's bytes, len of them, read from fd. */
static void read_body(struct stat_cache *sc, struct sc_entry *e, int fd,
		      size_t len)
{
	struct sc_body *b = data_body(len);

	if (!b)
		return;
	if (pread(fd, b->data, len, 0) != (ssize_t)len) {
		free(b);
		return;
	}
	data_body_keep(sc, e, b);
}

void stat_cache_keep_read(struct stat_cache *sc, const struct orcd_config *cfg,
			  const char *relpath, const struct file_meta *meta,
			  int fd)
{
	struct sc_entry *e;

	if (!sc || !data_fits(sc, (size_t)meta->size))
		return;
	e = entry_for_body(sc, cfg, relpath, meta);
	if (e)
		read_body(sc, e, fd, (size_t)meta->size);
}

void stat_cache_keep_map(struct stat_cache *sc, const struct orcd_config *cfg,
			 const char *relpath, const struct file_meta *meta)
{
	struct file_meta now;
	struct sc_entry *e;
	struct sc_body *b;
	void *map;
	int fd;

	if (!sc || !meta->size || meta->size > STAT_CACHE_MAP_FILE ||
	    (meta->size <= STAT_CACHE_DATA_FILE ?
		     !data_fits(sc, (size_t)meta->size) :
		     sc->map_bytes + meta->size > STAT_CACHE_MAP_TOTAL))
		return;
	e = entry_for_body(sc, cfg, relpath, meta);
	if (!e)
		return;
	/* The same walk beneath the root as every lookup; the mapping (or
	 * the bytes) is of the version the facts describe, or none. */
	if (file_meta_lookup(cfg->root_fd, relpath, 0, &now, &fd) || fd < 0)
		return;
	if (meta->size <= STAT_CACHE_DATA_FILE) {
		/* Bigger than a response buffer's room, so a chain read it in
		 * pieces: its bytes, as one read's would have been kept. */
		if (same_version(&now, meta))
			read_body(sc, e, fd, (size_t)meta->size);
		close(fd);
		return;
	}
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
	if (sc->map_fds < sc->map_fds_max) {
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
	return sc && sc->usable && sc->ifd >= 0 && sc->mfd >= 0;
}

int stat_cache_lookup_cb(void *ctx, struct orcd_config *cfg,
			 const char *relpath, struct file_meta *meta)
{
	return stat_cache_lookup(ctx, cfg, relpath, meta);
}

int stat_cache_readable_cb(void *ctx, struct orcd_config *cfg,
			   const char *relpath, struct file_meta *meta)
{
	return stat_cache_readable(ctx, cfg, relpath, meta);
}

void stat_cache_forget_cb(void *ctx, const char *relpath)
{
	stat_cache_forget(ctx, relpath);
}
