// SPDX-License-Identifier: GPL-2.0
/*
 * prctl(PR_INCREASE_MIN_FD): fds below the per-process minimum are handed
 * out only on explicit request (dup2/dup3, O_SPECIFIC_FD).
 */
#include "fdcheck.h"
#include "probe.h"
#include "specific_fd_abi.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

static long min_fd_raise(unsigned long n)
{
	return prctl(PR_INCREASE_MIN_FD, n, 0UL, 0UL, 0UL);
}

static long min_fd_query(void)
{
	return min_fd_raise(0);
}

/* @fd came from a lowest-available allocator while the minimum is @min */
#define CHECK_LOWEST(what, fd, min)					\
	CHECK((fd) >= (min), "%s returned fd %d below the minimum %d (%s)", \
	      what, (int)(fd), (int)(min),				\
	      (fd) < 0 ? strerror(errno) : "reserved range used")

static int test_query_initial(void)
{
	CHECK(min_fd_query() == 0, "fresh process: minimum %ld", min_fd_query());
	CHECK(min_fd_query() == 0, "a query changed the minimum");
	return TAP_PASS;
}

static int test_increase_returns_old(void)
{
	long r;

	r = min_fd_raise(10);
	CHECK(r == 0, "first increase returned %ld (%s)", r,
	      r < 0 ? strerror(errno) : "not the old minimum");
	CHECK(min_fd_query() == 10, "minimum %ld after +10", min_fd_query());
	r = min_fd_raise(5);
	CHECK(r == 10, "second increase returned %ld, wanted 10", r);
	CHECK(min_fd_query() == 15, "minimum %ld after +5", min_fd_query());
	return TAP_PASS;
}

static int test_open_skips(void)
{
	struct open_how_v1 how = { .flags = O_RDONLY };
	int min = 20, want, fd;

	CHECK(min_fd_raise(min) == 0, "prctl: %s", strerror(errno));
	want = fd_lowest_free(min);
	fd = open("/dev/null", O_RDONLY);
	CHECK(fd == want, "open gave %d, wanted %d (lowest >= %d)", fd, want,
	      min);
	want = fd_lowest_free(min);
	fd = openat(AT_FDCWD, "/dev/null", O_RDONLY);
	CHECK(fd == want, "openat gave %d, wanted %d", fd, want);
	want = fd_lowest_free(min);
	fd = sys_openat2(AT_FDCWD, "/dev/null", &how, OPEN_HOW_SIZE_V0);
	CHECK(fd == want, "openat2 gave %d, wanted %d", fd, want);
	CHECK(!fd_is_open(3), "fd 3 got used");
	return TAP_PASS;
}

static int test_dup_skips(void)
{
	int min = 25, want, fd;

	CHECK(min_fd_raise(min) == 0, "prctl: %s", strerror(errno));
	want = fd_lowest_free(min);
	fd = dup(1);
	CHECK(fd == want, "dup gave %d, wanted %d", fd, want);
	fd = fcntl(1, F_DUPFD, 0);
	CHECK_LOWEST("F_DUPFD 0", fd, min);
	fd = fcntl(1, F_DUPFD, 3);
	CHECK_LOWEST("F_DUPFD 3", fd, min);
	fd = fcntl(1, F_DUPFD_CLOEXEC, 0);
	CHECK_LOWEST("F_DUPFD_CLOEXEC 0", fd, min);
	fd = fcntl(1, F_DUPFD, min + 10);
	CHECK(fd == min + 10, "F_DUPFD above the minimum gave %d", fd);
	return TAP_PASS;
}

static int test_sockets_skip(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int min = 30, sv[2], ls, cs, as;

	CHECK(min_fd_raise(min) == 0, "prctl: %s", strerror(errno));
	ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK_LOWEST("socket", ls, min);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair: %s",
	      strerror(errno));
	CHECK_LOWEST("socketpair[0]", sv[0], min);
	CHECK_LOWEST("socketpair[1]", sv[1], min);
	CHECK(bind(ls, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	      listen(ls, 4) == 0 &&
	      getsockname(ls, (struct sockaddr *)&sa, &len) == 0,
	      "loopback listener: %s", strerror(errno));
	cs = socket(AF_INET, SOCK_STREAM, 0);
	CHECK_LOWEST("socket", cs, min);
	CHECK(connect(cs, (struct sockaddr *)&sa, sizeof(sa)) == 0,
	      "connect 127.0.0.1: %s", strerror(errno));
	as = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
	CHECK_LOWEST("accept4", as, min);
	return TAP_PASS;
}

static int test_pipes_and_others_skip(void)
{
	int min = 35, p[2], fd;
	sigset_t mask;

	CHECK(min_fd_raise(min) == 0, "prctl: %s", strerror(errno));
	CHECK(pipe(p) == 0, "pipe: %s", strerror(errno));
	CHECK_LOWEST("pipe[0]", p[0], min);
	CHECK_LOWEST("pipe[1]", p[1], min);
	CHECK(pipe2(p, O_CLOEXEC) == 0, "pipe2: %s", strerror(errno));
	CHECK_LOWEST("pipe2[0]", p[0], min);
	CHECK_LOWEST("pipe2[1]", p[1], min);
	fd = eventfd(0, 0);
	CHECK_LOWEST("eventfd", fd, min);
	fd = epoll_create1(0);
	CHECK_LOWEST("epoll_create1", fd, min);
	fd = timerfd_create(CLOCK_MONOTONIC, 0);
	CHECK_LOWEST("timerfd_create", fd, min);
	fd = inotify_init1(0);
	if (fd >= 0 || errno != ENOSYS)
		CHECK_LOWEST("inotify_init1", fd, min);
	fd = memfd_create("min-fd", 0);
	if (fd >= 0 || errno != ENOSYS)
		CHECK_LOWEST("memfd_create", fd, min);
	sigemptyset(&mask);
	sigaddset(&mask, SIGUSR1);
	fd = signalfd(-1, &mask, 0);
	CHECK_LOWEST("signalfd", fd, min);
	fd = syscall(SYS_pidfd_open, getpid(), 0);
	if (fd >= 0 || errno != ENOSYS)
		CHECK_LOWEST("pidfd_open", fd, min);
	return TAP_PASS;
}

static int test_scm_rights_skips(void)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 }, c = 'x';
	struct iovec iov = { .iov_base = &c, .iov_len = 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = cbuf,
			      .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;
	int sv[2], min = 40, passed = 0, got;

	CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) == 0, "socketpair");
	cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &passed, sizeof(int));	/* pass fd 0 */
	CHECK(sendmsg(sv[0], &msg, 0) == 1, "sendmsg: %s", strerror(errno));

	CHECK(min_fd_raise(min) == 0, "prctl: %s", strerror(errno));
	memset(cbuf, 0, sizeof(cbuf));
	msg.msg_controllen = sizeof(cbuf);
	CHECK(recvmsg(sv[1], &msg, 0) == 1, "recvmsg: %s", strerror(errno));
	cm = CMSG_FIRSTHDR(&msg);
	CHECK(cm && cm->cmsg_type == SCM_RIGHTS, "no SCM_RIGHTS received");
	memcpy(&got, CMSG_DATA(cm), sizeof(int));
	CHECK_LOWEST("SCM_RIGHTS receive", got, min);
	CHECK(fd_ino(got) == fd_ino(0), "received fd is not what was sent");
	return TAP_PASS;
}

static int test_dup2_may_use_range(void)
{
	int min = 20, lo = fd_lowest_free(3), lo2, fd;

	CHECK(lo < min, "no free fd below %d", min);
	CHECK(min_fd_raise(min) == 0, "prctl: %s", strerror(errno));
	CHECK(dup2(1, lo) == lo, "dup2 into the reserved range: %s",
	      strerror(errno));
	lo2 = fd_lowest_free(lo);
	CHECK(dup3(1, lo2, O_CLOEXEC) == lo2, "dup3 into the reserved range: %s",
	      strerror(errno));
	CHECK(min_fd_query() == min, "dup2 changed the minimum");
	/* Closing a low fd must not let the next plain open reuse it. What
	 * this sees is alloc_fd() starting at min_fd; the patch's guard that
	 * keeps next_fd >= min_fd on close is a hint no test can observe. */
	CHECK(close(lo) == 0, "close");
	fd = open("/dev/null", O_RDONLY);
	CHECK_LOWEST("open after closing a reserved fd", fd, min);
	return TAP_PASS;
}

static int test_specific_fd_may_use_range(void)
{
	int min = 20, lo = fd_lowest_free(3), want, fd;

	CHECK(min_fd_raise(min) == 0, "prctl: %s", strerror(errno));
	fd = open_at_fd("/dev/null", O_RDONLY, lo);
	CHECK(fd == lo, "O_SPECIFIC_FD=%d below the minimum gave %d (%s)", lo,
	      fd, fd < 0 ? strerror(errno) : "wrong fd");
	want = fd_lowest_free(min);
	fd = open_at_fd("/dev/null", O_RDONLY, SPECIFIC_FD_ANY);
	CHECK(fd == want, "O_SPECIFIC_FD=(u32)-1 gave %d, wanted %d (minimum %d)",
	      fd, want, min);
	return TAP_PASS;
}

static int expect_refused(unsigned long n, long min)
{
	long r = min_fd_raise(n);

	CHECK(r < 0 && errno == EINVAL, "increase by %#lx gave %ld (%s)", n, r,
	      r < 0 ? strerror(errno) : "accepted");
	CHECK(min_fd_query() == min, "refused increase by %#lx changed the minimum to %ld",
	      n, min_fd_query());
	return TAP_PASS;
}

static int test_overflow(void)
{
	static const unsigned long bad[] = {
		ULONG_MAX, ULONG_MAX - 99 /* wraps to 0 */,
		ULONG_MAX - 98 /* wraps to 1 */, 1UL << 32,
		(1UL << 32) - 100 /* 32-bit wrap to 0 */, 0x7fffffffUL,
		0x80000000UL, 0xffffffffUL,
	};
	long nr_open = read_nr_open(), min = 100, r;
	size_t i;
	int fd;

	CHECK(nr_open > min, "cannot read /proc/sys/fs/nr_open");
	CHECK(min_fd_raise(min) == 0, "prctl: %s", strerror(errno));
	for (i = 0; i < ARRAY_SIZE(bad); i++)
		if (expect_refused(bad[i], min))
			return TAP_FAIL;
	if (expect_refused(nr_open - min + 1, min))
		return TAP_FAIL;

	/* exactly nr_open is allowed; then nothing is "lowest available" */
	r = min_fd_raise(nr_open - min);
	CHECK(r == min, "increase to nr_open (%ld) gave %ld (%s)", nr_open, r,
	      r < 0 ? strerror(errno) : "wrong old value");
	CHECK(min_fd_query() == nr_open, "minimum %ld", min_fd_query());
	if (expect_refused(1, nr_open))
		return TAP_FAIL;
	fd = open("/dev/null", O_RDONLY);
	CHECK(fd < 0 && errno == EMFILE, "open with minimum == nr_open gave %d (%s)",
	      fd, fd < 0 ? strerror(errno) : "an fd");
	CHECK(dup2(1, 10) == 10, "dup2 still works: %s", strerror(errno));
	return TAP_PASS;
}

/*
 * An administrator may lower fs.nr_open below a process's minimum: a query
 * still answers, a raise is refused. Root only (the guest runs as root).
 */
static int test_query_after_nr_open_lowered(void)
{
	long nr_open = read_nr_open(), q, r;
	int e, er;

	if (geteuid() != 0)
		return tap_skip("writing /proc/sys/fs/nr_open needs root");
	CHECK(nr_open >= 256, "cannot read /proc/sys/fs/nr_open");
	CHECK(min_fd_raise(200) == 0, "prctl: %s", strerror(errno));
	CHECK(write_nr_open(128), "lowering nr_open: %s", strerror(errno));
	q = min_fd_query();
	e = errno;
	r = min_fd_raise(1);
	er = errno;
	CHECK(write_nr_open(nr_open), "restoring nr_open %ld: %s", nr_open,
	      strerror(errno));
	CHECK(q == 200, "query with nr_open 128 < minimum 200 gave %ld (%s)", q,
	      q < 0 ? strerror(e) : "wrong value");
	CHECK(r < 0 && er == EINVAL, "raise past nr_open 128 gave %ld", r);
	CHECK(min_fd_query() == 200, "minimum %ld", min_fd_query());
	return TAP_PASS;
}

static int test_extra_args(void)
{
	long r;

	CHECK(min_fd_raise(3) == 0, "prctl: %s", strerror(errno));
	r = prctl(PR_INCREASE_MIN_FD, 1UL, 1UL, 0UL, 0UL);
	CHECK(r < 0 && errno == EINVAL, "arg3 != 0 gave %ld", r);
	r = prctl(PR_INCREASE_MIN_FD, 1UL, 0UL, 1UL, 0UL);
	CHECK(r < 0 && errno == EINVAL, "arg4 != 0 gave %ld", r);
	r = prctl(PR_INCREASE_MIN_FD, 1UL, 0UL, 0UL, 1UL);
	CHECK(r < 0 && errno == EINVAL, "arg5 != 0 gave %ld", r);
	r = prctl(PR_INCREASE_MIN_FD, 0UL, 0UL, 0UL, 1UL);
	CHECK(r < 0 && errno == EINVAL, "query with arg5 != 0 gave %ld", r);
	CHECK(min_fd_query() == 3, "minimum changed to %ld", min_fd_query());
	return TAP_PASS;
}

static void *raise_seven(void *p)
{
	*(long *)p = min_fd_raise(7);
	return NULL;
}

static int test_threads_share(void)
{
	long r = -1;
	pthread_t th;
	int fd;

	CHECK(pthread_create(&th, NULL, raise_seven, &r) == 0, "thread");
	pthread_join(th, NULL);
	CHECK(r == 0, "thread's increase returned %ld", r);
	CHECK(min_fd_query() == 7, "main thread sees minimum %ld, wanted 7",
	      min_fd_query());
	fd = open("/dev/null", O_RDONLY);
	CHECK_LOWEST("open in the main thread", fd, 7);
	return TAP_PASS;
}

#define ATOMIC_THREADS 4
#define ATOMIC_STEPS 500

static unsigned char *seen;

static void *raise_many(void *p)
{
	long *bad = p;

	for (int i = 0; i < ATOMIC_STEPS; i++) {
		long old = min_fd_raise(1);

		if (old < 0 || old >= ATOMIC_THREADS * ATOMIC_STEPS ||
		    __atomic_fetch_add(&seen[old], 1, __ATOMIC_SEQ_CST))
			(*bad)++;
	}
	return NULL;
}

static int test_atomic(void)
{
	long bad[ATOMIC_THREADS] = { 0 }, nbad = 0;
	pthread_t th[ATOMIC_THREADS];
	int i;

	seen = calloc(ATOMIC_THREADS * ATOMIC_STEPS, 1);
	CHECK(seen, "calloc");
	for (i = 0; i < ATOMIC_THREADS; i++)
		CHECK(pthread_create(&th[i], NULL, raise_many, &bad[i]) == 0,
		      "thread");
	for (i = 0; i < ATOMIC_THREADS; i++) {
		pthread_join(th[i], NULL);
		nbad += bad[i];
	}
	CHECK(!nbad, "%ld increases returned a repeated or bogus old minimum",
	      nbad);
	CHECK(min_fd_query() == ATOMIC_THREADS * ATOMIC_STEPS,
	      "minimum %ld after %d concurrent +1", min_fd_query(),
	      ATOMIC_THREADS * ATOMIC_STEPS);
	return TAP_PASS;
}

static int test_fork_inherits(void)
{
	int status;
	pid_t pid;

	CHECK(min_fd_raise(30) == 0, "prctl: %s", strerror(errno));
	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		int fd = open("/dev/null", O_RDONLY);

		if (min_fd_query() != 30) {
			tap_diag("child sees minimum %ld", min_fd_query());
			_exit(1);
		}
		if (fd < 30) {
			tap_diag("child's open gave %d", fd);
			_exit(1);
		}
		min_fd_raise(5);
		_exit(0);
	}
	CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed");
	CHECK(min_fd_query() == 30, "child's increase leaked into the parent: %ld",
	      min_fd_query());
	return TAP_PASS;
}

#ifndef CLOSE_RANGE_UNSHARE
#define CLOSE_RANGE_UNSHARE (1U << 1)
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

/*
 * In a thread that shares the table (CLONE_FILES), take a private copy the
 * way @how says, then report what the copy's minimum and first
 * lowest-available open are, and raise the copy's minimum by 5.
 */
struct unshare_result {
	const char *how;
	long err, min, raise_old;
	int fd;
};

static void *unshare_and_look(void *p)
{
	struct unshare_result *r = p;

	if (!strcmp(r->how, "unshare"))
		r->err = unshare(CLONE_FILES);
	else
		r->err = syscall(SYS_close_range, 100000U, ~0U,
				 CLOSE_RANGE_UNSHARE);
	if (r->err) {
		r->err = errno;
		return NULL;
	}
	r->min = min_fd_query();
	r->fd = open("/dev/null", O_RDONLY);
	r->raise_old = min_fd_raise(5);
	return NULL;
}

static int check_unshare(const char *how)
{
	struct unshare_result r = { .how = how, .fd = -1 };
	long before = min_fd_query();
	pthread_t th;

	CHECK(pthread_create(&th, NULL, unshare_and_look, &r) == 0, "thread");
	pthread_join(th, NULL);
	CHECK(!r.err, "%s: %s", how, strerror((int)r.err));
	CHECK(r.min == before, "after %s the copy's minimum is %ld, wanted %ld",
	      how, r.min, before);
	CHECK_LOWEST(how, r.fd, before);
	CHECK(r.raise_old == before, "raising the copy's minimum returned %ld",
	      r.raise_old);
	CHECK(min_fd_query() == before,
	      "after %s the copy's increase reached the original table: %ld",
	      how, min_fd_query());
	return TAP_PASS;
}

static int test_unshare_inherits(void)
{
	CHECK(min_fd_raise(25) == 0, "prctl: %s", strerror(errno));
	if (check_unshare("unshare"))
		return TAP_FAIL;
	CHECK(min_fd_raise(10) == 25, "prctl: %s", strerror(errno));
	return check_unshare("close_range(CLOSE_RANGE_UNSHARE)");
}

/* Run in the program exec'd by test_exec_resets. */
static int exec_check(void)
{
	long min = min_fd_query();
	int want = fd_lowest_free(0), fd;

	if (min != 0) {
		tap_diag("after execve the minimum is %ld", min);
		return 1;
	}
	fd = open("/dev/null", O_RDONLY);
	if (fd != want) {
		tap_diag("after execve the first open gave %d, lowest free is %d",
			 fd, want);
		return 1;
	}
	return 0;
}

static int exec_check_child(void *arg)
{
	char *argv[] = { "min_fd_prctl", "--exec-check", NULL };

	(void)arg;
	execv("/proc/self/exe", argv);
	_exit(3);
}

/*
 * A child that shares the table (CLONE_FILES) and execs gets a copy of
 * its own first (unshare_files()): only the copy's minimum is reset, the
 * parent keeps its own.
 */
static int test_exec_in_sharing_child_keeps_parents(void)
{
	static char stack[64 * 1024] __attribute__((aligned(16)));
	int status, fd;
	pid_t pid;

	CHECK(min_fd_raise(40) == 0, "prctl: %s", strerror(errno));
	fflush(stdout);
	pid = clone(exec_check_child, stack + sizeof(stack),
		    CLONE_VFORK | CLONE_FILES | SIGCHLD, NULL);
	CHECK(pid > 0, "clone: %s", strerror(errno));
	CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "the exec'd child failed (status %#x)", status);
	CHECK(min_fd_query() == 40,
	      "the parent's minimum is %ld after its CLONE_FILES child exec'd",
	      min_fd_query());
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 40, "the parent's next open gave %d", fd);
	close(fd);
	return TAP_PASS;
}

static int test_exec_resets(void)
{
	int status;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		char *argv[] = { "min_fd_prctl", "--exec-check", NULL };

		/* push both min_fd and next_fd up before the exec */
		if (min_fd_raise(40) != 0 ||
		    open("/dev/null", O_RDONLY | O_CLOEXEC) < 40 ||
		    open("/dev/null", O_RDONLY | O_CLOEXEC) < 40)
			_exit(2);
		execv("/proc/self/exe", argv);
		tap_diag("execv /proc/self/exe: %s", strerror(errno));
		_exit(3);
	}
	CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
	CHECK(WIFEXITED(status), "exec'd child died");
	CHECK(WEXITSTATUS(status) != 2, "setup before exec failed");
	CHECK(WEXITSTATUS(status) == 0, "exec'd child failed (status %d)",
	      WEXITSTATUS(status));
	return TAP_PASS;
}

static const struct tap_test tests[] = {
	{ "a fresh process has minimum 0; query does not change it",
	  test_query_initial, HAVE_MIN_FD },
	{ "increase returns the previous minimum", test_increase_returns_old,
	  HAVE_MIN_FD },
	{ "open/openat/openat2 skip the reserved range", test_open_skips,
	  HAVE_MIN_FD },
	{ "dup, F_DUPFD, F_DUPFD_CLOEXEC skip the reserved range",
	  test_dup_skips, HAVE_MIN_FD },
	{ "socket, socketpair, accept4 skip the reserved range",
	  test_sockets_skip, HAVE_MIN_FD },
	{ "pipe, pipe2, eventfd, epoll, timerfd, inotify, memfd, signalfd, pidfd skip it",
	  test_pipes_and_others_skip, HAVE_MIN_FD },
	{ "SCM_RIGHTS receive skips the reserved range", test_scm_rights_skips,
	  HAVE_MIN_FD },
	{ "dup2 and dup3 may use the reserved range; closing there frees nothing for open",
	  test_dup2_may_use_range, HAVE_MIN_FD },
	{ "O_SPECIFIC_FD may use the range; O_SPECIFIC_FD (u32)-1 respects it",
	  test_specific_fd_may_use_range, HAVE_MIN_FD | HAVE_OPENAT2_FD },
	{ "overflow and results above nr_open are refused; nr_open itself is allowed",
	  test_overflow, HAVE_MIN_FD },
	{ "a query answers after nr_open is lowered below the minimum; a raise is refused",
	  test_query_after_nr_open_lowered, HAVE_MIN_FD },
	{ "non-zero extra arguments are EINVAL", test_extra_args, HAVE_MIN_FD },
	{ "threads (CLONE_FILES) share the minimum", test_threads_share,
	  HAVE_MIN_FD },
	{ "concurrent increases are atomic", test_atomic, HAVE_MIN_FD },
	{ "fork inherits the minimum; the child's changes stay in the child",
	  test_fork_inherits, HAVE_MIN_FD },
	{ "unshare(CLONE_FILES) and close_range(CLOSE_RANGE_UNSHARE) copy the minimum",
	  test_unshare_inherits, HAVE_MIN_FD },
	{ "execve resets the minimum and the next-fd hint", test_exec_resets,
	  HAVE_MIN_FD },
	{ "a CLONE_FILES child's execve leaves the parent's minimum alone",
	  test_exec_in_sharing_child_keeps_parents, HAVE_MIN_FD },
};

int main(int argc, char **argv)
{
	static const struct tap_feature features[] = {
		{ HAVE_MIN_FD, MISSING_MIN_FD },
		{ HAVE_OPENAT2_FD, MISSING_OPENAT2_FD },
	};
	unsigned int have;

	if (argc > 1 && !strcmp(argv[1], "--exec-check"))
		return exec_check();
	tap_plan(ARRAY_SIZE(tests));
	have = probe_features();
	return tap_run(tests, ARRAY_SIZE(tests), have, features,
		       ARRAY_SIZE(features));
}
