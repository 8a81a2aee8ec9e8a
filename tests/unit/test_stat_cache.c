// SPDX-License-Identifier: MIT
/* Stat cache: a second lookup is a hit; every kind of change made before
 * stat_cache_sync() is seen by the next lookup, and drops only what it
 * names; missing files are cached until created; a full cache evicts the
 * least recently used; what inotify cannot vouch for (symlinks on the
 * way, a cache turned off, another configuration) is looked up every
 * time; no fd or watch is leaked or added. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

#include "unit_fds.h"

#include "config.h"
#include "respond.h"
#include "stat_cache.h"

static char dir[128];
static char err[256];

struct fixture {
	struct orcd_config *cfg;
	struct stat_cache *sc;
	_Atomic uint64_t ctr[SC_NCOUNTERS];
};

static const char *at(const char *rel)
{
	static char p[4][256];
	static int k;

	k = (k + 1) % 4;
	snprintf(p[k], sizeof(p[k]), "%s/www/%s", dir, rel);
	return p[k];
}

static void put_file(const char *rel, const char *text)
{
	FILE *f = fopen(at(rel), "w");

	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static struct orcd_config *make_config(unsigned entries)
{
	struct orcd_config *c = config_new();
	char p[160], v[16];
	FILE *f;

	assert_non_null(c);
	snprintf(p, sizeof(p), "%s/www", dir);
	assert_int_equal(config_set(c, "root", p, false, err, sizeof(err)), 0);
	snprintf(p, sizeof(p), "%s/mime.types", dir);
	f = fopen(p, "w");
	assert_non_null(f);
	fputs("text/plain\ttxt\n", f);
	fclose(f);
	assert_int_equal(
		config_set(c, "mime_types", p, false, err, sizeof(err)), 0);
	snprintf(v, sizeof(v), "%u", entries);
	assert_int_equal(
		config_set(c, "stat_cache", v, false, err, sizeof(err)), 0);
	assert_int_equal(config_finalize(c, err, sizeof(err)), 0);
	return c;
}

static int setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));
	char cmd[200];

	/* The cache is off on filesystems that may change behind inotify's
	 * back; test where it is on (tmpfs when /tmp is something else). */
	int tfd = open("/tmp", O_PATH | O_DIRECTORY);
	char fstype[64];

	assert_true(tfd >= 0);
	snprintf(dir, sizeof(dir), "/tmp/orcd-sc-XXXXXX");
	if (stat_cache_fstype(tfd, fstype, sizeof(fstype)) ||
	    !stat_cache_fs_ok(fstype))
		snprintf(dir, sizeof(dir), "/dev/shm/orcd-sc-XXXXXX");
	close(tfd);
	assert_non_null(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd), "%s/www", dir);
	assert_int_equal(mkdir(cmd, 0755), 0);
	assert_int_equal(mkdir(at("a"), 0755), 0);
	assert_int_equal(mkdir(at("a/b"), 0755), 0);
	put_file("top.txt", "top\n");
	put_file("a/b/deep.txt", "deep\n");
	fx->cfg = make_config(64);
	fx->sc = stat_cache_new(fx->cfg, fx->ctr);
	assert_non_null(fx->sc);
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;
	char cmd[200];

	stat_cache_free(fx->sc);
	config_put(fx->cfg);
	free(fx);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static uint64_t ctr(struct fixture *fx, int k)
{
	return atomic_load(&fx->ctr[k]);
}

/* Look up through the cache and check it against a fresh lookup. */
static int lookup(struct fixture *fx, const char *rel, struct file_meta *m)
{
	struct file_meta fresh;
	int r = stat_cache_lookup(fx->sc, fx->cfg, rel, m);
	int f = file_meta_lookup(fx->cfg->root_fd, rel, 0, &fresh, NULL);

	assert_int_equal(r, f);
	if (!r) {
		assert_int_equal(m->size, fresh.size);
		assert_int_equal(m->ino, fresh.ino);
		assert_int_equal(m->mtime_sec, fresh.mtime_sec);
		assert_int_equal(m->mtime_nsec, fresh.mtime_nsec);
		assert_int_equal(m->mode, fresh.mode);
	}
	return r;
}

static void test_second_lookup_is_a_hit(void **state)
{
	struct fixture *fx = *state;
	struct file_meta m;

	assert_int_equal(lookup(fx, "a/b/deep.txt", &m), 0);
	assert_int_equal(m.size, 5);
	assert_int_equal(ctr(fx, SC_MISSES), 1);
	assert_int_equal(ctr(fx, SC_HITS), 0);
	stat_cache_sync(fx->sc);
	assert_int_equal(lookup(fx, "a/b/deep.txt", &m), 0);
	assert_int_equal(ctr(fx, SC_HITS), 1);
	/* The root itself and a directory are cached like files. */
	assert_int_equal(lookup(fx, "", &m), 0);
	assert_true(S_ISDIR(m.mode));
	assert_int_equal(lookup(fx, "a", &m), 0);
	assert_int_equal(lookup(fx, "a", &m), 0);
	assert_int_equal(lookup(fx, "", &m), 0);
	assert_int_equal(ctr(fx, SC_HITS), 3);
	assert_int_equal(ctr(fx, SC_FLUSHES), 0);
	/* Reads of the file (our own chains) are not changes. */
	assert_int_equal(lookup(fx, "top.txt", &m), 0);
	{
		char buf[16];
		int fd = open(at("top.txt"), O_RDONLY);

		assert_true(fd >= 0);
		assert_true(read(fd, buf, sizeof(buf)) > 0);
		close(fd);
	}
	stat_cache_sync(fx->sc);
	assert_int_equal(ctr(fx, SC_FLUSHES), 0);
	assert_int_equal(lookup(fx, "top.txt", &m), 0);
	assert_int_equal(ctr(fx, SC_HITS), 4);
}

/* Each change below, made after the entry was cached and before sync,
 * must show in the next lookup (lookup() compares with a fresh one). */
static void change_then_check(struct fixture *fx, const char *rel,
			      void (*change)(void))
{
	struct file_meta m;
	uint64_t dropped = ctr(fx, SC_INVALIDATED);

	lookup(fx, rel, &m);
	lookup(fx, rel, &m);
	change();
	stat_cache_sync(fx->sc);
	assert_true(ctr(fx, SC_INVALIDATED) > dropped);
	assert_int_equal(ctr(fx, SC_FLUSHES), 0);
	lookup(fx, rel, &m);
}

static void grow(void)
{
	FILE *f = fopen(at("a/b/deep.txt"), "a");

	fputs("more\n", f);
	fclose(f);
}

static void retime(void)
{
	struct timeval tv[2] = {{1000000000, 0}, {1000000000, 0}};

	assert_int_equal(utimes(at("a/b/deep.txt"), tv), 0);
}

static void replace(void)
{
	put_file("a/b/.new", "replaced!\n");
	assert_int_equal(rename(at("a/b/.new"), at("a/b/deep.txt")), 0);
}

static void move_parent(void)
{
	assert_int_equal(rename(at("a/b"), at("a/c")), 0);
}

static void remove_file(void)
{
	assert_int_equal(unlink(at("a/b/deep.txt")), 0);
}

static void chmod_file(void)
{
	assert_int_equal(chmod(at("a/b/deep.txt"), 0600), 0);
}

/* Written through a hard link in a directory that has no watch: only
 * the file's own watch sees it. */
static void write_other_link(void)
{
	FILE *f = fopen(at("elsewhere/l"), "a");

	assert_non_null(f);
	fputs("via the other name\n", f);
	fclose(f);
}

static void chmod_root(void)
{
	assert_int_equal(chmod(at(""), 0711), 0);
}

static void test_changes_are_seen(void **state)
{
	struct fixture *fx = *state;

	/* The root's own watch (it is reached through a /proc link). */
	change_then_check(fx, "", chmod_root);

	change_then_check(fx, "a/b/deep.txt", grow);
	change_then_check(fx, "a/b/deep.txt", retime);
	change_then_check(fx, "a/b/deep.txt", replace);
	change_then_check(fx, "a/b/deep.txt", chmod_file);
	/* link() changes the link count, an event of its own: let the
	 * cache see it before the write that is the point here. */
	assert_int_equal(mkdir(at("elsewhere"), 0755), 0);
	assert_int_equal(link(at("a/b/deep.txt"), at("elsewhere/l")), 0);
	stat_cache_sync(fx->sc);
	change_then_check(fx, "a/b/deep.txt", write_other_link);
	change_then_check(fx, "a/b/deep.txt", remove_file);
	put_file("a/b/deep.txt", "again\n");
	stat_cache_sync(fx->sc); /* the missing file was an entry */
	change_then_check(fx, "a/b/deep.txt", move_parent);
	assert_int_equal(stat_cache_lookup(fx->sc, fx->cfg, "a/b/deep.txt",
					   &(struct file_meta){0}),
			 -ENOENT);
}

/* Rewrite top.txt `rounds` times with a new length each time, with only
 * `between` (sync, or the engine's batch mark) before the next lookup:
 * the cache must never answer with what was there before. */
static void rewrite_rounds(struct fixture *fx, int rounds, int period,
			   void (*between)(struct stat_cache *sc))
{
	struct file_meta m;
	char text[64];

	for (int i = 0; i < rounds; i++) {
		int n = snprintf(text, sizeof(text), "%*d\n", 1 + i % period,
				 i);

		assert_true(n > 0 && (size_t)n < sizeof(text));
		put_file("top.txt", text);
		between(fx->sc);
		assert_int_equal(lookup(fx, "top.txt", &m), 0);
		assert_int_equal(m.size, strlen(text));
	}
}

static void test_rewrites_in_a_row(void **state)
{
	rewrite_rounds(*state, 200, 37, stat_cache_sync);
}

/* The engine marks each batch it takes from the ring; the read of the
 * events happens at the first lookup after the mark, not before. */
static void test_batch_mark_reads_at_next_lookup(void **state)
{
	struct fixture *fx = *state;
	struct file_meta m;

	assert_int_equal(lookup(fx, "top.txt", &m), 0);
	put_file("top.txt", "longer than before\n");
	/* No mark: the entry is answered as it was (the engine never plans
	 * a request it has not taken from the ring since the change). */
	assert_int_equal(stat_cache_lookup(fx->sc, fx->cfg, "top.txt", &m), 0);
	assert_int_equal(m.size, 4);
	assert_int_equal(ctr(fx, SC_INVALIDATED), 0);
	stat_cache_batch(fx->sc);
	assert_int_equal(ctr(fx, SC_INVALIDATED), 0); /* no read yet */
	assert_int_equal(lookup(fx, "top.txt", &m), 0);
	assert_int_equal(m.size, 19);
	assert_true(ctr(fx, SC_INVALIDATED) >= 1);
	rewrite_rounds(fx, 50, 23, stat_cache_batch);
}

/* Filesystems are told apart by mountinfo's name, not statfs's f_type
 * (a 9p share of a host's ext4 reports ext4's magic). */
static void test_filesystem_types(void **state)
{
	char t[64];
	int fd;

	(void)state;
	assert_true(stat_cache_fs_ok("ext4"));
	assert_true(stat_cache_fs_ok("tmpfs"));
	assert_true(stat_cache_fs_ok("rootfs"));
	assert_false(stat_cache_fs_ok("9p"));
	assert_false(stat_cache_fs_ok("nfs4"));
	assert_false(stat_cache_fs_ok("fuse.sshfs"));
	assert_false(stat_cache_fs_ok("cifs"));
	fd = open("/proc", O_PATH | O_DIRECTORY);
	assert_true(fd >= 0);
	assert_int_equal(stat_cache_fstype(fd, t, sizeof(t)), 0);
	assert_string_equal(t, "proc");
	close(fd);
	fd = open("/dev/shm", O_PATH | O_DIRECTORY);
	assert_true(fd >= 0);
	assert_int_equal(stat_cache_fstype(fd, t, sizeof(t)), 0);
	assert_string_equal(t, "tmpfs");
	close(fd);
}

static void test_symlinks_are_not_cached(void **state)
{
	struct fixture *fx = *state;
	struct file_meta m;

	assert_int_equal(symlink("b", at("a/lnk")), 0);
	assert_int_equal(symlink("top.txt", at("top-link")), 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(lookup(fx, "a/lnk/deep.txt", &m), 0);
		assert_int_equal(lookup(fx, "top-link", &m), 0);
	}
	assert_int_equal(ctr(fx, SC_HITS), 0);
	assert_int_equal(ctr(fx, SC_BYPASS), 6);
	/* Re-pointing the link is seen at once (nothing was cached). */
	assert_int_equal(unlink(at("top-link")), 0);
	assert_int_equal(symlink("a/b/deep.txt", at("top-link")), 0);
	assert_int_equal(lookup(fx, "top-link", &m), 0);
	assert_int_equal(m.size, 5);
	/* Escapes stay refused. */
	assert_int_equal(symlink("../..", at("out")), 0);
	assert_int_equal(lookup(fx, "out", &m), -EXDEV);
}

/* A missing file is answered from the cache until its name, or that of
 * the first missing directory on its way, is created; a file where a
 * directory was expected (ENOTDIR) until it is replaced. */
static void test_missing_is_cached_until_created(void **state)
{
	struct fixture *fx = *state;
	struct file_meta m;

	assert_int_equal(lookup(fx, "a/none.txt", &m), -ENOENT);
	assert_int_equal(lookup(fx, "x/y/z.txt", &m), -ENOENT);
	assert_int_equal(lookup(fx, "top.txt/inside", &m), -ENOTDIR);
	assert_int_equal(ctr(fx, SC_MISSES), 3);
	stat_cache_sync(fx->sc);
	assert_int_equal(lookup(fx, "a/none.txt", &m), -ENOENT);
	assert_int_equal(lookup(fx, "x/y/z.txt", &m), -ENOENT);
	assert_int_equal(lookup(fx, "top.txt/inside", &m), -ENOTDIR);
	assert_int_equal(ctr(fx, SC_HITS), 3);

	put_file("a/none.txt", "now here\n");
	assert_int_equal(mkdir(at("x"), 0755), 0);
	assert_int_equal(mkdir(at("x/y"), 0755), 0);
	put_file("x/y/z.txt", "deeper\n");
	put_file("a/.dir", "");
	assert_int_equal(unlink(at("top.txt")), 0);
	assert_int_equal(mkdir(at("top.txt"), 0755), 0);
	put_file("top.txt/inside", "a file\n");
	stat_cache_sync(fx->sc);
	assert_int_equal(lookup(fx, "a/none.txt", &m), 0);
	assert_int_equal(m.size, 9);
	assert_int_equal(lookup(fx, "x/y/z.txt", &m), 0);
	assert_int_equal(lookup(fx, "top.txt/inside", &m), 0);
	/* ... and again missing once removed. */
	assert_int_equal(unlink(at("x/y/z.txt")), 0);
	stat_cache_sync(fx->sc);
	assert_int_equal(lookup(fx, "x/y/z.txt", &m), -ENOENT);
	assert_int_equal(ctr(fx, SC_FLUSHES), 0);
}

/* A directory's mode decides every lookup beneath it: a change of it
 * drops what is beneath, not only the directory's own facts. */
static void test_directory_attrib_drops_beneath(void **state)
{
	struct fixture *fx = *state;
	struct file_meta m;
	uint64_t misses;

	assert_int_equal(lookup(fx, "a/b/deep.txt", &m), 0);
	assert_int_equal(lookup(fx, "a/nothing", &m), -ENOENT);
	stat_cache_sync(fx->sc);
	misses = ctr(fx, SC_MISSES);
	assert_int_equal(chmod(at("a"), 0700), 0);
	stat_cache_sync(fx->sc);
	assert_int_equal(lookup(fx, "a/b/deep.txt", &m), 0);
	assert_int_equal(lookup(fx, "a/nothing", &m), -ENOENT);
	assert_int_equal(ctr(fx, SC_MISSES), misses + 2);
}

/* The point of dropping per path: a file written over and over (a log
 * under the root) leaves every other entry a hit, itself included when
 * it is looked up between writes, and stays true. */
static void test_changes_elsewhere_keep_hits(void **state)
{
	struct fixture *fx = *state;
	struct file_meta m;
	char text[32];

	assert_int_equal(lookup(fx, "a/b/deep.txt", &m), 0);
	assert_int_equal(lookup(fx, "top.txt", &m), 0);
	assert_int_equal(lookup(fx, "", &m), 0);
	for (int i = 0; i < 100; i++) {
		FILE *f = fopen(at("a/b/log.txt"), "a");

		assert_non_null(f);
		fprintf(f, "line %d\n", i);
		fclose(f);
		stat_cache_sync(fx->sc);
		assert_int_equal(lookup(fx, "a/b/deep.txt", &m), 0);
		assert_int_equal(lookup(fx, "top.txt", &m), 0);
		assert_int_equal(lookup(fx, "", &m), 0);
	}
	assert_int_equal(ctr(fx, SC_HITS), 300);
	assert_int_equal(ctr(fx, SC_MISSES), 3);
	/* The written file itself, looked up after every write. */
	for (int i = 0; i < 50; i++) {
		snprintf(text, sizeof(text), "%*d\n", 1 + i % 13, i);
		put_file("a/b/log.txt", text);
		stat_cache_sync(fx->sc);
		assert_int_equal(lookup(fx, "a/b/log.txt", &m), 0);
		assert_int_equal(m.size, strlen(text));
		assert_int_equal(lookup(fx, "a/b/deep.txt", &m), 0);
	}
	assert_int_equal(ctr(fx, SC_HITS), 350);
	assert_int_equal(ctr(fx, SC_FLUSHES), 0);
}

/* Appends to top.txt until the inotify queue overflows: each write is
 * two events that do not merge, the file's and its directory's.
 * Returns the bytes appended. */
static unsigned overflow_queue(void)
{
	unsigned max = 16384;
	FILE *q = fopen("/proc/sys/fs/inotify/max_queued_events", "r");

	if (q) {
		assert_int_equal(fscanf(q, "%u", &max), 1);
		fclose(q);
	}
	for (unsigned i = 0; i <= max / 2 + 1; i++) {
		int fd = open(at("top.txt"), O_WRONLY | O_APPEND);

		assert_true(fd >= 0);
		assert_int_equal(write(fd, "x", 1), 1);
		close(fd);
	}
	return max / 2 + 2;
}

/* Events lost to a full queue: nothing can be told apart, all goes. */
static void test_overflow_empties(void **state)
{
	struct fixture *fx = *state;
	struct file_meta m;
	unsigned added;

	assert_int_equal(lookup(fx, "top.txt", &m), 0);
	assert_int_equal(lookup(fx, "a/b/deep.txt", &m), 0);
	added = overflow_queue();
	stat_cache_sync(fx->sc);
	assert_int_equal(ctr(fx, SC_FLUSHES), 1);
	assert_int_equal(stat_cache_entries(fx->sc), 0);
	assert_int_equal(stat_cache_watches(fx->sc), 0);
	assert_int_equal(lookup(fx, "top.txt", &m), 0);
	assert_int_equal(m.size, 4 + added);
}

/* The watches inotify holds for this process, by /proc/self/fdinfo. */
static unsigned kernel_watches(void)
{
	char p[300], line[512];
	unsigned n = 0;
	DIR *d = opendir("/proc/self/fdinfo");
	struct dirent *de;

	assert_non_null(d);
	while ((de = readdir(d))) {
		FILE *f;

		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/proc/self/fdinfo/%s", de->d_name);
		f = fopen(p, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f))
			n += !strncmp(line, "inotify wd:", 11);
		fclose(f);
	}
	closedir(d);
	return n;
}

/* An overflow where no new inotify instance can be had (here: no fd
 * left; fs.inotify.max_user_instances does the same): the cache empties
 * the instance it has and goes on with it. It went off instead, and
 * every lookup went to the file system until a reload. */
static void test_overflow_without_a_spare_instance(void **state)
{
	struct fixture *fx = *state;
	struct file_meta m;
	struct rlimit keep, low;
	int fill[256], n = 0;
	uint64_t hits;

	assert_int_equal(lookup(fx, "top.txt", &m), 0);
	assert_int_equal(lookup(fx, "a/b/deep.txt", &m), 0);
	assert_true(kernel_watches() > 0);
	overflow_queue();
	/* Every fd below a low limit taken: inotify_init1 gets EMFILE. */
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &keep), 0);
	low = keep;
	low.rlim_cur = 64;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	while (n < 256 && (fill[n] = open("/dev/null", O_RDONLY)) >= 0)
		n++;
	assert_true(n < 256);
	assert_int_equal(errno, EMFILE);
	stat_cache_sync(fx->sc);
	while (n > 0)
		close(fill[--n]);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &keep), 0);
	assert_int_equal(ctr(fx, SC_FLUSHES), 1);
	assert_int_equal(stat_cache_entries(fx->sc), 0);
	assert_int_equal(stat_cache_watches(fx->sc), 0);
	assert_int_equal(kernel_watches(), 0);
	/* On: a second lookup is a hit, and a change is still seen. */
	assert_int_equal(lookup(fx, "top.txt", &m), 0);
	hits = ctr(fx, SC_HITS);
	assert_int_equal(lookup(fx, "top.txt", &m), 0);
	assert_int_equal(ctr(fx, SC_HITS), hits + 1);
	put_file("top.txt", "changed\n");
	stat_cache_sync(fx->sc);
	assert_int_equal(lookup(fx, "top.txt", &m), 0);
	assert_int_equal(m.size, 8);
	assert_int_equal(ctr(fx, SC_FLUSHES), 1);
}

/* The cache is bounded: past cfg->stat_cache entries the least recently
 * used go (with their watches), a new file is still cached, a hot one
 * stays a hit, and every answer is still true. */
static void test_full_cache_evicts_least_recent(void **state)
{
	struct fixture *fx = *state;
	struct orcd_config *small = make_config(6);
	struct file_meta m;
	char name[32];

	stat_cache_use(fx->sc, small);
	for (int i = 0; i < 12; i++) {
		snprintf(name, sizeof(name), "f%d.txt", i);
		put_file(name, name);
	}
	stat_cache_sync(fx->sc);
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < 12; i++) {
			snprintf(name, sizeof(name), "f%d.txt", i);
			assert_int_equal(
				stat_cache_lookup(fx->sc, small, name, &m), 0);
			assert_int_equal(m.size, strlen(name));
			assert_int_equal(stat_cache_lookup(fx->sc, small,
							   "a/b/deep.txt", &m),
					 0);
			assert_int_equal(m.size, 5);
			assert_true(stat_cache_entries(fx->sc) <= 6);
			assert_int_equal(stat_cache_watches(fx->sc),
					 kernel_watches());
		}
	/* deep.txt (and its directories) stayed: only its first lookup
	 * missed; every fN.txt was entered (then evicted). */
	assert_int_equal(ctr(fx, SC_HITS), 23);
	assert_int_equal(ctr(fx, SC_MISSES), 25);
	assert_int_equal(ctr(fx, SC_BYPASS), 0);
	assert_true(ctr(fx, SC_EVICTIONS) >= 20);
	/* The last one looked up is a hit. */
	assert_int_equal(stat_cache_lookup(fx->sc, small, "f11.txt", &m), 0);
	assert_int_equal(ctr(fx, SC_HITS), 24);
	/* Evicted entries are not stale ones: a change is seen after. */
	put_file("f0.txt", "changed, longer\n");
	stat_cache_sync(fx->sc);
	assert_int_equal(stat_cache_lookup(fx->sc, small, "f0.txt", &m), 0);
	assert_int_equal(m.size, 16);
	stat_cache_use(fx->sc, fx->cfg);
	config_put(small);
}

/* stat_cache N holds N entries, the root's included: a working set of
 * exactly N stays without an eviction. */
static void test_full_cache_holds_exactly_n(void **state)
{
	struct fixture *fx = *state;
	struct orcd_config *four = make_config(4);
	const char *names[] = {"n1.txt", "n2.txt", "n3.txt"};
	struct file_meta m;
	uint64_t hits, evictions;

	stat_cache_use(fx->sc, four);
	for (int i = 0; i < 3; i++)
		put_file(names[i], names[i]);
	stat_cache_sync(fx->sc);
	for (int i = 0; i < 3; i++)
		assert_int_equal(stat_cache_lookup(fx->sc, four, names[i], &m),
				 0);
	hits = ctr(fx, SC_HITS);
	evictions = ctr(fx, SC_EVICTIONS);
	for (int i = 0; i < 3; i++)
		assert_int_equal(stat_cache_lookup(fx->sc, four, names[i], &m),
				 0);
	assert_int_equal(ctr(fx, SC_HITS) - hits, 3);
	assert_int_equal(ctr(fx, SC_EVICTIONS) - evictions, 0);
	assert_int_equal(stat_cache_entries(fx->sc), 4);
	stat_cache_use(fx->sc, fx->cfg);
	config_put(four);
}

/* Watches follow the entries: a removed file's goes, and the kernel's
 * count is the cache's. */
static void test_watches_follow_entries(void **state)
{
	struct fixture *fx = *state;
	struct file_meta m;

	assert_int_equal(lookup(fx, "a/b/deep.txt", &m), 0);
	assert_int_equal(lookup(fx, "top.txt", &m), 0);
	/* "", a, a/b, deep.txt, top.txt */
	assert_int_equal(stat_cache_watches(fx->sc), 5);
	assert_int_equal(kernel_watches(), 5);
	/* A second name of the same file shares its watch. */
	assert_int_equal(link(at("top.txt"), at("a/top2.txt")), 0);
	stat_cache_sync(fx->sc);
	assert_int_equal(lookup(fx, "top.txt", &m), 0);
	assert_int_equal(lookup(fx, "a/top2.txt", &m), 0);
	assert_int_equal(stat_cache_watches(fx->sc), 5);
	assert_int_equal(kernel_watches(), 5);
	assert_int_equal(unlink(at("a/top2.txt")), 0);
	assert_int_equal(unlink(at("top.txt")), 0);
	stat_cache_sync(fx->sc);
	assert_int_equal(stat_cache_watches(fx->sc), 4);
	assert_int_equal(kernel_watches(), 4);
	assert_int_equal(rename(at("a"), at("moved")), 0);
	stat_cache_sync(fx->sc);
	assert_int_equal(stat_cache_watches(fx->sc), 1);
	assert_int_equal(kernel_watches(), 1);
	assert_int_equal(lookup(fx, "moved/b/deep.txt", &m), 0);
	assert_int_equal(lookup(fx, "a/b/deep.txt", &m), -ENOENT);
}

/* A HEAD's read check is answered from the entry until a change. */
static void test_readable_is_kept(void **state)
{
	struct fixture *fx = *state;
	struct file_meta m;

	assert_int_equal(lookup(fx, "top.txt", &m), 0);
	assert_int_equal(stat_cache_readable(fx->sc, fx->cfg, "top.txt", &m),
			 0);
	/* Gone, but no event read yet: the entry still answers, which shows
	 * that it answers without an open. */
	assert_int_equal(unlink(at("top.txt")), 0);
	assert_int_equal(stat_cache_readable(fx->sc, fx->cfg, "top.txt", &m),
			 0);
	stat_cache_sync(fx->sc);
	assert_int_equal(stat_cache_readable(fx->sc, fx->cfg, "top.txt", &m),
			 -ENOENT);
	assert_int_equal(lookup(fx, "top.txt", &m), -ENOENT);
}

/* A replan forgets the path whose facts a transfer found wrong, and
 * only that path (it used to empty the cache). */
static void test_forget_is_per_path(void **state)
{
	struct fixture *fx = *state;
	struct file_meta m;

	assert_int_equal(lookup(fx, "a/b/deep.txt", &m), 0);
	assert_int_equal(lookup(fx, "top.txt", &m), 0);
	stat_cache_forget(fx->sc, "a/b/deep.txt");
	assert_int_equal(lookup(fx, "top.txt", &m), 0);
	assert_int_equal(ctr(fx, SC_HITS), 1);
	assert_int_equal(lookup(fx, "a/b/deep.txt", &m), 0);
	assert_int_equal(ctr(fx, SC_MISSES), 3);
}

static void test_off_and_other_configs_bypass(void **state)
{
	struct fixture *fx = *state;
	struct orcd_config *off = make_config(0);
	struct orcd_config *other = make_config(64);
	struct file_meta m;

	/* A request planned under another configuration than the cache
	 * follows (one from before a reload) is looked up plainly. */
	assert_int_equal(stat_cache_lookup(fx->sc, other, "top.txt", &m), 0);
	assert_int_equal(stat_cache_lookup(fx->sc, other, "top.txt", &m), 0);
	assert_int_equal(ctr(fx, SC_BYPASS), 2);
	stat_cache_use(fx->sc, off);
	assert_int_equal(stat_cache_lookup(fx->sc, off, "top.txt", &m), 0);
	assert_int_equal(stat_cache_lookup(fx->sc, off, "top.txt", &m), 0);
	assert_int_equal(ctr(fx, SC_HITS), 0);
	assert_int_equal(ctr(fx, SC_BYPASS), 4);
	/* No cache at all: the same answer. */
	assert_int_equal(stat_cache_lookup(NULL, off, "top.txt", &m), 0);
	assert_int_equal(m.size, 4);
	stat_cache_use(fx->sc, fx->cfg);
	config_put(off);
	config_put(other);
}

static void test_buckets_follow_a_reload(void **state)
{
	struct fixture *fx = *state;
	struct orcd_config *big = make_config(65536);
	struct orcd_config *off = make_config(0);
	struct file_meta m;

	/* Sized at start for 64 entries; a reload to 65536 must not leave
	 * every lookup walking chains of thousands. */
	assert_int_equal(stat_cache_buckets(fx->sc), 64);
	assert_int_equal(lookup(fx, "top.txt", &m), 0);
	stat_cache_use(fx->sc, big);
	assert_int_equal(stat_cache_buckets(fx->sc), 65536);
	assert_int_equal(stat_cache_lookup(fx->sc, big, "top.txt", &m), 0);
	assert_int_equal(stat_cache_lookup(fx->sc, big, "top.txt", &m), 0);
	assert_int_equal(ctr(fx, SC_HITS), 1);
	stat_cache_use(fx->sc, off);
	assert_int_equal(stat_cache_buckets(fx->sc), 16);
	stat_cache_use(fx->sc, fx->cfg);
	assert_int_equal(stat_cache_buckets(fx->sc), 64);
	config_put(big);
	config_put(off);
}

static void test_no_fd_leaks(void **state)
{
	struct fixture *fx = *state;
	int fds = count_fds();
	struct file_meta m;

	for (int i = 0; i < 20; i++) {
		put_file("top.txt", i % 2 ? "odd\n" : "even!\n");
		stat_cache_sync(fx->sc);
		assert_int_equal(lookup(fx, "top.txt", &m), 0);
		assert_int_equal(lookup(fx, "a/b/deep.txt", &m), 0);
		assert_int_equal(lookup(fx, "missing", &m), -ENOENT);
	}
	assert_int_equal(count_fds(), fds);
	assert_true(ctr(fx, SC_INVALIDATED) >= 19);
	/* A flush renews the inotify instance on the same fd number. */
	stat_cache_flush(fx->sc);
	assert_int_equal(lookup(fx, "top.txt", &m), 0);
	assert_int_equal(count_fds(), fds);
}

static int plan_head(struct fixture *fx, const char *target)
{
	struct respond_lookup lk = {stat_cache_lookup_cb, fx->sc,
				    stat_cache_readable_cb};
	struct http_limits lim = {8192, 8192, 100};
	static struct response_plan plan;
	struct http_request req;
	struct http_clock clock = {0};
	char in[256], out[8192];
	int status = 0;

	snprintf(in, sizeof(in), "HEAD %s HTTP/1.1\r\nHost: t\r\n\r\n", target);
	assert_int_equal(http_parse_request(in, strlen(in), &lim, &req,
					    &status),
			 HTTP_PARSE_OK);
	assert_int_equal(respond_plan(fx->cfg, &lk, &req, &clock, 0, out,
				      sizeof(out), &plan),
			 0);
	return plan.status;
}

/* A HEAD goes through the cache like a GET, read check included: once
 * known, it is answered with no system call at all (here: the file is
 * gone, the event not read yet, and the answer is still the entry's). */
static void test_head_is_planned_from_the_cache(void **state)
{
	struct fixture *fx = *state;
	int fds = count_fds();

	assert_int_equal(plan_head(fx, "/top.txt"), 200);
	assert_int_equal(plan_head(fx, "/top.txt"), 200);
	assert_int_equal(ctr(fx, SC_HITS), 1);
	assert_int_equal(unlink(at("top.txt")), 0);
	assert_int_equal(plan_head(fx, "/top.txt"), 200);
	stat_cache_sync(fx->sc);
	assert_int_equal(plan_head(fx, "/top.txt"), 404);
	assert_int_equal(count_fds(), fds);
}

/* Rewrite rel in place with text of the same length and its times put
 * back (as cp -p or rsync --inplace -t do): same inode, size, mtime. */
static void rewrite_keeping_times(const char *rel, const char *text)
{
	struct stat st;
	struct timespec ts[2];
	int fd;

	assert_int_equal(stat(at(rel), &st), 0);
	ts[0] = st.st_atim;
	ts[1] = st.st_mtim;
	fd = open(at(rel), O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, text, strlen(text), 0),
			 (ssize_t)strlen(text));
	assert_int_equal(close(fd), 0);
	assert_int_equal(utimensat(AT_FDCWD, at(rel), ts, 0), 0);
}

/* Bytes a chain read before a change are not kept after it: the change's
 * events forgot the facts, a later lookup found the same ones again (an
 * in-place rewrite with its times put back), and only then did the old
 * read's keep_data come (its send was still in flight). */
static void test_bytes_read_before_a_change_are_not_kept(void **state)
{
	struct fixture *fx = *state;
	struct file_meta before, after;
	struct sc_body *b;

	put_file("same.txt", "old old old\n");
	assert_int_equal(lookup(fx, "same.txt", &before), 0);
	/* The chain read "old..." here; then the file changes. */
	rewrite_keeping_times("same.txt", "new new new\n");
	stat_cache_sync(fx->sc);
	assert_int_equal(lookup(fx, "same.txt", &after), 0);
	assert_int_equal(after.ino, before.ino);
	assert_int_equal(after.mtime_nsec, before.mtime_nsec);
	stat_cache_keep_data(fx->sc, fx->cfg, "same.txt", &before,
			     "old old old\n", 12);
	b = stat_cache_body(fx->sc, fx->cfg, "same.txt", &after);
	if (b) {
		bool old = memcmp(b->data, "old", 3) == 0;

		stat_cache_body_put(b);
		assert_false(old);
	}
	/* Bytes read after the lookup that found these facts are kept. */
	stat_cache_keep_data(fx->sc, fx->cfg, "same.txt", &after,
			     "new new new\n", 12);
	b = stat_cache_body(fx->sc, fx->cfg, "same.txt", &after);
	assert_non_null(b);
	assert_memory_equal(b->data, "new new new\n", 12);
	stat_cache_body_put(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_second_lookup_is_a_hit,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_changes_are_seen, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_rewrites_in_a_row, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_batch_mark_reads_at_next_lookup, setup, teardown),
		cmocka_unit_test(test_filesystem_types),
		cmocka_unit_test_setup_teardown(test_symlinks_are_not_cached,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_missing_is_cached_until_created, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_directory_attrib_drops_beneath, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_changes_elsewhere_keep_hits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_overflow_empties, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_overflow_without_a_spare_instance, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_full_cache_evicts_least_recent, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_full_cache_holds_exactly_n, setup, teardown),
		cmocka_unit_test_setup_teardown(test_watches_follow_entries,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_readable_is_kept, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_head_is_planned_from_the_cache, setup, teardown),
		cmocka_unit_test_setup_teardown(test_forget_is_per_path, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_off_and_other_configs_bypass, setup, teardown),
		cmocka_unit_test_setup_teardown(test_buckets_follow_a_reload,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_fd_leaks, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_bytes_read_before_a_change_are_not_kept, setup,
			teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
