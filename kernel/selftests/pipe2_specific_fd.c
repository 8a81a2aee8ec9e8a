// SPDX-License-Identifier: GPL-2.0
/*
 * pipe2(2) with O_SPECIFIC_FD: fds[0] and fds[1] name the wanted fds on
 * input, -1 meaning lowest available for that end.
 */
#include "fdcheck.h"
#include "fifo_block.h"
#include "probe.h"
#include "specific_fd_abi.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static int check_pipe_works(int rd, int wr)
{
	char c = 'p';

	CHECK(write(wr, &c, 1) == 1, "write to fd %d: %s", wr, strerror(errno));
	c = 0;
	CHECK(read(rd, &c, 1) == 1 && c == 'p', "read from fd %d", rd);
	return TAP_PASS;
}

static int test_both_ends(void)
{
	int r = fd_lowest_free(100), w = fd_lowest_free(r + 1);
	int fds[2] = { r, w };

	CHECK(pipe2(fds, O_SPECIFIC_FD) == 0, "pipe2: %s", strerror(errno));
	CHECK(fds[0] == r && fds[1] == w, "got {%d,%d}, wanted {%d,%d}", fds[0],
	      fds[1], r, w);
	return check_pipe_works(r, w);
}

static int test_any_order(void)
{
	int fds[2] = { 300, 120 };

	CHECK(!fd_is_open(300) && !fd_is_open(120), "fds in use");
	CHECK(pipe2(fds, O_SPECIFIC_FD) == 0, "pipe2: %s", strerror(errno));
	CHECK(fds[0] == 300 && fds[1] == 120, "got {%d,%d}", fds[0], fds[1]);
	return check_pipe_works(300, 120);
}

static int test_same_fd_ebusy(void)
{
	int n = fd_lowest_free(130), count = fd_count(), i;

	/* the 2020 code reached BUG_ON in fd_install here */
	for (i = 0; i < 100; i++) {
		int fds[2] = { n, n };
		int r = pipe2(fds, O_SPECIFIC_FD);

		CHECK(r < 0 && errno == EBUSY, "{%d,%d} gave %d (%s), round %d",
		      n, n, r, r < 0 ? strerror(errno) : "success", i);
		CHECK(!fd_is_open(n) && fd_count() == count,
		      "fd %d left behind (round %d)", n, i);
	}
	return TAP_PASS;
}

static int test_open_end_ebusy(void)
{
	int busy = fd_lowest_free(140), fr = fd_lowest_free(busy + 1);
	int count, r, fds[2];

	CHECK(dup2(1, busy) == busy, "dup2");
	count = fd_count();

	fds[0] = busy, fds[1] = fr;
	r = pipe2(fds, O_SPECIFIC_FD);
	CHECK(r < 0 && errno == EBUSY, "{open,free} gave %d (%s)", r,
	      r < 0 ? strerror(errno) : "success");
	CHECK(!fd_is_open(fr) && fd_count() == count, "free end %d leaked", fr);

	fds[0] = fr, fds[1] = busy;
	r = pipe2(fds, O_SPECIFIC_FD);
	CHECK(r < 0 && errno == EBUSY, "{free,open} gave %d (%s)", r,
	      r < 0 ? strerror(errno) : "success");
	CHECK(!fd_is_open(fr) && fd_count() == count, "free end %d leaked", fr);
	CHECK(fd_ino(busy) == fd_ino(1), "open fd %d was replaced", busy);
	return TAP_PASS;
}

static int test_any_end(void)
{
	int n = fd_lowest_free(150), want, fds[2];

	want = fd_lowest_free(0);
	fds[0] = -1, fds[1] = n;
	CHECK(pipe2(fds, O_SPECIFIC_FD) == 0, "{-1,%d}: %s", n, strerror(errno));
	CHECK(fds[0] == want && fds[1] == n, "{-1,%d} gave {%d,%d}, wanted {%d,%d}",
	      n, fds[0], fds[1], want, n);
	if (check_pipe_works(fds[0], fds[1]))
		return TAP_FAIL;

	n = fd_lowest_free(n + 1);
	want = fd_lowest_free(0);
	fds[0] = n, fds[1] = -1;
	CHECK(pipe2(fds, O_SPECIFIC_FD) == 0, "{%d,-1}: %s", n, strerror(errno));
	CHECK(fds[0] == n && fds[1] == want, "{%d,-1} gave {%d,%d}, wanted {%d,%d}",
	      n, fds[0], fds[1], n, want);
	if (check_pipe_works(fds[0], fds[1]))
		return TAP_FAIL;

	want = fd_lowest_free(0);
	fds[0] = -1, fds[1] = -1;
	CHECK(pipe2(fds, O_SPECIFIC_FD) == 0, "{-1,-1}: %s", strerror(errno));
	CHECK(fds[0] == want && fds[1] > want && fds[1] < fd_lowest_free(0),
	      "{-1,-1} gave {%d,%d}, lowest free was %d", fds[0], fds[1], want);
	return check_pipe_works(fds[0], fds[1]);
}

/*
 * {-1, Y} with Y the lowest free fd: the named write end must be reserved
 * first, or the read end takes Y and the call fails with EBUSY.
 */
static int test_named_end_first(void)
{
	int y = fd_lowest_free(0), r = fd_lowest_free(y + 1);
	int fds[2] = { -1, y };

	CHECK(pipe2(fds, O_SPECIFIC_FD) == 0,
	      "{-1,%d} with %d the lowest free fd: %s", y, y, strerror(errno));
	CHECK(fds[0] == r && fds[1] == y, "{-1,%d} gave {%d,%d}, wanted {%d,%d}",
	      y, fds[0], fds[1], r, y);
	return check_pipe_works(fds[0], fds[1]);
}

/*
 * An fd reserved by an openat2(2) that sleeps (a FIFO open with no writer)
 * is counted open though nothing is installed: either end named there is
 * EBUSY, the other end is not leaked, and the sleeping open still gets it.
 */
static int test_reserved_end_ebusy(void)
{
	int fr, count, r, wr, fds[2];
	struct fifo_block b;

	if (fifo_block_start(&b, fd_lowest_free(170)))
		return TAP_FAIL;
	fr = fd_lowest_free(b.want + 1);
	count = fd_count();

	fds[0] = b.want, fds[1] = fr;
	r = pipe2(fds, O_SPECIFIC_FD);
	CHECK(r < 0 && errno == EBUSY, "{reserved,free} gave %d (%s)", r,
	      r < 0 ? strerror(errno) : "success: fd handed out twice");
	CHECK(!fd_is_open(fr) && fd_count() == count, "free end %d leaked", fr);

	fds[0] = fr, fds[1] = b.want;
	r = pipe2(fds, O_SPECIFIC_FD);
	CHECK(r < 0 && errno == EBUSY, "{free,reserved} gave %d (%s)", r,
	      r < 0 ? strerror(errno) : "success: fd handed out twice");
	CHECK(!fd_is_open(fr) && fd_count() == count, "free end %d leaked", fr);

	/* the named end is reserved first, so the -1 end is never leaked */
	fds[0] = -1, fds[1] = b.want;
	r = pipe2(fds, O_SPECIFIC_FD);
	CHECK(r < 0 && errno == EBUSY, "{-1,reserved} gave %d (%s)", r,
	      r < 0 ? strerror(errno) : "success: fd handed out twice");
	CHECK(fd_count() == count, "fd count changed: %d -> %d", count,
	      fd_count());

	wr = fifo_block_finish(&b);
	CHECK(wr >= 0, "no writer for the FIFO");
	CHECK(b.result == b.want, "blocked openat2 returned %d (%s), wanted %d",
	      b.result, b.result < 0 ? strerror(b.err) : "ok", b.want);
	return check_pipe_works(b.want, wr);
}

static int test_flags_combine(void)
{
	int r = fd_lowest_free(160), w = fd_lowest_free(r + 1);
	int fds[2] = { r, w };

	CHECK(pipe2(fds, O_SPECIFIC_FD | O_CLOEXEC | O_NONBLOCK) == 0,
	      "pipe2: %s", strerror(errno));
	CHECK(fds[0] == r && fds[1] == w, "got {%d,%d}", fds[0], fds[1]);
	CHECK(fcntl(r, F_GETFD) == FD_CLOEXEC && fcntl(w, F_GETFD) == FD_CLOEXEC,
	      "FD_CLOEXEC missing");
	CHECK((fcntl(r, F_GETFL) & O_NONBLOCK) && (fcntl(w, F_GETFL) & O_NONBLOCK),
	      "O_NONBLOCK missing");
	CHECK(!(fcntl(r, F_GETFL) & O_SPECIFIC_FD) &&
	      !(fcntl(w, F_GETFL) & O_SPECIFIC_FD), "F_GETFL shows O_SPECIFIC_FD");
	return TAP_PASS;
}

static int test_rlimit(void)
{
	int a = fd_lowest_free(10), b = fd_lowest_free(a + 1);
	struct rlimit rl;
	int count, r, fds[2];

	CHECK(b < 62 && !fd_is_open(62) && !fd_is_open(63), "no free fds");
	CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit");
	rl.rlim_cur = 64;
	CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit");
	count = fd_count();

	fds[0] = a, fds[1] = 64;
	r = pipe2(fds, O_SPECIFIC_FD);
	CHECK(r < 0 && errno == EBADF,
	      "{%d,64} with RLIMIT_NOFILE 64 gave %d (%s), not EBADF", a, r,
	      r < 0 ? strerror(errno) : "success");
	CHECK(!fd_is_open(a) && fd_count() == count, "fd %d leaked", a);

	fds[0] = 64, fds[1] = b;
	r = pipe2(fds, O_SPECIFIC_FD);
	CHECK(r < 0 && errno == EBADF,
	      "{64,%d} with RLIMIT_NOFILE 64 gave %d (%s), not EBADF", b, r,
	      r < 0 ? strerror(errno) : "success");
	CHECK(!fd_is_open(b) && fd_count() == count, "fd %d leaked", b);

	/* Other negative ends are no "lowest available": as u32 they lie
	 * far above any limit. */
	fds[0] = a, fds[1] = -2;
	r = pipe2(fds, O_SPECIFIC_FD);
	CHECK(r < 0 && errno == EBADF, "{%d,-2} gave %d (%s), not EBADF", a, r,
	      r < 0 ? strerror(errno) : "success");
	CHECK(!fd_is_open(a) && fd_count() == count, "fd %d leaked", a);

	/* raw syscall: glibc's prototype rightly refuses a bogus array */
	r = syscall(SYS_pipe2, (void *)8, O_SPECIFIC_FD);
	CHECK(r < 0 && errno == EFAULT, "unreadable array gave %d (%s)", r,
	      r < 0 ? strerror(errno) : "success");
	CHECK(fd_count() == count, "fd leaked on EFAULT");

	fds[0] = 62, fds[1] = 63;
	CHECK(pipe2(fds, O_SPECIFIC_FD) == 0 && fds[0] == 62 && fds[1] == 63,
	      "{62,63} under RLIMIT_NOFILE 64: %s", strerror(errno));
	return TAP_PASS;
}

static int test_min_fd(void)
{
	int lo = fd_lowest_free(3), lo2 = fd_lowest_free(lo + 1), min = 50;
	int fds[2] = { lo, lo2 };

	CHECK(prctl(PR_INCREASE_MIN_FD, min, 0UL, 0UL, 0UL) == 0, "prctl: %s",
	      strerror(errno));
	CHECK(pipe2(fds, O_SPECIFIC_FD) == 0 && fds[0] == lo && fds[1] == lo2,
	      "chosen ends below the minimum: %s", strerror(errno));
	fds[0] = -1, fds[1] = -1;
	CHECK(pipe2(fds, O_SPECIFIC_FD) == 0, "{-1,-1}: %s", strerror(errno));
	CHECK(fds[0] >= min && fds[1] >= min,
	      "-1 ends gave {%d,%d} below the minimum %d", fds[0], fds[1], min);
	return TAP_PASS;
}

/* Needs no patch: without the flag the array is output only. */
static int test_no_flag_ignores_input(void)
{
	int want = fd_lowest_free(0);
	int fds[2] = { 200, 201 };

	CHECK(pipe2(fds, O_CLOEXEC) == 0, "pipe2: %s", strerror(errno));
	CHECK(fds[0] == want, "pipe2 without the flag used fd %d, lowest is %d",
	      fds[0], want);
	return check_pipe_works(fds[0], fds[1]);
}

static const struct tap_test tests[] = {
	{ "pipe2 O_SPECIFIC_FD places both ends at the chosen fds",
	  test_both_ends, HAVE_PIPE2_FD },
	{ "ends may come in any order and far apart", test_any_order,
	  HAVE_PIPE2_FD },
	{ "{N,N} is EBUSY, leaves nothing behind, the kernel stays up",
	  test_same_fd_ebusy, HAVE_PIPE2_FD },
	{ "an open fd at either end is EBUSY; the other end is not leaked",
	  test_open_end_ebusy, HAVE_PIPE2_FD },
	{ "-1 picks the lowest available fd for that end", test_any_end,
	  HAVE_PIPE2_FD },
	{ "{-1,Y} with Y the lowest free fd: the named end is reserved first",
	  test_named_end_first, HAVE_PIPE2_FD },
	{ "an fd reserved by a sleeping openat2 is EBUSY at either end",
	  test_reserved_end_ebusy, HAVE_PIPE2_FD | HAVE_OPENAT2_FD },
	{ "O_CLOEXEC and O_NONBLOCK combine with O_SPECIFIC_FD",
	  test_flags_combine, HAVE_PIPE2_FD },
	{ "an end at RLIMIT_NOFILE or below -1 is EBADF, EFAULT for a bad array; nothing leaks",
	  test_rlimit, HAVE_PIPE2_FD },
	{ "chosen ends may lie below PR_INCREASE_MIN_FD; -1 ends respect it",
	  test_min_fd, HAVE_PIPE2_FD | HAVE_MIN_FD },
	{ "pipe2 without the flag ignores the array's contents",
	  test_no_flag_ignores_input, 0 },
};

int main(void)
{
	static const struct tap_feature features[] = {
		{ HAVE_PIPE2_FD, MISSING_PIPE2_FD },
		{ HAVE_MIN_FD, MISSING_MIN_FD },
		{ HAVE_OPENAT2_FD, MISSING_OPENAT2_FD },
	};
	unsigned int have;

	tap_plan(ARRAY_SIZE(tests));
	have = probe_features();
	return tap_run(tests, ARRAY_SIZE(tests), have, features,
		       ARRAY_SIZE(features));
}
