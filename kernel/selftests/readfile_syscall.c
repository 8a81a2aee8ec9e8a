// SPDX-License-Identifier: GPL-2.0
/*
 * readfile(dfd, path, buf, bufsize, flags): open, one read from offset 0,
 * close, in one call and without an fd.  Every result is compared with
 * what openat() + read() + close() give for the same file.
 */
#include "fdcheck.h"
#include "probe.h"
#include "readfile_abi.h"
#include "specific_fd_abi.h"
#include "tap.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define BUFSZ 65536

static char buf_a[BUFSZ], buf_b[BUFSZ], buf_c[BUFSZ];

static long rf(int dfd, const char *path, void *buf, size_t len, int flags)
{
	long n = sys_readfile(dfd, path, buf, len, flags);

	return n < 0 ? -errno : n;
}

/* A file of @len bytes of a recognisable pattern in a fresh directory. */
static char *make_pattern_file(const char *name, size_t len, char **dirp)
{
	static char pattern[BUFSZ];
	char *dir = make_tmpdir(), *path;
	size_t i;

	if (!dir)
		return NULL;
	for (i = 0; i < len && i < sizeof(pattern); i++)
		pattern[i] = (char)('a' + (i * 7 + i / 26) % 26);
	if (asprintf(&path, "%s/%s", dir, name) < 0)
		return NULL;
	if (write_file(path, pattern, len) != 0)
		return NULL;
	if (dirp)
		*dirp = dir;
	return path;
}

/*
 * Compare readfile() with open/read/close on @path.  Files that change
 * between two classic reads (counters, timestamps) cannot be compared and
 * return 1; 0 on a match; -1 on a mismatch (diagnosed).
 */
static int compare_one(const char *path)
{
	long a, b, c;

	a = open_read_close(AT_FDCWD, path, buf_a, BUFSZ, 0);
	b = rf(AT_FDCWD, path, buf_b, BUFSZ, 0);
	c = open_read_close(AT_FDCWD, path, buf_c, BUFSZ, 0);
	if (a != c || (a > 0 && memcmp(buf_a, buf_c, a)))
		return 1;
	if (a != b || (a > 0 && memcmp(buf_a, buf_b, a))) {
		tap_diag("%s: open/read/close gave %ld, readfile %ld%s", path,
			 a, b, a == b ? " with different bytes" : "");
		return -1;
	}
	return 0;
}

static int test_regular(void)
{
	static const size_t sizes[] = { 0, 1, 4095, 4096, 4097, 40000 };
	size_t i;

	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		char *p = make_pattern_file("f", sizes[i], NULL);
		long n;

		CHECK(p, "make file of %zu bytes", sizes[i]);
		n = rf(AT_FDCWD, p, buf_b, BUFSZ, 0);
		CHECK(n == (long)sizes[i], "%zu-byte file: readfile gave %ld",
		      sizes[i], n);
		CHECK(compare_one(p) == 0, "%zu-byte file differs", sizes[i]);
	}
	return TAP_PASS;
}

/* Compare every path in @paths; at least @min_stable must be comparable. */
static int compare_set(char **paths, size_t n, size_t min_stable,
		       const char *what)
{
	size_t i, stable = 0, zero_size = 0;
	struct stat st;

	for (i = 0; i < n; i++) {
		int r = compare_one(paths[i]);

		CHECK(r >= 0, "%s differs", paths[i]);
		if (r == 0) {
			stable++;
			if (stat(paths[i], &st) == 0 && st.st_size == 0 &&
			    open_read_close(AT_FDCWD, paths[i], buf_a, BUFSZ,
					    0) > 0)
				zero_size++;
		}
	}
	tap_diag("%s: %zu files, %zu stable ones compared", what, n, stable);
	tap_diag("%s: %zu of those have st_size 0 but content", what,
		 zero_size);
	CHECK(stable >= min_stable, "only %zu stable %s files", stable, what);
	return TAP_PASS;
}

static int test_proc(void)
{
	static char *paths[] = {
		"/proc/version",	    "/proc/filesystems",
		"/proc/self/cmdline",	    "/proc/self/environ",
		"/proc/self/maps",	    "/proc/self/limits",
		"/proc/sys/fs/nr_open",	    "/proc/sys/kernel/ostype",
		"/proc/self/stat",	    "/proc/self/status",
		"/proc/1/cmdline",	    "/proc/1/stat",
		"/proc/cmdline",	    "/proc/meminfo",
	};
	struct stat st;

	/* the case this is for: a file that says it is empty */
	CHECK(stat("/proc/version", &st) == 0 && st.st_size == 0,
	      "/proc/version st_size %lld", (long long)st.st_size);
	CHECK(rf(AT_FDCWD, "/proc/version", buf_b, BUFSZ, 0) > 0,
	      "readfile(/proc/version): %s", strerror(errno));
	return compare_set(paths, ARRAY_SIZE(paths), 8, "/proc");
}

/* Collect up to @max readable regular files under @dir into @paths. */
static void collect(const char *dir, char **paths, size_t *n, size_t max,
		    int depth)
{
	struct dirent *de;
	DIR *d;

	if (depth > 6 || *n >= max)
		return;
	d = opendir(dir);
	if (!d)
		return;
	while (*n < max && (de = readdir(d))) {
		struct stat st;
		char *p;

		if (de->d_name[0] == '.')
			continue;
		if (asprintf(&p, "%s/%s", dir, de->d_name) < 0)
			break;
		if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
			collect(p, paths, n, max, depth + 1);
			free(p);
		} else if (S_ISREG(st.st_mode) && (st.st_mode & 0400) &&
			   open_read_close(AT_FDCWD, p, buf_a, BUFSZ, 0) >= 0) {
			paths[(*n)++] = p;
		} else {
			free(p);
		}
	}
	closedir(d);
}

static int test_sysfs(void)
{
	static char *paths[300];
	size_t n = 0;

	collect("/sys/devices/system", paths, &n, 200, 0);
	collect("/sys/kernel", paths, &n, 300, 0);
	CHECK(n > 0, "no readable sysfs files found");
	return compare_set(paths, n, n / 2 ? n / 2 : 1, "sysfs");
}

static int test_short_buffer(void)
{
	char *p = make_pattern_file("f", 10000, NULL);
	static char big[10000];
	long n;

	CHECK(p, "make file");
	n = open_read_close(AT_FDCWD, p, big, sizeof(big), 0);
	CHECK(n == 10000, "open/read/close gave %ld", n);
	memset(buf_b, 'X', 200);
	n = rf(AT_FDCWD, p, buf_b, 100, 0);
	CHECK(n == 100, "bufsize 100 gave %ld", n);
	CHECK(!memcmp(buf_b, big, 100), "first 100 bytes differ");
	CHECK(buf_b[100] == 'X' && buf_b[199] == 'X',
	      "wrote past the buffer");
	n = rf(AT_FDCWD, p, buf_b, 0, 0);
	CHECK(n == 0, "bufsize 0 gave %ld", n);
	/* /proc too: the seq_file stops at bufsize */
	n = rf(AT_FDCWD, "/proc/self/maps", buf_b, 10, 0);
	CHECK(n == 10, "/proc/self/maps with bufsize 10 gave %ld", n);
	/* a device: one read of exactly bufsize */
	memset(buf_b, 'X', 5000);
	n = rf(AT_FDCWD, "/dev/zero", buf_b, 4321, 0);
	CHECK(n == 4321, "/dev/zero with bufsize 4321 gave %ld", n);
	CHECK(buf_b[0] == 0 && buf_b[4320] == 0 && buf_b[4321] == 'X',
	      "/dev/zero: wrong bytes or past the buffer");
	return TAP_PASS;
}

static int test_errors(void)
{
	char *dir = NULL, *p = make_pattern_file("f", 10, &dir), *q;
	long n;

	CHECK(p, "make file");
	n = rf(AT_FDCWD, dir, buf_b, BUFSZ, 0);
	CHECK(n == -EISDIR, "directory gave %ld, want -EISDIR", n);
	CHECK(open_read_close(AT_FDCWD, dir, buf_a, BUFSZ, 0) == -EISDIR,
	      "open/read of a directory is not EISDIR either");
	CHECK(asprintf(&q, "%s/missing", dir) > 0, "asprintf");
	n = rf(AT_FDCWD, q, buf_b, BUFSZ, 0);
	CHECK(n == -ENOENT, "missing file gave %ld, want -ENOENT", n);
	CHECK(asprintf(&q, "%s/f/below", dir) > 0, "asprintf");
	n = rf(AT_FDCWD, q, buf_b, BUFSZ, 0);
	CHECK(n == -ENOTDIR, "file as a directory gave %ld, want -ENOTDIR", n);
	n = rf(AT_FDCWD, "", buf_b, BUFSZ, 0);
	CHECK(n == -ENOENT, "empty path gave %ld, want -ENOENT", n);
	return TAP_PASS;
}

static int test_bad_flags(void)
{
	static const int bad[] = {
		O_WRONLY,  O_RDWR,    O_CREAT,	  O_TRUNC,	O_APPEND,
		O_CLOEXEC, O_PATH,    O_DIRECTORY, O_NONBLOCK,	O_DIRECT,
		O_SYNC,	   O_TMPFILE, O_EXCL,	  O_SPECIFIC_FD, INT_MIN,
		-1,	   0x1,	      O_NOFOLLOW | O_CLOEXEC,
	};
	size_t i;
	long n;

	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		n = rf(AT_FDCWD, "/proc/version", buf_b, BUFSZ, bad[i]);
		CHECK(n == -EINVAL, "flags %#x gave %ld, want -EINVAL",
		      (unsigned int)bad[i], n);
	}
	/* flags are checked first: no path or buffer is touched */
	n = rf(AT_FDCWD, (const char *)8, (void *)8, BUFSZ, O_CLOEXEC);
	CHECK(n == -EINVAL, "bad flags with bad pointers gave %ld", n);
	n = rf(AT_FDCWD, "/proc/version", buf_b, BUFSZ, O_NOFOLLOW | O_NOATIME);
	CHECK(n > 0, "O_NOFOLLOW | O_NOATIME gave %ld", n);
	return TAP_PASS;
}

static int test_nofollow(void)
{
	char *dir = NULL, *p = make_pattern_file("target", 3000, &dir), *link;
	long n;

	CHECK(p, "make file");
	CHECK(asprintf(&link, "%s/link", dir) > 0, "asprintf");
	CHECK(symlink("target", link) == 0, "symlink: %s", strerror(errno));
	n = rf(AT_FDCWD, link, buf_b, BUFSZ, O_NOFOLLOW);
	CHECK(n == -ELOOP, "O_NOFOLLOW on a symlink gave %ld, want -ELOOP", n);
	n = open_read_close(AT_FDCWD, link, buf_a, BUFSZ, O_NOFOLLOW);
	CHECK(n == -ELOOP, "openat(O_NOFOLLOW) gave %ld", n);
	n = rf(AT_FDCWD, link, buf_b, BUFSZ, 0);
	CHECK(n == 3000, "symlink followed without O_NOFOLLOW gave %ld", n);
	CHECK(compare_one(link) == 0, "contents through the symlink differ");
	n = rf(AT_FDCWD, p, buf_b, BUFSZ, O_NOFOLLOW);
	CHECK(n == 3000, "O_NOFOLLOW on the file itself gave %ld", n);
	/* O_NOFOLLOW only concerns the last component */
	CHECK(asprintf(&link, "%s/dirlink", dir) > 0, "asprintf");
	CHECK(symlink(".", link) == 0, "symlink: %s", strerror(errno));
	CHECK(asprintf(&link, "%s/dirlink/target", dir) > 0, "asprintf");
	n = rf(AT_FDCWD, link, buf_b, BUFSZ, O_NOFOLLOW);
	CHECK(n == 3000, "symlink in the middle with O_NOFOLLOW gave %ld", n);
	return TAP_PASS;
}

static int test_noatime(void)
{
	char *p = make_pattern_file("f", 100, NULL);
	long n;

	CHECK(p, "make file");
	n = rf(AT_FDCWD, p, buf_b, BUFSZ, O_NOATIME);
	CHECK(n == 100, "O_NOATIME on an own file gave %ld", n);
	return TAP_PASS;
}

static int test_dfd(void)
{
	char *dir = NULL, *p = make_pattern_file("f", 5000, &dir);
	int dfd, ffd, count;
	long n;

	CHECK(p, "make file");
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK(dfd >= 0, "open dir: %s", strerror(errno));
	n = rf(dfd, "f", buf_b, BUFSZ, 0);
	CHECK(n == 5000, "relative to a dir fd gave %ld", n);
	CHECK(open_read_close(dfd, "f", buf_a, BUFSZ, 0) == 5000,
	      "openat relative to the dir fd");
	CHECK(!memcmp(buf_a, buf_b, 5000), "contents differ");
	n = rf(dfd, "/proc/version", buf_b, BUFSZ, 0);
	CHECK(n > 0, "absolute path with a dir fd gave %ld", n);
	n = rf(-1, "/proc/version", buf_b, BUFSZ, 0);
	CHECK(n > 0, "absolute path with dfd -1 gave %ld", n);
	CHECK(chdir(dir) == 0, "chdir");
	n = rf(AT_FDCWD, "f", buf_b, BUFSZ, 0);
	CHECK(n == 5000, "relative to AT_FDCWD gave %ld", n);
	n = rf(-1, "f", buf_b, BUFSZ, 0);
	CHECK(n == -EBADF, "dfd -1 gave %ld, want -EBADF", n);
	n = rf(fd_lowest_free(100), "f", buf_b, BUFSZ, 0);
	CHECK(n == -EBADF, "closed dfd gave %ld, want -EBADF", n);
	ffd = openat(dfd, "f", O_RDONLY | O_CLOEXEC);
	CHECK(ffd >= 0, "open file");
	n = rf(ffd, "f", buf_b, BUFSZ, 0);
	CHECK(n == -ENOTDIR, "file as dfd gave %ld, want -ENOTDIR", n);
	/* an O_PATH dir fd works as a base, as for openat */
	close(dfd);
	dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK(dfd >= 0, "O_PATH dir");
	count = fd_count();
	n = rf(dfd, "f", buf_b, BUFSZ, 0);
	CHECK(n == 5000, "relative to an O_PATH dir fd gave %ld", n);
	CHECK(fd_count() == count, "fd count changed");
	return TAP_PASS;
}

static int test_efault(void)
{
	long page = sysconf(_SC_PAGESIZE), n;
	char *none, *ro;
	int count = fd_count();

	none = mmap(NULL, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ro = mmap(NULL, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(none != MAP_FAILED && ro != MAP_FAILED, "mmap");
	n = rf(AT_FDCWD, "/proc/version", NULL, 100, 0);
	CHECK(n == -EFAULT, "NULL buffer gave %ld", n);
	n = rf(AT_FDCWD, "/proc/version", none, 100, 0);
	CHECK(n == -EFAULT, "PROT_NONE buffer gave %ld", n);
	n = rf(AT_FDCWD, "/proc/version", ro, 100, 0);
	CHECK(n == -EFAULT, "read-only buffer gave %ld", n);
	n = rf(AT_FDCWD, "/proc/version", (void *)-4096L, 100, 0);
	CHECK(n == -EFAULT, "kernel address as buffer gave %ld", n);
	n = rf(AT_FDCWD, "/dev/zero", none, 100, 0);
	CHECK(n == -EFAULT, "/dev/zero into PROT_NONE gave %ld", n);
	n = rf(AT_FDCWD, NULL, buf_b, 100, 0);
	CHECK(n == -EFAULT, "NULL path gave %ld", n);
	n = rf(AT_FDCWD, none, buf_b, 100, 0);
	CHECK(n == -EFAULT, "PROT_NONE path gave %ld", n);
	n = rf(AT_FDCWD, (const char *)-4096L, buf_b, 100, 0);
	CHECK(n == -EFAULT, "kernel address as path gave %ld", n);
	/* the buffer is checked before the open: it wins over a missing file */
	n = rf(AT_FDCWD, "/nonexistent", none, 100, 0);
	CHECK(n == -EFAULT, "missing file with a bad buffer gave %ld", n);
	n = rf(AT_FDCWD, "/nonexistent", NULL, 100, 0);
	CHECK(n == -EFAULT, "missing file with a NULL buffer gave %ld", n);
	/* a good first page is enough to get to the open */
	n = rf(AT_FDCWD, "/nonexistent", buf_b, 100, 0);
	CHECK(n == -ENOENT, "missing file with a good buffer gave %ld", n);
	CHECK(fd_count() == count, "fd count %d -> %d", count, fd_count());
	/* and the calls still work afterwards */
	CHECK(rf(AT_FDCWD, "/proc/version", buf_b, BUFSZ, 0) > 0, "after");
	return TAP_PASS;
}

/* No fd is ever allocated: works with the fd table full, leaves no trace. */
/*
 * A bad buffer fails before the open: readfile() of a FIFO that has no
 * writer must return EFAULT at once instead of blocking in the open. The
 * call runs in a child; if it is still blocked after WAIT_S the FIFO gets
 * a writer so that the child can finish, and the test fails.
 */
#define WAIT_S 20

static int test_bad_buffer_before_open(void)
{
	char fifo[4200], *dir = make_tmpdir();
	struct timespec pause = { 0, 1000000 };
	int status, waited_ms = 0, w;
	pid_t pid, r;

	CHECK(dir, "mkdtemp");
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	CHECK(mkfifo(fifo, 0600) == 0, "mkfifo: %s", strerror(errno));
	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0)
		_exit(rf(AT_FDCWD, fifo, NULL, 100, 0) == -EFAULT ? 0 : 1);
	while ((r = waitpid(pid, &status, WNOHANG)) == 0 &&
	       waited_ms < WAIT_S * 1000) {
		nanosleep(&pause, NULL);
		waited_ms++;
	}
	if (r == 0) {
		w = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
		waitpid(pid, &status, 0);
		if (w >= 0)
			close(w);
		CHECK(0, "readfile() of a writerless FIFO with a NULL buffer "
		      "blocked in the open (still there after %d s)", WAIT_S);
	}
	CHECK(r == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "readfile() of a FIFO with a NULL buffer did not fail with EFAULT");
	/* and nobody opened the FIFO for reading meanwhile */
	w = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	CHECK(w < 0 && errno == ENXIO, "the FIFO has a reader (%s)",
	      w < 0 ? strerror(errno) : "opened");
	return TAP_PASS;
}

static int test_no_fd_used(void)
{
	struct rlimit rl;
	int count = fd_count(), i, lowest = fd_lowest_free(0), fd;
	long n;

	for (i = 0; i < 1000; i++) {
		n = rf(AT_FDCWD, "/proc/self/stat", buf_b, BUFSZ, 0);
		CHECK(n > 0, "round %d: %ld", i, n);
	}
	CHECK(fd_count() == count, "fd count %d -> %d", count, fd_count());
	CHECK(fd_lowest_free(0) == lowest, "lowest free fd moved");

	/* fill every fd below the limit */
	rl.rlim_cur = 64;
	rl.rlim_max = 64;
	CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit");
	while ((fd = open("/dev/null", O_RDONLY)) >= 0)
		;
	CHECK(errno == EMFILE, "open stopped with %s", strerror(errno));
	n = rf(AT_FDCWD, "/proc/version", buf_b, BUFSZ, 0);
	CHECK(n > 0, "readfile with no free fd gave %ld", n);
	n = open_read_close(AT_FDCWD, "/proc/version", buf_a, BUFSZ, 0);
	CHECK(n == -EMFILE, "open/read/close with no free fd gave %ld", n);
	return TAP_PASS;
}

/*
 * Threads read files in a loop while the main thread forks; every child
 * checks that its fd table is exactly the one the parent had before the
 * threads started.  With openat() in the threads a child would now and
 * then inherit a half-way file; with readfile() there is nothing to see.
 */
#define FORK_ROUNDS 400
#define MAX_FD_SEEN 256

static atomic_bool stop;
static atomic_long reads_done;
static atomic_int readers_failed;
static const char *stress_path;
static bool use_openat;

static void *reader(void *arg)
{
	char buf[512];

	(void)arg;
	while (!atomic_load(&stop)) {
		long n;

		if (use_openat)
			n = open_read_close(AT_FDCWD, stress_path, buf,
					    sizeof(buf), 0);
		else
			n = rf(AT_FDCWD, stress_path, buf, sizeof(buf), 0);
		if (n <= 0) {
			atomic_fetch_add(&readers_failed, 1);
			return (void *)1;
		}
		atomic_fetch_add(&reads_done, 1);
	}
	return NULL;
}

/* Forks FORK_ROUNDS children; returns how many saw an fd not in @base. */
static int fork_and_check(const bool *base, int *errors)
{
	int i, seen = 0;

	for (i = 0; i < FORK_ROUNDS; i++) {
		int status, fd;
		pid_t pid = fork();

		if (pid < 0) {
			(*errors)++;
			continue;
		}
		if (pid == 0) {
			for (fd = 0; fd < MAX_FD_SEEN; fd++)
				if ((fcntl(fd, F_GETFD) >= 0) != base[fd])
					_exit(1);
			_exit(0);
		}
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
			(*errors)++;
		else if (WEXITSTATUS(status))
			seen++;
	}
	return seen;
}

static int run_stress(bool openat_readers, int *seen, int *errors)
{
	bool base[MAX_FD_SEEN];
	pthread_t th[2];
	void *ret;
	int i, fd;

	for (fd = 0; fd < MAX_FD_SEEN; fd++)
		base[fd] = fcntl(fd, F_GETFD) >= 0;
	use_openat = openat_readers;
	atomic_store(&stop, false);
	atomic_store(&reads_done, 0);
	atomic_store(&readers_failed, 0);
	for (i = 0; i < 2; i++)
		if (pthread_create(&th[i], NULL, reader, NULL))
			return -1;
	/* make sure the readers are running before forking */
	while (atomic_load(&reads_done) < 10 && !atomic_load(&readers_failed))
		sched_yield();
	*errors = 0;
	*seen = fork_and_check(base, errors);
	atomic_store(&stop, true);
	for (i = 0; i < 2; i++) {
		pthread_join(th[i], &ret);
		if (ret)
			(*errors)++;
	}
	return 0;
}

static int test_fork_stress(void)
{
	int seen, errors;

	stress_path = "/proc/self/status";
	CHECK(run_stress(false, &seen, &errors) == 0, "pthread_create");
	tap_diag("readfile threads: %d of %d children saw an extra fd",
		 seen, FORK_ROUNDS);
	tap_diag("(%ld reads during the forks)", atomic_load(&reads_done));
	CHECK(errors == 0, "%d forks, waits or reads failed", errors);
	CHECK(seen == 0, "%d children inherited an fd from readfile()", seen);
	/* for comparison only (timing-dependent, never judged) */
	CHECK(run_stress(true, &seen, &errors) == 0, "pthread_create");
	tap_diag("for comparison, open/read/close threads: %d of %d children",
		 seen, FORK_ROUNDS);
	return TAP_PASS;
}

static const struct tap_test tests[] = {
	{ "regular files of several sizes read as with open/read/close",
	  test_regular, HAVE_READFILE },
	{ "/proc files (st_size 0) read as with open/read/close", test_proc,
	  HAVE_READFILE },
	{ "sysfs attributes read as with open/read/close", test_sysfs,
	  HAVE_READFILE },
	{ "a short buffer gets bufsize bytes and nothing past it",
	  test_short_buffer, HAVE_READFILE },
	{ "EISDIR, ENOENT, ENOTDIR as openat/read give them", test_errors,
	  HAVE_READFILE },
	{ "every flag but O_NOFOLLOW and O_NOATIME is EINVAL", test_bad_flags,
	  HAVE_READFILE },
	{ "O_NOFOLLOW on a symlink is ELOOP; without it the link is followed",
	  test_nofollow, HAVE_READFILE },
	{ "O_NOATIME on an own file", test_noatime, HAVE_READFILE },
	{ "paths relative to a dir fd, AT_FDCWD, EBADF, ENOTDIR", test_dfd,
	  HAVE_READFILE },
	{ "bad buffer and path pointers are EFAULT, nothing leaks",
	  test_efault, HAVE_READFILE },
	{ "a bad buffer is EFAULT before the open: no blocking on a FIFO",
	  test_bad_buffer_before_open, HAVE_READFILE },
	{ "no fd is used: fd table unchanged, works at RLIMIT_NOFILE",
	  test_no_fd_used, HAVE_READFILE },
	{ "fork during concurrent readfile(): no child ever sees an fd",
	  test_fork_stress, HAVE_READFILE },
};

int main(void)
{
	static const struct tap_feature features[] = {
		{ HAVE_READFILE, MISSING_READFILE },
	};
	unsigned int have;

	tap_plan(ARRAY_SIZE(tests));
	have = probe_features();
	return tap_run(tests, ARRAY_SIZE(tests), have, features,
		       ARRAY_SIZE(features));
}
