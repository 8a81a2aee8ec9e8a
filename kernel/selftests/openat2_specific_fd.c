// SPDX-License-Identifier: GPL-2.0
/*
 * openat2(2) with O_SPECIFIC_FD: the file is installed at exactly how.fd.
 */
#include "fdcheck.h"
#include "fifo_block.h"
#include "probe.h"
#include "specific_fd_abi.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static int test_chosen_fd(void)
{
	char path[4200], buf[16] = { 0 };
	char *dir = make_tmpdir();
	int want, fd;

	CHECK(dir, "mkdtemp: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/f", dir);
	CHECK(write_file(path, "chosen", 6) == 0, "write %s", path);
	want = fd_lowest_free(fd_lowest_free(0) + 7);

	fd = open_at_fd(path, O_RDONLY, want);
	CHECK(fd == want, "openat2 returned %d (%s), wanted %d", fd,
	      fd < 0 ? strerror(errno) : "ok", want);
	CHECK(fd_ino(want) == path_ino(path), "fd %d is not %s", want, path);
	CHECK(read(want, buf, sizeof(buf)) == 6 && !memcmp(buf, "chosen", 6),
	      "read through fd %d gave the wrong bytes", want);
	return TAP_PASS;
}

static int test_fd_zero(void)
{
	int fd;

	close(0);
	fd = open_at_fd("/dev/null", O_RDONLY, 0);
	CHECK(fd == 0, "openat2 at fd 0 returned %d (%s)", fd,
	      fd < 0 ? strerror(errno) : "ok");
	CHECK(fd_ino(0) == path_ino("/dev/null"), "fd 0 is not /dev/null");
	return TAP_PASS;
}

static int test_ebusy_open(void)
{
	int busy = fd_lowest_free(40), fd, count;

	CHECK(dup2(1, busy) == busy, "dup2: %s", strerror(errno));
	count = fd_count();
	fd = open_at_fd("/dev/null", O_RDONLY, busy);
	CHECK(fd < 0 && errno == EBUSY, "openat2 at open fd %d returned %d (%s)",
	      busy, fd, fd < 0 ? strerror(errno) : "success");
	CHECK(fd_ino(busy) == fd_ino(1), "fd %d was replaced", busy);
	CHECK(fd_count() == count, "fd count changed: %d -> %d", count,
	      fd_count());
	return TAP_PASS;
}

static int test_ebusy_reserved(void)
{
	struct fifo_block b;
	char c = 'x';
	int fd, wr;

	if (fifo_block_start(&b, fd_lowest_free(50)))
		return TAP_FAIL;

	/* fd is reserved, not installed: not visible, but not free either */
	CHECK(!fd_is_open(b.want), "reserved fd %d already installed", b.want);
	fd = open_at_fd("/dev/null", O_RDONLY, b.want);
	CHECK(fd < 0 && errno == EBUSY,
	      "openat2 at reserved fd %d returned %d (%s)", b.want, fd,
	      fd < 0 ? strerror(errno) : "success: fd handed out twice");
	fd = dup2(1, b.want);
	CHECK(fd < 0 && errno == EBUSY, "dup2 to reserved fd %d returned %d",
	      b.want, fd);

	wr = fifo_block_finish(&b);
	CHECK(wr >= 0, "no writer for the FIFO");
	CHECK(b.result == b.want, "blocked openat2 returned %d (%s), wanted %d",
	      b.result, b.result < 0 ? strerror(b.err) : "ok", b.want);
	CHECK(write(wr, &c, 1) == 1, "write FIFO");
	c = 0;
	CHECK(read(b.want, &c, 1) == 1 && c == 'x', "read FIFO via fd %d",
	      b.want);
	return TAP_PASS;
}

/*
 * fork() while openat2 sleeps holding a reservation: the child's copy of
 * the table must not keep a slot nothing will ever be installed in.
 */
static int test_fork_drops_reservation(void)
{
	struct fifo_block b;
	int status, wr;
	pid_t pid;

	if (fifo_block_start(&b, fd_lowest_free(60)))
		return TAP_FAIL;
	pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		int fd = open_at_fd("/dev/null", O_RDONLY, b.want);

		if (fd != b.want) {
			tap_diag("child: openat2 at fd %d: %d (%s)", b.want, fd,
				 fd < 0 ? strerror(errno) : "wrong fd");
			_exit(1);
		}
		_exit(close(fd) == 0 ? 0 : 1);
	}
	CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
	wr = fifo_block_finish(&b);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "the child could not use the fd its parent had reserved");
	CHECK(wr >= 0, "no writer for the FIFO");
	CHECK(b.result == b.want, "blocked openat2 returned %d (%s), wanted %d",
	      b.result, b.result < 0 ? strerror(b.err) : "ok", b.want);
	return TAP_PASS;
}

#define RACERS 4
#define ROUNDS 200

struct racer {
	pthread_barrier_t *start, *done;
	int want;
	int wins, busy, other;
};

static void *racer(void *p)
{
	struct racer *r = p;

	for (int i = 0; i < ROUNDS; i++) {
		int fd;

		pthread_barrier_wait(r->start);
		fd = open_at_fd("/dev/null", O_RDONLY, r->want);
		if (fd == r->want)
			r->wins++;
		else if (fd < 0 && errno == EBUSY)
			r->busy++;
		else
			r->other++;
		pthread_barrier_wait(r->done);
	}
	return NULL;
}

static int test_race_same_fd(void)
{
	pthread_barrier_t start, done;
	struct racer r[RACERS];
	pthread_t th[RACERS];
	int want = fd_lowest_free(60), wins = 0, busy = 0, other = 0, i;

	pthread_barrier_init(&start, NULL, RACERS + 1);
	pthread_barrier_init(&done, NULL, RACERS + 1);
	for (i = 0; i < RACERS; i++) {
		r[i] = (struct racer){ &start, &done, want, 0, 0, 0 };
		CHECK(pthread_create(&th[i], NULL, racer, &r[i]) == 0, "thread");
	}
	for (int round = 0; round < ROUNDS; round++) {
		pthread_barrier_wait(&start);
		pthread_barrier_wait(&done);
		if (close(want) && other++ < 3)
			tap_diag("round %d: nobody got fd %d", round, want);
	}
	for (i = 0; i < RACERS; i++) {
		pthread_join(th[i], NULL);
		wins += r[i].wins;
		busy += r[i].busy;
		other += r[i].other;
	}
	CHECK(wins == ROUNDS && busy == ROUNDS * (RACERS - 1) && !other,
	      "%d rounds of %d racers: %d won, %d EBUSY, %d other", ROUNDS,
	      RACERS, wins, busy, other);
	return TAP_PASS;
}

static int test_ebadf_rlimit(void)
{
	struct rlimit rl;
	int fd;

	CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit");
	rl.rlim_cur = 64;
	CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit: %s",
	      strerror(errno));
	CHECK(!fd_is_open(63), "fd 63 unexpectedly open");

	fd = open_at_fd("/dev/null", O_RDONLY, 64);
	CHECK(fd < 0 && errno == EBADF, "fd == RLIMIT_NOFILE gave %d (%s)", fd,
	      fd < 0 ? strerror(errno) : "success");
	fd = open_at_fd("/dev/null", O_RDONLY, 63);
	CHECK(fd == 63, "fd == RLIMIT_NOFILE - 1 gave %d (%s)", fd,
	      fd < 0 ? strerror(errno) : "ok");
	fd = open_at_fd("/dev/null", O_RDONLY, 1000);
	CHECK(fd < 0 && errno == EBADF, "fd 1000 gave %d (%s)", fd,
	      fd < 0 ? strerror(errno) : "success");
	/* fd is unsigned: values that are negative as int must not slip by */
	fd = open_at_fd("/dev/null", O_RDONLY, 0x80000000u);
	CHECK(fd < 0 && errno == EBADF, "fd 0x80000000 gave %d (%s)", fd,
	      fd < 0 ? strerror(errno) : "success");
	fd = open_at_fd("/dev/null", O_RDONLY, 0xfffffffeu);
	CHECK(fd < 0 && errno == EBADF, "fd 0xfffffffe gave %d (%s)", fd,
	      fd < 0 ? strerror(errno) : "success");
	return TAP_PASS;
}

/*
 * fs.nr_open lowered below RLIMIT_NOFILE: a chosen fd the limit allows
 * but the table cannot grow to is EMFILE (expand_files()), and nothing
 * is left installed.
 */
static int test_emfile_above_nr_open(void)
{
	long nr_open = read_nr_open();
	struct rlimit rl;
	int fd, err;

	if (geteuid() != 0)
		return tap_skip("writing /proc/sys/fs/nr_open needs root");
	CHECK(nr_open >= 1024, "cannot read /proc/sys/fs/nr_open");
	CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit");
	if (rl.rlim_cur < 1024) {
		rl.rlim_cur = 1024;
		if (rl.rlim_max < 1024)
			rl.rlim_max = 1024;
		CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit: %s",
		      strerror(errno));
	}
	CHECK(!fd_is_open(600), "fd 600 unexpectedly open");
	CHECK(write_nr_open(512), "lowering nr_open: %s", strerror(errno));
	fd = open_at_fd("/dev/null", O_RDONLY, 600);
	err = errno;
	CHECK(write_nr_open(nr_open), "restoring nr_open %ld: %s", nr_open,
	      strerror(errno));
	CHECK(fd < 0 && err == EMFILE,
	      "fd 600 with nr_open 512 and RLIMIT_NOFILE %lu gave %d (%s)",
	      (unsigned long)rl.rlim_cur, fd, fd < 0 ? strerror(err) : "ok");
	CHECK(!fd_is_open(600), "fd 600 left open");
	return TAP_PASS;
}

static int test_any_fd(void)
{
	int want = fd_lowest_free(0);
	int fd = open_at_fd("/dev/null", O_RDONLY, SPECIFIC_FD_ANY);

	CHECK(fd == want, "fd (u32)-1 gave %d (%s), lowest free is %d", fd,
	      fd < 0 ? strerror(errno) : "ok", want);
	return TAP_PASS;
}

static int expect_einval(const char *what, __u64 flags, __u32 fd, __u32 pad)
{
	struct open_how_v1 how = { .flags = flags, .fd = fd, .__padding = pad };
	int count = fd_count();
	int r = sys_openat2(AT_FDCWD, "/dev/null", &how, sizeof(how));

	CHECK(r < 0 && errno == EINVAL, "%s: returned %d (%s)", what, r,
	      r < 0 ? strerror(errno) : "success");
	CHECK(fd_count() == count, "%s: fd count changed", what);
	return TAP_PASS;
}

static int test_einval(void)
{
	int w = fd_lowest_free(70);

	if (expect_einval("__padding with the flag", O_RDONLY | O_SPECIFIC_FD,
			  w, 1) ||
	    expect_einval("__padding 0x80000000 with the flag",
			  O_RDONLY | O_SPECIFIC_FD, w, 0x80000000u) ||
	    expect_einval("__padding without the flag", O_RDONLY, 0, 1) ||
	    expect_einval("fd without the flag", O_RDONLY, w, 0) ||
	    expect_einval("fd (u32)-1 without the flag", O_RDONLY,
			  SPECIFIC_FD_ANY, 0))
		return TAP_FAIL;
	CHECK(!fd_is_open(w), "fd %d was installed by a failed call", w);
	return TAP_PASS;
}

/*
 * A 24-byte (version-0) open_how has no fd field: O_SPECIFIC_FD with it is
 * EINVAL, not "fd 0" read from the zero-filled tail. fd 0 is closed here
 * so that such a kernel would visibly open there.
 */
static int test_ver0_with_flag(void)
{
	struct open_how_v1 how = { .flags = O_RDONLY | O_SPECIFIC_FD };
	int count, r, r2;

	close(0);
	count = fd_count();
	r = sys_openat2(AT_FDCWD, "/dev/null", &how, OPEN_HOW_SIZE_V0);
	CHECK(r < 0 && errno == EINVAL,
	      "24-byte open_how with O_SPECIFIC_FD: returned %d (%s)", r,
	      r < 0 ? strerror(errno) : "an fd");
	CHECK(!fd_is_open(0), "fd 0 was opened");
	/* a version-0 size ignores an fd beyond it */
	how.fd = SPECIFIC_FD_ANY;
	r2 = sys_openat2(AT_FDCWD, "/dev/null", &how, OPEN_HOW_SIZE_V0);
	CHECK(r2 < 0 && errno == EINVAL,
	      "24-byte open_how with the flag and fd (u32)-1 beyond it: %d (%s)",
	      r2, r2 < 0 ? strerror(errno) : "an fd");
	/* so is any size short of the whole version-1 struct, even one
	 * that holds all of the fd field (28) */
	how.fd = 0;
	for (size_t size = OPEN_HOW_SIZE_V0 + 1; size < OPEN_HOW_SIZE_V1;
	     size++) {
		r2 = sys_openat2(AT_FDCWD, "/dev/null", &how, size);
		CHECK(r2 < 0 && errno == EINVAL,
		      "%zu-byte open_how with O_SPECIFIC_FD: %d (%s)", size,
		      r2, r2 < 0 ? strerror(errno) : "an fd");
	}
	CHECK(fd_count() == count, "fd count changed");
	/* the same struct at 32 bytes opens at fd 0 */
	how.fd = 0;
	r = sys_openat2(AT_FDCWD, "/dev/null", &how, OPEN_HOW_SIZE_V1);
	CHECK(r == 0, "32-byte open_how at fd 0: %d (%s)", r,
	      r < 0 ? strerror(errno) : "wrong fd");
	return TAP_PASS;
}

static int test_getfl(void)
{
	int w = fd_lowest_free(80), ref, fd, fl, ref_fl;

	fd = open_at_fd("/dev/null", O_RDWR | O_APPEND, w);
	CHECK(fd == w, "openat2 gave %d (%s)", fd,
	      fd < 0 ? strerror(errno) : "ok");
	ref = open("/dev/null", O_RDWR | O_APPEND | O_CLOEXEC);
	CHECK(ref >= 0, "open: %s", strerror(errno));
	fl = fcntl(fd, F_GETFL);
	ref_fl = fcntl(ref, F_GETFL);
	CHECK(!(fl & O_SPECIFIC_FD), "F_GETFL shows O_SPECIFIC_FD: %#o", fl);
	CHECK(fl == ref_fl, "F_GETFL %#o, plain open gives %#o", fl, ref_fl);
	CHECK(fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0, "F_SETFL");
	fl = fcntl(fd, F_GETFL);
	CHECK(!(fl & O_SPECIFIC_FD), "F_GETFL after F_SETFL: %#o", fl);
	return TAP_PASS;
}

static int test_cloexec(void)
{
	int w = fd_lowest_free(90);
	int fd = open_at_fd("/dev/null", O_RDONLY | O_CLOEXEC, w);

	CHECK(fd == w, "openat2 gave %d (%s)", fd,
	      fd < 0 ? strerror(errno) : "ok");
	CHECK(fcntl(w, F_GETFD) == FD_CLOEXEC, "FD_CLOEXEC not set on %d", w);
	close(w);
	fd = open_at_fd("/dev/null", O_RDONLY, w);
	CHECK(fd == w && fcntl(w, F_GETFD) == 0, "FD_CLOEXEC left over on %d",
	      w);
	return TAP_PASS;
}

static int test_failed_open_frees_fd(void)
{
	int w = fd_lowest_free(100), count = fd_count(), fd;

	fd = open_at_fd("/nonexistent/specific-fd", O_RDONLY, w);
	CHECK(fd < 0 && errno == ENOENT, "gave %d (%s)", fd,
	      fd < 0 ? strerror(errno) : "success");
	CHECK(!fd_is_open(w) && fd_count() == count, "fd %d leaked", w);
	/* the reservation must have been dropped, not only the file */
	fd = open_at_fd("/dev/null", O_RDONLY, w);
	CHECK(fd == w, "fd %d not reusable after a failed open: %d (%s)", w, fd,
	      fd < 0 ? strerror(errno) : "wrong fd");
	CHECK(dup2(1, w + 1) == w + 1, "dup2 next to it");
	return TAP_PASS;
}

/* Needs no patch: holds on every kernel. */
static int test_open_ignores_flag(void)
{
	int want = fd_lowest_free(0), fd;

	fd = open("/dev/null", O_RDONLY | O_SPECIFIC_FD);
	CHECK(fd == want, "open() gave %d (%s), lowest free is %d", fd,
	      fd < 0 ? strerror(errno) : "ok", want);
	CHECK(!(fcntl(fd, F_GETFL) & O_SPECIFIC_FD), "F_GETFL shows the flag");
	want = fd_lowest_free(0);
	fd = openat(AT_FDCWD, "/dev/null", O_RDONLY | O_SPECIFIC_FD);
	CHECK(fd == want, "openat() gave %d (%s), lowest free is %d", fd,
	      fd < 0 ? strerror(errno) : "ok", want);
	return TAP_PASS;
}

/* Needs no patch: a 32-byte open_how with a zero tail is a plain openat2. */
static int test_ver1_size_plain(void)
{
	struct open_how_v1 how = { .flags = O_RDONLY };
	int want = fd_lowest_free(0);
	int fd = sys_openat2(AT_FDCWD, "/dev/null", &how, sizeof(how));

	CHECK(fd == want, "openat2(size 32) gave %d (%s), lowest free is %d",
	      fd, fd < 0 ? strerror(errno) : "ok", want);
	want = fd_lowest_free(0);
	fd = sys_openat2(AT_FDCWD, "/dev/null", &how, OPEN_HOW_SIZE_V0);
	CHECK(fd == want, "openat2(size 24) gave %d (%s), lowest free is %d",
	      fd, fd < 0 ? strerror(errno) : "ok", want);
	return TAP_PASS;
}

static const struct tap_test tests[] = {
	{ "openat2 O_SPECIFIC_FD installs the file at the chosen fd",
	  test_chosen_fd, HAVE_OPENAT2_FD },
	{ "openat2 O_SPECIFIC_FD can choose fd 0", test_fd_zero,
	  HAVE_OPENAT2_FD },
	{ "EBUSY when the chosen fd is open; the open file is untouched",
	  test_ebusy_open, HAVE_OPENAT2_FD },
	{ "EBUSY when another thread has reserved the fd inside openat2 (FIFO)",
	  test_ebusy_reserved, HAVE_OPENAT2_FD },
	{ "a fork() child gets the fd a sleeping openat2 reserved free",
	  test_fork_drops_reservation, HAVE_OPENAT2_FD },
	{ "racing threads on one fd: exactly one wins, the rest get EBUSY",
	  test_race_same_fd, HAVE_OPENAT2_FD },
	{ "EBADF at and above RLIMIT_NOFILE (incl. fds negative as int)",
	  test_ebadf_rlimit, HAVE_OPENAT2_FD },
	{ "EMFILE for a fd below RLIMIT_NOFILE but at or above fs.nr_open",
	  test_emfile_above_nr_open, HAVE_OPENAT2_FD },
	{ "fd (u32)-1 means lowest available", test_any_fd, HAVE_OPENAT2_FD },
	{ "EINVAL: non-zero __padding, or non-zero fd without the flag",
	  test_einval, HAVE_OPENAT2_FD },
	{ "an open_how shorter than 32 bytes with O_SPECIFIC_FD is EINVAL",
	  test_ver0_with_flag, HAVE_OPENAT2_FD },
	{ "F_GETFL never shows O_SPECIFIC_FD", test_getfl, HAVE_OPENAT2_FD },
	{ "O_CLOEXEC applies to the chosen fd", test_cloexec, HAVE_OPENAT2_FD },
	{ "a failed open (ENOENT) releases the chosen fd",
	  test_failed_open_frees_fd, HAVE_OPENAT2_FD },
	{ "open() and openat() ignore O_SPECIFIC_FD", test_open_ignores_flag, 0 },
	{ "openat2 with a 32-byte open_how and no flag is a plain open",
	  test_ver1_size_plain, 0 },
};

int main(void)
{
	static const struct tap_feature features[] = {
		{ HAVE_OPENAT2_FD, MISSING_OPENAT2_FD },
	};
	unsigned int have;

	tap_plan(ARRAY_SIZE(tests));
	have = probe_features();
	return tap_run(tests, ARRAY_SIZE(tests), have, features,
		       ARRAY_SIZE(features));
}
