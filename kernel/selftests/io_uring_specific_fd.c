// SPDX-License-Identifier: GPL-2.0
/*
 * io_uring with userspace-selected fds: IORING_OP_OPENAT2 honours
 * O_SPECIFIC_FD, so open -> read -> close on one fd is a single linked
 * chain; IORING_OP_ACCEPT installs the socket at a chosen fd.
 */
#include "fdcheck.h"
#include "probe.h"
#include "specific_fd_abi.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <liburing.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum {
	HAVE_RING = 1u << 8,
	HAVE_URING_OPEN_FD = 1u << 9,
	HAVE_URING_ACCEPT_FD = 1u << 10,
};

#define NO_CQE INT_MIN
#define WAIT_SECONDS 20

/* Reap @n completions into res[user_data]; 0, or -errno on timeout. */
static int reap(struct io_uring *ring, unsigned int n, int *res,
		unsigned int max)
{
	struct __kernel_timespec ts = { .tv_sec = WAIT_SECONDS };
	struct io_uring_cqe *cqe;

	while (n--) {
		int r = io_uring_wait_cqe_timeout(ring, &cqe, &ts);

		if (r < 0) {
			tap_diag("waiting for a completion: %s", strerror(-r));
			return r;
		}
		if (cqe->user_data < max)
			res[cqe->user_data] = cqe->res;
		else
			tap_diag("stray completion user_data=%llu res=%d",
				 (unsigned long long)cqe->user_data, cqe->res);
		io_uring_cqe_seen(ring, cqe);
	}
	return 0;
}

static const char *res_str(int res)
{
	static char buf[64];

	if (res == NO_CQE)
		return "no completion";
	if (res < 0)
		snprintf(buf, sizeof(buf), "%d (%s)", res, strerror(-res));
	else
		snprintf(buf, sizeof(buf), "%d", res);
	return buf;
}

static struct io_uring_sqe *prep_open_fd(struct io_uring *ring,
					 const char *path,
					 struct open_how_v1 *how, __u32 fd,
					 __u64 ud)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	*how = (struct open_how_v1){ .flags = O_RDONLY | O_SPECIFIC_FD,
				     .fd = fd };
	io_uring_prep_openat2(sqe, AT_FDCWD, path, (struct open_how *)how);
	sqe->len = sizeof(*how);	/* VER1, whatever the headers say */
	sqe->user_data = ud;
	return sqe;
}

static struct io_uring_sqe *prep_read(struct io_uring *ring, int fd,
				      void *buf, unsigned int len,
				      __u64 off, __u64 ud)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	io_uring_prep_read(sqe, fd, buf, len, off);
	sqe->user_data = ud;
	return sqe;
}

static struct io_uring_sqe *prep_close(struct io_uring *ring, int fd,
				       __u64 ud)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	io_uring_prep_close(sqe, fd);
	sqe->user_data = ud;
	return sqe;
}

static void fill_pattern(char *buf, size_t len, unsigned int seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (char)('a' + (i * 7 + seed * 13) % 26);
}

/* A file of @len pattern bytes in a fresh dir; path in @path. */
static int make_file(char *path, size_t pathlen, const char *name,
		     size_t len, unsigned int seed)
{
	static char *dir;
	char *data = malloc(len + 1);
	int r;

	if (!dir)
		dir = make_tmpdir();
	if (!dir || !data)
		return -ENOMEM;
	fill_pattern(data, len, seed);
	snprintf(path, pathlen, "%s/%s", dir, name);
	r = write_file(path, data, len);
	free(data);
	return r;
}

static int test_chain_fd89(void)
{
	char path[4200], buf[2048], want[1000];
	struct open_how_v1 how;
	struct io_uring ring;
	int res[4], count, i;

	CHECK(make_file(path, sizeof(path), "orc", sizeof(want), 89) == 0,
	      "test file");
	fill_pattern(want, sizeof(want), 89);
	CHECK(io_uring_queue_init(8, &ring, 0) == 0, "io_uring_queue_init");
	CHECK(!fd_is_open(89), "fd 89 already open");
	count = fd_count();
	for (i = 0; i < 4; i++)
		res[i] = NO_CQE;

	prep_open_fd(&ring, path, &how, 89, 1)->flags |= IOSQE_IO_LINK;
	prep_read(&ring, 89, buf, sizeof(want), 0, 2)->flags |= IOSQE_IO_LINK;
	prep_close(&ring, 89, 3);
	i = io_uring_submit(&ring);
	CHECK(i == 3, "io_uring_submit returned %d, wanted one submit of 3", i);
	CHECK(reap(&ring, 3, res, 4) == 0, "missing completions");

	CHECK(res[1] == 89, "openat2: %s", res_str(res[1]));
	CHECK(res[2] == (int)sizeof(want), "read: %s", res_str(res[2]));
	CHECK(!memcmp(buf, want, sizeof(want)), "read returned wrong bytes");
	CHECK(res[3] == 0, "close: %s", res_str(res[3]));
	CHECK(!fd_is_open(89) && fd_count() == count, "fd 89 left open");
	return TAP_PASS;
}

#define NCHAINS 256
#define CHAIN_BASE 500

static int test_overlapping_chains(void)
{
	static struct open_how_v1 how[NCHAINS];
	static char path[NCHAINS][4200], buf[NCHAINS][512];
	static int res[NCHAINS * 3];
	struct io_uring_params p = { 0 };
	struct io_uring ring;
	struct rlimit rl;
	int count, i, r, inflight = 0, peak = 0;

	CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit");
	if (rl.rlim_cur < CHAIN_BASE + NCHAINS) {
		rl.rlim_cur = CHAIN_BASE + NCHAINS;
		CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit: %s",
		      strerror(errno));
	}
	for (i = 0; i < NCHAINS; i++) {
		char name[32];

		snprintf(name, sizeof(name), "chain%03d", i);
		CHECK(make_file(path[i], sizeof(path[i]), name, 100 + i, i) == 0,
		      "test file %d", i);
		CHECK(!fd_is_open(CHAIN_BASE + i), "fd %d in use", CHAIN_BASE + i);
		res[3 * i] = res[3 * i + 1] = res[3 * i + 2] = NO_CQE;
	}
	r = io_uring_queue_init_params(1024, &ring, &p);
	CHECK(r == 0, "io_uring_queue_init: %s", strerror(-r));
	count = fd_count();

	for (i = 0; i < NCHAINS; i++) {
		int fd = CHAIN_BASE + i;

		prep_open_fd(&ring, path[i], &how[i], fd, 3 * i)->flags |=
			IOSQE_IO_LINK;
		prep_read(&ring, fd, buf[i], 100 + i, 0, 3 * i + 1)->flags |=
			IOSQE_IO_LINK;
		prep_close(&ring, fd, 3 * i + 2);
	}
	r = io_uring_submit(&ring);
	CHECK(r == 3 * NCHAINS, "io_uring_submit returned %d", r);

	/* reap one by one to see how many chains were open at once */
	for (i = 0; i < 3 * NCHAINS; i++) {
		struct __kernel_timespec ts = { .tv_sec = WAIT_SECONDS };
		struct io_uring_cqe *cqe;

		r = io_uring_wait_cqe_timeout(&ring, &cqe, &ts);
		CHECK(r == 0, "completion %d of %d: %s", i, 3 * NCHAINS,
		      strerror(-r));
		CHECK(cqe->user_data < 3 * NCHAINS, "stray completion");
		res[cqe->user_data] = cqe->res;
		if (cqe->user_data % 3 == 0 && cqe->res >= 0)
			inflight++;
		if (cqe->user_data % 3 == 2 && cqe->res == 0)
			inflight--;
		if (inflight > peak)
			peak = inflight;
		io_uring_cqe_seen(&ring, cqe);
	}
	for (i = 0; i < NCHAINS; i++) {
		char want[512];

		fill_pattern(want, 100 + i, i);
		CHECK(res[3 * i] == CHAIN_BASE + i, "chain %d openat2: %s", i,
		      res_str(res[3 * i]));
		CHECK(res[3 * i + 1] == 100 + i, "chain %d read: %s", i,
		      res_str(res[3 * i + 1]));
		CHECK(!memcmp(buf[i], want, 100 + i),
		      "chain %d read another file's bytes", i);
		CHECK(res[3 * i + 2] == 0, "chain %d close: %s", i,
		      res_str(res[3 * i + 2]));
		CHECK(!fd_is_open(CHAIN_BASE + i), "fd %d left open",
		      CHAIN_BASE + i);
	}
	CHECK(fd_count() == count, "fd count %d, was %d", fd_count(), count);
	tap_diag("%d chains in one submit; at most %d had their fd open at once",
		 NCHAINS, peak);
	return TAP_PASS;
}

static int test_failed_open_enoent(void)
{
	struct open_how_v1 how;
	struct io_uring ring;
	char buf[64];
	int fd = fd_lowest_free(60), res[3] = { NO_CQE, NO_CQE, NO_CQE }, count;

	CHECK(io_uring_queue_init(8, &ring, 0) == 0, "io_uring_queue_init");
	count = fd_count();
	prep_open_fd(&ring, "/nonexistent/orc", &how, fd, 0)->flags |=
		IOSQE_IO_LINK;
	prep_read(&ring, fd, buf, sizeof(buf), 0, 1)->flags |= IOSQE_IO_LINK;
	prep_close(&ring, fd, 2);
	CHECK(io_uring_submit(&ring) == 3, "submit");
	CHECK(reap(&ring, 3, res, 3) == 0, "missing completions");
	CHECK(res[0] == -ENOENT, "openat2: %s", res_str(res[0]));
	CHECK(res[1] == -ECANCELED, "read: %s", res_str(res[1]));
	CHECK(res[2] == -ECANCELED, "close: %s", res_str(res[2]));
	CHECK(!fd_is_open(fd) && fd_count() == count, "fd %d leaked", fd);
	/* and the number is usable again right away */
	prep_open_fd(&ring, "/dev/null", &how, fd, 0);
	CHECK(io_uring_submit(&ring) == 1 && reap(&ring, 1, res, 3) == 0,
	      "reopen");
	CHECK(res[0] == fd, "reopen at fd %d after the failure: %s", fd,
	      res_str(res[0]));
	return TAP_PASS;
}

static int test_failed_open_ebusy(void)
{
	char path[4200], other[4200], buf[64];
	struct open_how_v1 how;
	struct io_uring ring;
	int fd = fd_lowest_free(70), res[3] = { NO_CQE, NO_CQE, NO_CQE };
	int count, x;

	CHECK(make_file(path, sizeof(path), "held", 32, 1) == 0, "file");
	CHECK(make_file(other, sizeof(other), "wanted", 32, 2) == 0, "file");
	x = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(x >= 0 && dup2(x, fd) == fd, "dup2");
	close(x);
	CHECK(io_uring_queue_init(8, &ring, 0) == 0, "io_uring_queue_init");
	count = fd_count();

	prep_open_fd(&ring, other, &how, fd, 0)->flags |= IOSQE_IO_LINK;
	/* offset -1: a read that ran would move the held file's position */
	prep_read(&ring, fd, buf, 32, (__u64)-1, 1)->flags |= IOSQE_IO_LINK;
	prep_close(&ring, fd, 2);
	CHECK(io_uring_submit(&ring) == 3, "submit");
	CHECK(reap(&ring, 3, res, 3) == 0, "missing completions");
	CHECK(res[0] == -EBUSY, "openat2 at open fd %d: %s", fd,
	      res_str(res[0]));
	CHECK(res[1] == -ECANCELED, "read: %s", res_str(res[1]));
	CHECK(res[2] == -ECANCELED, "close: %s", res_str(res[2]));
	CHECK(fd_ino(fd) == path_ino(path), "fd %d no longer the held file", fd);
	CHECK(lseek(fd, 0, SEEK_CUR) == 0, "the held file was read");
	CHECK(fd_count() == count, "fd count changed");
	return TAP_PASS;
}

static int short_read_chain(unsigned int read_link, int *res, int *fd_out)
{
	char path[4200], buf[4096];
	struct open_how_v1 how;
	struct io_uring ring;
	int fd = fd_lowest_free(80);

	*fd_out = fd;
	res[0] = res[1] = res[2] = NO_CQE;
	CHECK(make_file(path, sizeof(path), "short", 100, 3) == 0, "file");
	CHECK(io_uring_queue_init(8, &ring, 0) == 0, "io_uring_queue_init");
	prep_open_fd(&ring, path, &how, fd, 0)->flags |= IOSQE_IO_LINK;
	prep_read(&ring, fd, buf, sizeof(buf), 0, 1)->flags |= read_link;
	prep_close(&ring, fd, 2);
	CHECK(io_uring_submit(&ring) == 3, "submit");
	CHECK(reap(&ring, 3, res, 3) == 0, "missing completions");
	io_uring_queue_exit(&ring);
	CHECK(res[0] == fd, "openat2: %s", res_str(res[0]));
	CHECK(res[1] == 100, "read of a 100-byte file: %s", res_str(res[1]));
	return TAP_PASS;
}

static int test_short_read_link(void)
{
	int res[3], fd;

	if (short_read_chain(IOSQE_IO_LINK, res, &fd))
		return TAP_FAIL;
	CHECK(res[2] == -ECANCELED, "close after a short read: %s",
	      res_str(res[2]));
	CHECK(fd_is_open(fd), "fd %d closed although its close was cancelled",
	      fd);
	tap_diag("short read under IOSQE_IO_LINK: the linked close came back "
		 "-ECANCELED and fd %d stayed open. A daemon must submit that "
		 "close itself, free the slot only when it completes, and "
		 "treat the file as changed (never send a body that disagrees "
		 "with its Content-Length).", fd);
	CHECK(close(fd) == 0, "closing it by hand");
	return TAP_PASS;
}

static int test_short_read_hardlink(void)
{
	int res[3], fd;

	if (short_read_chain(IOSQE_IO_HARDLINK, res, &fd))
		return TAP_FAIL;
	CHECK(res[2] == 0, "close after a short read under HARDLINK: %s",
	      res_str(res[2]));
	CHECK(!fd_is_open(fd), "fd %d left open", fd);
	return TAP_PASS;
}

/*
 * A linked request looks its fd up when it is issued, after the requests
 * before it completed: a chain that closes fd Y, opens another file at Y
 * and reads Y reads the new file, even though Y held the old one when the
 * chain was submitted.
 */
static int test_linked_read_sees_new_file(void)
{
	char a[4200], b[4200], buf[16] = { 0 }, want_a[16], want_b[16];
	struct open_how_v1 how;
	struct io_uring ring;
	int fd = fd_lowest_free(90), res[4], x, i;

	CHECK(make_file(a, sizeof(a), "old", 16, 11) == 0, "file");
	CHECK(make_file(b, sizeof(b), "new", 16, 12) == 0, "file");
	fill_pattern(want_a, 16, 11);
	fill_pattern(want_b, 16, 12);
	x = open(a, O_RDONLY | O_CLOEXEC);
	CHECK(x >= 0 && dup2(x, fd) == fd, "dup2");
	close(x);
	CHECK(io_uring_queue_init(8, &ring, 0) == 0, "io_uring_queue_init");
	for (i = 0; i < 4; i++)
		res[i] = NO_CQE;

	prep_close(&ring, fd, 0)->flags |= IOSQE_IO_LINK;
	prep_open_fd(&ring, b, &how, fd, 1)->flags |= IOSQE_IO_LINK;
	prep_read(&ring, fd, buf, 16, 0, 2)->flags |= IOSQE_IO_LINK;
	prep_close(&ring, fd, 3);
	CHECK(io_uring_submit(&ring) == 4, "submit");
	CHECK(reap(&ring, 4, res, 4) == 0, "missing completions");
	CHECK(res[0] == 0 && res[1] == fd && res[2] == 16 && res[3] == 0,
	      "close %d, open %d, read %d, close %d", res[0], res[1], res[2],
	      res[3]);
	CHECK(!fd_is_open(fd), "fd %d left open", fd);
	CHECK(memcmp(buf, want_a, 16),
	      "the linked read on fd %d read the file the fd held at submit "
	      "time, not the one the chain opened", fd);
	CHECK(!memcmp(buf, want_b, 16), "read neither file's bytes");
	return TAP_PASS;
}

/* OPENAT2 with O_CREAT under IOSQE_ASYNC: opened at fd Y by an io-wq worker. */
static int test_open_async_creat(void)
{
	char path[4200], buf[8] = { 0 };
	char *dir = make_tmpdir();
	struct open_how_v1 how;
	struct io_uring_sqe *sqe;
	struct io_uring ring;
	int fd = fd_lowest_free(95), res[3] = { NO_CQE, NO_CQE, NO_CQE }, x;

	CHECK(dir, "mkdtemp");
	snprintf(path, sizeof(path), "%s/created", dir);
	CHECK(io_uring_queue_init(8, &ring, 0) == 0, "io_uring_queue_init");
	sqe = prep_open_fd(&ring, path, &how, fd, 0);
	how.flags = O_RDWR | O_CREAT | O_EXCL | O_SPECIFIC_FD;
	how.mode = 0600;
	sqe->flags |= IOSQE_ASYNC | IOSQE_IO_LINK;
	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_write(sqe, fd, "async", 5, 0);
	sqe->user_data = 1;
	sqe->flags |= IOSQE_IO_LINK;
	prep_close(&ring, fd, 2);
	CHECK(io_uring_submit(&ring) == 3, "submit");
	CHECK(reap(&ring, 3, res, 3) == 0, "missing completions");
	CHECK(res[0] == fd, "async O_CREAT openat2 at fd %d: %s", fd,
	      res_str(res[0]));
	CHECK(res[1] == 5, "write: %s", res_str(res[1]));
	CHECK(res[2] == 0, "close: %s", res_str(res[2]));
	CHECK(!fd_is_open(fd), "fd %d left open", fd);
	x = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(x >= 0 && read(x, buf, sizeof(buf)) == 5 && !memcmp(buf, "async", 5),
	      "the created file does not hold what was written");
	close(x);
	return TAP_PASS;
}

/*
 * Is @fd reserved (by an open that has not installed its file)? Probed with
 * an O_SPECIFIC_FD open of a missing path: EBUSY when reserved, ENOENT when
 * free, and it never installs anything either way.
 */
static int fd_reserved(int fd)
{
	int r = open_at_fd("/nonexistent-orcd-probe", O_RDONLY, fd);

	if (r >= 0) {
		close(r);
		return -1;
	}
	return errno == EBUSY ? 1 : errno == ENOENT ? 0 : -1;
}

/*
 * Poll until @fd is reserved (1) or the open completed first (-EBUSY when
 * it lost the fd to one of the probes, which reserve it for an instant;
 * -1 otherwise); 0 if neither happened in time.
 */
static int wait_reserved(struct io_uring *ring, int fd)
{
	struct timespec now, end, pause = { 0, 1000000 };
	struct io_uring_cqe *cqe;

	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += WAIT_SECONDS;
	do {
		int r = fd_reserved(fd);

		if (r)
			return r;
		if (io_uring_peek_cqe(ring, &cqe) == 0) {
			if (cqe->user_data == 0 && cqe->res == -EBUSY)
				return -EBUSY;
			tap_diag("the open completed: %s", res_str(cqe->res));
			return -1;
		}
		nanosleep(&pause, NULL);
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (now.tv_sec < end.tv_sec ||
		 (now.tv_sec == end.tv_sec && now.tv_nsec < end.tv_nsec));
	tap_diag("fd %d was not reserved within %d s", fd, WAIT_SECONDS);
	return 0;
}

/* Unblock a stuck open so that a failing test can still exit. */
static void unblock_fifo(const char *fifo)
{
	int w = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);

	if (w >= 0)
		close(w);
}

/*
 * Submit an OPENAT2 of a FIFO without a writer at fd @fd that ends up
 * blocked in an io-wq worker, followed by a link timeout of @timeout_s
 * seconds if that is non-zero, and wait until the worker has reserved @fd
 * and blocks in the open. Returns TAP_PASS with the open blocked, or
 * TAP_FAIL.
 *
 * Without a link timeout the open is forced into io-wq with IOSQE_ASYNC.
 * With one, it gets there through O_CREAT instead (the FIFO exists, so
 * O_CREAT only opens it): io_openat2() never tries O_CREAT non-blocking,
 * so the inline issue returns -EAGAIN and the request is punted. That
 * matters because 6.1 starts a link timeout's timer after the first issue
 * of its target returns (io_issue_sqe()): for an IOSQE_ASYNC request that
 * is the blocking issue in io-wq, so the timeout would only start once the
 * open is over and could never cancel it.
 */
static int start_blocked_open(struct io_uring *ring, char *fifo, size_t len,
			      int fd, long long timeout_s)
{
	static struct __kernel_timespec ts;
	static struct open_how_v1 how;
	char *dir = make_tmpdir();
	struct io_uring_sqe *sqe;
	int tries, n = timeout_s ? 2 : 1, r = 0, res[2];

	CHECK(dir, "mkdtemp");
	snprintf(fifo, len, "%s/fifo", dir);
	CHECK(mkfifo(fifo, 0600) == 0, "mkfifo: %s", strerror(errno));
	for (tries = 0; tries < 10; tries++) {
		sqe = prep_open_fd(ring, fifo, &how, fd, 0);
		if (!timeout_s)
			sqe->flags |= IOSQE_ASYNC;
		if (timeout_s) {
			how.flags |= O_CREAT;
			how.mode = 0600;
			sqe->flags |= IOSQE_IO_LINK;
			ts.tv_sec = timeout_s;
			sqe = io_uring_get_sqe(ring);
			io_uring_prep_link_timeout(sqe, &ts, 0);
			sqe->user_data = 1;
		}
		CHECK(io_uring_submit(ring) == n, "submit");
		r = wait_reserved(ring, fd);
		if (r != -EBUSY)
			break;
		/* a probe held the fd when the worker tried: again */
		CHECK(reap(ring, n, res, 2) == 0, "completions of a lost race");
	}
	if (r != 1) {
		unblock_fifo(fifo);
		CHECK(0, "the open blocked in io-wq does not hold fd %d", fd);
	}
	return TAP_PASS;
}

/* After a cancelled open: nothing at @fd, not reserved, no fd leaked. */
static int check_released(int fd, int count, const char *fifo)
{
	int w;

	CHECK(!fd_is_open(fd), "fd %d installed by a cancelled open", fd);
	CHECK(fd_reserved(fd) == 0, "fd %d still reserved after the cancel", fd);
	CHECK(fd_count() == count, "fd count %d -> %d", count, fd_count());
	/* no reader is left behind on the FIFO either */
	w = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	CHECK(w < 0 && errno == ENXIO,
	      "a writer found a reader on the FIFO after the cancel (%s)",
	      w < 0 ? strerror(errno) : "opened");
	return TAP_PASS;
}

static int test_cancel_blocked_open(void)
{
	char fifo[4200];
	struct io_uring_sqe *sqe;
	struct io_uring ring;
	int fd = fd_lowest_free(110), res[2] = { NO_CQE, NO_CQE }, count;

	CHECK(io_uring_queue_init(8, &ring, 0) == 0, "io_uring_queue_init");
	count = fd_count();
	if (start_blocked_open(&ring, fifo, sizeof(fifo), fd, 0))
		return TAP_FAIL;
	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_cancel64(sqe, 0, 0);
	sqe->user_data = 1;
	CHECK(io_uring_submit(&ring) == 1, "submit the cancel");
	if (reap(&ring, 2, res, 2)) {
		unblock_fifo(fifo);
		tap_diag("open: %s", res_str(res[0]));
		CHECK(0, "cancel: %s", res_str(res[1]));
	}
	tap_diag("blocked open: %s", res_str(res[0]));
	tap_diag("ASYNC_CANCEL: %s", res_str(res[1]));
	CHECK(res[0] < 0, "the open was not cancelled: %s", res_str(res[0]));
	CHECK(res[1] == 0 || res[1] == -EALREADY, "ASYNC_CANCEL: %s",
	      res_str(res[1]));
	return check_released(fd, count, fifo);
}

static int test_link_timeout_blocked_open(void)
{
	char fifo[4200];
	struct io_uring ring;
	int fd = fd_lowest_free(120), res[2] = { NO_CQE, NO_CQE }, count;

	CHECK(io_uring_queue_init(8, &ring, 0) == 0, "io_uring_queue_init");
	count = fd_count();
	/* long enough for the worker to get there even under KASAN and TCG */
	if (start_blocked_open(&ring, fifo, sizeof(fifo), fd, 5))
		return TAP_FAIL;
	if (reap(&ring, 2, res, 2)) {
		unblock_fifo(fifo);
		tap_diag("open: %s", res_str(res[0]));
		CHECK(0, "link timeout: %s", res_str(res[1]));
	}
	tap_diag("blocked open: %s", res_str(res[0]));
	tap_diag("link timeout: %s", res_str(res[1]));
	CHECK(res[0] < 0, "the open was not cancelled: %s", res_str(res[0]));
	return check_released(fd, count, fifo);
}

/* A 24-byte open_how has no fd field: O_SPECIFIC_FD with it is EINVAL. */
static int test_openat2_ver0_flag(void)
{
	struct open_how_v1 how;
	struct io_uring ring;
	int res[1] = { NO_CQE };

	/* the ring first, or its own fd would be the lowest free one: 0 */
	CHECK(io_uring_queue_init(8, &ring, 0) == 0, "io_uring_queue_init");
	close(0);
	prep_open_fd(&ring, "/dev/null", &how, 0, 0)->len = OPEN_HOW_SIZE_V0;
	CHECK(io_uring_submit(&ring) == 1, "submit");
	CHECK(reap(&ring, 1, res, 1) == 0, "missing completion");
	CHECK(res[0] == -EINVAL, "OPENAT2, 24-byte open_how, O_SPECIFIC_FD: %s",
	      res_str(res[0]));
	CHECK(!fd_is_open(0), "fd 0 was opened");
	return TAP_PASS;
}

static int test_open_fd_with_file_index(void)
{
	struct io_uring_sqe *sqe;
	struct open_how_v1 how = { .flags = O_RDONLY | O_SPECIFIC_FD };
	struct io_uring ring;
	int fd = fd_lowest_free(100), res[2] = { NO_CQE, NO_CQE }, r;

	CHECK(io_uring_queue_init(8, &ring, 0) == 0, "io_uring_queue_init");
	r = io_uring_register_files_sparse(&ring, 4);
	CHECK(r == 0, "register sparse files: %s", strerror(-r));

	how.fd = fd;
	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_openat2_direct(sqe, AT_FDCWD, "/dev/null",
				     (struct open_how *)&how, 0);
	sqe->len = sizeof(how);
	sqe->user_data = 0;
	CHECK(io_uring_submit(&ring) == 1 && reap(&ring, 1, res, 2) == 0,
	      "submit");
	CHECK(res[0] == -EINVAL, "O_SPECIFIC_FD with file_index: %s",
	      res_str(res[0]));
	CHECK(!fd_is_open(fd), "fd %d installed anyway", fd);

	/* the same direct open without the flag is fine */
	how = (struct open_how_v1){ .flags = O_RDONLY };
	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_openat2_direct(sqe, AT_FDCWD, "/dev/null",
				     (struct open_how *)&how, 1);
	sqe->len = sizeof(how);
	sqe->user_data = 1;
	CHECK(io_uring_submit(&ring) == 1 && reap(&ring, 1, res, 2) == 0,
	      "submit");
	CHECK(res[1] == 0, "direct open without the flag: %s", res_str(res[1]));
	return TAP_PASS;
}

/* Needs no patch: IORING_OP_OPENAT builds its open_how like openat(). */
static int test_openat_ignores_flag(void)
{
	struct io_uring_sqe *sqe;
	struct io_uring ring;
	int res[1] = { NO_CQE }, want;

	CHECK(io_uring_queue_init(8, &ring, 0) == 0, "io_uring_queue_init");
	want = fd_lowest_free(0);
	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_openat(sqe, AT_FDCWD, "/dev/null",
			     O_RDONLY | O_SPECIFIC_FD, 0);
	sqe->user_data = 0;
	CHECK(io_uring_submit(&ring) == 1 && reap(&ring, 1, res, 1) == 0,
	      "submit");
	CHECK(res[0] == want, "IORING_OP_OPENAT with O_SPECIFIC_FD: %s, lowest "
	      "free is %d", res_str(res[0]), want);
	return TAP_PASS;
}

/* A listening loopback TCP socket; its address in @sa. */
static int listener(struct sockaddr_in *sa)
{
	socklen_t len = sizeof(*sa);
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	*sa = (struct sockaddr_in){ .sin_family = AF_INET,
				    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (ls < 0 || bind(ls, (struct sockaddr *)sa, sizeof(*sa)) ||
	    listen(ls, 16) || getsockname(ls, (struct sockaddr *)sa, &len))
		return -1;
	return ls;
}

static int client(const struct sockaddr_in *sa)
{
	int cs = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (cs < 0 || connect(cs, (const struct sockaddr *)sa, sizeof(*sa)))
		return -1;
	return cs;
}

static struct io_uring_sqe *prep_accept_fd(struct io_uring *ring, int ls,
					   int flags, __u32 fd, __u64 ud)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	io_uring_prep_accept(sqe, ls, NULL, NULL, flags);
	sqe->ioprio |= IORING_ACCEPT_SPECIFIC_FD;
	sqe->len = fd;
	sqe->user_data = ud;
	return sqe;
}

static int test_accept_chosen_fd(void)
{
	struct sockaddr_in sa, peer, local;
	socklen_t len = sizeof(peer);
	struct io_uring ring;
	int ls, cs, fd = fd_lowest_free(110), fd2, res[2] = { NO_CQE, NO_CQE };
	char msg[8] = { 0 };

	fd2 = fd_lowest_free(fd + 1);
	ls = listener(&sa);
	CHECK(ls >= 0, "loopback listener: %s", strerror(errno));
	CHECK(io_uring_queue_init(8, &ring, 0) == 0, "io_uring_queue_init");

	/* accept armed first, client connects afterwards */
	prep_accept_fd(&ring, ls, 0, fd, 0);
	CHECK(io_uring_submit(&ring) == 1, "submit");
	cs = client(&sa);
	CHECK(cs >= 0, "connect to 127.0.0.1:%d: %s", ntohs(sa.sin_port),
	      strerror(errno));
	CHECK(write(cs, "hello", 5) == 5, "client write");
	CHECK(reap(&ring, 1, res, 2) == 0, "no accept completion");
	CHECK(res[0] == fd, "accept into fd %d: %s", fd, res_str(res[0]));
	CHECK(getpeername(fd, (struct sockaddr *)&peer, &len) == 0,
	      "getpeername(%d): %s", fd, strerror(errno));
	len = sizeof(local);
	CHECK(getsockname(cs, (struct sockaddr *)&local, &len) == 0 &&
	      peer.sin_port == local.sin_port, "fd %d is not the client's peer",
	      fd);
	CHECK(read(fd, msg, 5) == 5 && !memcmp(msg, "hello", 5),
	      "data via fd %d", fd);
	CHECK(fcntl(fd, F_GETFD) == 0, "FD_CLOEXEC set without SOCK_CLOEXEC");

	/* client already queued, accept afterwards, with SOCK_CLOEXEC */
	cs = client(&sa);
	CHECK(cs >= 0, "second connect: %s", strerror(errno));
	prep_accept_fd(&ring, ls, SOCK_CLOEXEC, fd2, 1);
	CHECK(io_uring_submit(&ring) == 1, "submit");
	CHECK(reap(&ring, 1, res, 2) == 0, "no accept completion");
	CHECK(res[1] == fd2, "accept into fd %d: %s", fd2, res_str(res[1]));
	CHECK(fcntl(fd2, F_GETFD) == FD_CLOEXEC, "SOCK_CLOEXEC not applied");
	return TAP_PASS;
}

static int test_accept_fd_zero(void)
{
	struct sockaddr_in sa;
	struct io_uring ring;
	int ls, cs, res[1] = { NO_CQE };
	char c = 0;

	ls = listener(&sa);
	CHECK(ls >= 0, "loopback listener: %s", strerror(errno));
	CHECK(io_uring_queue_init(8, &ring, 0) == 0, "io_uring_queue_init");
	cs = client(&sa);
	CHECK(cs >= 0, "connect: %s", strerror(errno));
	close(0);
	prep_accept_fd(&ring, ls, 0, 0, 0);
	CHECK(io_uring_submit(&ring) == 1, "submit");
	CHECK(reap(&ring, 1, res, 1) == 0, "no accept completion");
	CHECK(res[0] == 0, "accept into fd 0: %s", res_str(res[0]));
	CHECK(write(cs, "z", 1) == 1, "client write");
	CHECK(read(0, &c, 1) == 1 && c == 'z', "data via fd 0");
	return TAP_PASS;
}

static int test_accept_busy_fd(void)
{
	struct sockaddr_in sa;
	struct io_uring ring;
	int ls, cs, as, busy = fd_lowest_free(120), res[1] = { NO_CQE }, count;

	ls = listener(&sa);
	CHECK(ls >= 0, "loopback listener: %s", strerror(errno));
	CHECK(io_uring_queue_init(8, &ring, 0) == 0, "io_uring_queue_init");
	cs = client(&sa);
	CHECK(cs >= 0, "connect: %s", strerror(errno));
	CHECK(dup2(1, busy) == busy, "dup2");
	count = fd_count();
	prep_accept_fd(&ring, ls, 0, busy, 0);
	CHECK(io_uring_submit(&ring) == 1, "submit");
	CHECK(reap(&ring, 1, res, 1) == 0, "no accept completion");
	CHECK(res[0] < 0, "accept into open fd %d succeeded: %s", busy,
	      res_str(res[0]));
	tap_diag("accept into an open fd: %s", res_str(res[0]));
	CHECK(res[0] == -EBUSY, "wanted -EBUSY");
	CHECK(fd_ino(busy) == fd_ino(1), "fd %d was replaced", busy);
	CHECK(fd_count() == count, "fd count changed");
	/* the fd is reserved before a connection is taken: it is still queued */
	as = accept4(ls, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	CHECK(as >= 0, "the pending connection was consumed by the failed accept: %s",
	      strerror(errno));
	return TAP_PASS;
}

static int test_accept_any_and_ebadf(void)
{
	struct sockaddr_in sa;
	struct io_uring ring;
	struct rlimit rl;
	int ls, cs, want, res[2] = { NO_CQE, NO_CQE };

	ls = listener(&sa);
	CHECK(ls >= 0, "loopback listener: %s", strerror(errno));
	CHECK(io_uring_queue_init(8, &ring, 0) == 0, "io_uring_queue_init");
	cs = client(&sa);
	CHECK(cs >= 0, "connect: %s", strerror(errno));
	want = fd_lowest_free(0);
	prep_accept_fd(&ring, ls, 0, SPECIFIC_FD_ANY, 0);
	CHECK(io_uring_submit(&ring) == 1 && reap(&ring, 1, res, 2) == 0,
	      "submit");
	CHECK(res[0] == want, "accept at (u32)-1: %s, lowest free is %d",
	      res_str(res[0]), want);

	CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit");
	rl.rlim_cur = 64;
	CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit");
	cs = client(&sa);
	CHECK(cs >= 0, "connect: %s", strerror(errno));
	prep_accept_fd(&ring, ls, 0, 64, 1);
	CHECK(io_uring_submit(&ring) == 1 && reap(&ring, 1, res, 2) == 0,
	      "submit");
	CHECK(res[1] == -EBADF, "accept at fd 64 with RLIMIT_NOFILE 64: %s",
	      res_str(res[1]));
	return TAP_PASS;
}

/*
 * kernel/SERIES.md: "while the request waits for a connection the fd is
 * not held" - so the fd can be taken meanwhile, and the accept then fails
 * with EBUSY without consuming the connection.
 */
static int test_accept_waiting_holds_nothing(void)
{
	struct sockaddr_in sa;
	struct io_uring ring;
	int ls, cs, as, fd = fd_lowest_free(150), r, res[1] = { NO_CQE };

	ls = listener(&sa);
	CHECK(ls >= 0, "loopback listener: %s", strerror(errno));
	CHECK(io_uring_queue_init(8, &ring, 0) == 0, "io_uring_queue_init");
	prep_accept_fd(&ring, ls, 0, fd, 0);
	/* no connection yet: the submit itself parks the accept on poll */
	CHECK(io_uring_submit(&ring) == 1, "submit");
	r = open_at_fd("/dev/null", O_RDONLY, fd);
	CHECK(r == fd, "O_SPECIFIC_FD at the fd of a waiting accept: %d (%s)", r,
	      r < 0 ? strerror(errno) : "wrong fd");
	cs = client(&sa);
	CHECK(cs >= 0, "connect: %s", strerror(errno));
	CHECK(reap(&ring, 1, res, 1) == 0, "no accept completion");
	CHECK(res[0] == -EBUSY, "accept whose fd was taken meanwhile: %s",
	      res_str(res[0]));
	CHECK(fd_ino(fd) == path_ino("/dev/null"), "fd %d was replaced", fd);
	as = accept4(ls, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	CHECK(as >= 0, "the connection was consumed: %s", strerror(errno));
	return TAP_PASS;
}

static int test_accept_invalid(void)
{
	struct io_uring_sqe *sqe;
	struct sockaddr_in sa;
	struct io_uring ring;
	int ls, cs, fd = fd_lowest_free(130), res[3], r, i;

	for (i = 0; i < 3; i++)
		res[i] = NO_CQE;
	ls = listener(&sa);
	CHECK(ls >= 0, "loopback listener: %s", strerror(errno));
	CHECK(io_uring_queue_init(8, &ring, 0) == 0, "io_uring_queue_init");
	r = io_uring_register_files_sparse(&ring, 4);
	CHECK(r == 0, "register sparse files: %s", strerror(-r));
	/* a pending connection, so a wrongly accepted request shows */
	cs = client(&sa);
	CHECK(cs >= 0, "connect: %s", strerror(errno));

	/* one at a time: a request failing in prep ends the submit batch */
	sqe = prep_accept_fd(&ring, ls, 0, fd, 0);
	sqe->ioprio |= IORING_ACCEPT_MULTISHOT;
	CHECK(io_uring_submit(&ring) == 1 && reap(&ring, 1, res, 3) == 0,
	      "submit");
	sqe = prep_accept_fd(&ring, ls, 0, fd, 1);
	sqe->file_index = 1;	/* slot 0 */
	CHECK(io_uring_submit(&ring) == 1 && reap(&ring, 1, res, 3) == 0,
	      "submit");
	sqe = prep_accept_fd(&ring, ls, 0, fd, 2);
	sqe->ioprio |= IORING_ACCEPT_MULTISHOT;
	sqe->file_index = IORING_FILE_INDEX_ALLOC;
	CHECK(io_uring_submit(&ring) == 1 && reap(&ring, 1, res, 3) == 0,
	      "submit");
	CHECK(res[0] == -EINVAL, "flag + multishot: %s", res_str(res[0]));
	CHECK(res[1] == -EINVAL, "flag + file_index: %s", res_str(res[1]));
	CHECK(res[2] == -EINVAL, "flag + multishot + file_index alloc: %s",
	      res_str(res[2]));
	CHECK(!fd_is_open(fd), "fd %d installed anyway", fd);
	return TAP_PASS;
}

/* The 6.1 rule stays: a non-zero sqe->len without the flag is refused. */
static int test_accept_len_without_flag(void)
{
	struct io_uring_sqe *sqe;
	struct sockaddr_in sa;
	struct io_uring ring;
	int ls, cs, fd = fd_lowest_free(140), res[1] = { NO_CQE };

	ls = listener(&sa);
	CHECK(ls >= 0, "loopback listener: %s", strerror(errno));
	CHECK(io_uring_queue_init(8, &ring, 0) == 0, "io_uring_queue_init");
	cs = client(&sa);
	CHECK(cs >= 0, "connect: %s", strerror(errno));
	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_accept(sqe, ls, NULL, NULL, 0);
	sqe->len = fd;
	sqe->user_data = 0;
	CHECK(io_uring_submit(&ring) == 1, "submit");
	CHECK(reap(&ring, 1, res, 1) == 0, "no completion");
	CHECK(res[0] == -EINVAL, "len %d without the flag: %s", fd,
	      res_str(res[0]));
	return TAP_PASS;
}

static int test_min_fd(void)
{
	struct io_uring_sqe *sqe;
	struct sockaddr_in sa;
	struct io_uring ring;
	int min = 60, lo, ls, cs, res[2] = { NO_CQE, NO_CQE };

	ls = listener(&sa);
	CHECK(ls >= 0, "loopback listener: %s", strerror(errno));
	CHECK(io_uring_queue_init(8, &ring, 0) == 0, "io_uring_queue_init");
	cs = client(&sa);
	CHECK(cs >= 0, "connect: %s", strerror(errno));
	CHECK(prctl(PR_INCREASE_MIN_FD, min, 0UL, 0UL, 0UL) == 0, "prctl: %s",
	      strerror(errno));
	lo = fd_lowest_free(3);

	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_openat(sqe, AT_FDCWD, "/dev/null", O_RDONLY, 0);
	sqe->user_data = 0;
	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_accept(sqe, ls, NULL, NULL, 0);
	sqe->user_data = 1;
	CHECK(io_uring_submit(&ring) == 2, "submit");
	CHECK(reap(&ring, 2, res, 2) == 0, "missing completions");
	CHECK(res[0] >= min, "IORING_OP_OPENAT gave %s below the minimum %d",
	      res_str(res[0]), min);
	CHECK(res[1] >= min, "IORING_OP_ACCEPT gave %s below the minimum %d",
	      res_str(res[1]), min);
	CHECK(lo < min && !fd_is_open(lo), "free fd %d below the minimum got used",
	      lo);
	return TAP_PASS;
}

static int test_min_fd_specific(void)
{
	struct open_how_v1 how;
	struct sockaddr_in sa;
	struct io_uring ring;
	int min = 60, lo, lo2, ls, cs;
	int res[2] = { NO_CQE, NO_CQE };

	ls = listener(&sa);
	CHECK(ls >= 0, "loopback listener: %s", strerror(errno));
	CHECK(io_uring_queue_init(8, &ring, 0) == 0, "io_uring_queue_init");
	cs = client(&sa);
	CHECK(cs >= 0, "connect: %s", strerror(errno));
	lo = fd_lowest_free(3);
	lo2 = fd_lowest_free(lo + 1);
	CHECK(prctl(PR_INCREASE_MIN_FD, min, 0UL, 0UL, 0UL) == 0, "prctl: %s",
	      strerror(errno));
	prep_open_fd(&ring, "/dev/null", &how, lo, 0);
	prep_accept_fd(&ring, ls, 0, lo2, 1);
	CHECK(io_uring_submit(&ring) == 2, "submit");
	CHECK(reap(&ring, 2, res, 2) == 0, "missing completions");
	CHECK(res[0] == lo, "OPENAT2 O_SPECIFIC_FD=%d below the minimum: %s", lo,
	      res_str(res[0]));
	CHECK(res[1] == lo2, "ACCEPT at fd %d below the minimum: %s", lo2,
	      res_str(res[1]));
	return TAP_PASS;
}

static const struct tap_test tests[] = {
	{ "open -> read -> close on fd 89 as one linked chain in one submit",
	  test_chain_fd89, HAVE_URING_OPEN_FD },
	{ "256 overlapping chains on distinct fds; all closed afterwards",
	  test_overlapping_chains, HAVE_URING_OPEN_FD },
	{ "a chain whose open fails (ENOENT) cancels read and close, leaks nothing",
	  test_failed_open_enoent, HAVE_URING_OPEN_FD },
	{ "a chain whose open hits an open fd (EBUSY) cancels read and close",
	  test_failed_open_ebusy, HAVE_URING_OPEN_FD },
	{ "a short read cancels the rest of a LINK chain; the fd stays open",
	  test_short_read_link, HAVE_URING_OPEN_FD },
	{ "under IOSQE_IO_HARDLINK the close still runs after a short read",
	  test_short_read_hardlink, HAVE_URING_OPEN_FD },
	{ "close(Y) -> open(Y) -> read(Y) in one chain reads the new file",
	  test_linked_read_sees_new_file, HAVE_URING_OPEN_FD },
	{ "an O_CREAT open at a chosen fd forced through io-wq (IOSQE_ASYNC)",
	  test_open_async_creat, HAVE_URING_OPEN_FD },
	{ "ASYNC_CANCEL of an open blocked in io-wq releases its reserved fd",
	  test_cancel_blocked_open, HAVE_URING_OPEN_FD },
	{ "a link timeout on an open blocked in io-wq releases its reserved fd",
	  test_link_timeout_blocked_open, HAVE_URING_OPEN_FD },
	{ "OPENAT2 with a 24-byte open_how and O_SPECIFIC_FD is EINVAL",
	  test_openat2_ver0_flag, HAVE_URING_OPEN_FD },
	{ "OPENAT2 O_SPECIFIC_FD together with a direct file_index is EINVAL",
	  test_open_fd_with_file_index, HAVE_URING_OPEN_FD },
	{ "IORING_OP_OPENAT ignores O_SPECIFIC_FD like openat()",
	  test_openat_ignores_flag, HAVE_RING },
	{ "accept into a chosen fd from a loopback client",
	  test_accept_chosen_fd, HAVE_URING_ACCEPT_FD },
	{ "accept into fd 0", test_accept_fd_zero, HAVE_URING_ACCEPT_FD },
	{ "accept into an open fd is EBUSY; the open fd is untouched",
	  test_accept_busy_fd, HAVE_URING_ACCEPT_FD },
	{ "accept at (u32)-1 takes the lowest fd; at RLIMIT_NOFILE it is EBADF",
	  test_accept_any_and_ebadf, HAVE_URING_ACCEPT_FD },
	{ "a waiting accept holds no fd; taken meanwhile, it fails EBUSY",
	  test_accept_waiting_holds_nothing,
	  HAVE_URING_ACCEPT_FD | HAVE_OPENAT2_FD },
	{ "accept with the flag plus multishot or file_index is EINVAL",
	  test_accept_invalid, HAVE_URING_ACCEPT_FD },
	{ "accept with a non-zero len but without the flag is EINVAL",
	  test_accept_len_without_flag, HAVE_URING_ACCEPT_FD },
	{ "lowest-available io_uring openat and accept respect the minimum",
	  test_min_fd, HAVE_RING | HAVE_MIN_FD },
	{ "io_uring O_SPECIFIC_FD open and accept may use the reserved range",
	  test_min_fd_specific,
	  HAVE_URING_OPEN_FD | HAVE_URING_ACCEPT_FD | HAVE_MIN_FD },
};

static unsigned int probe_ring(void)
{
	struct open_how_v1 how;
	struct sockaddr_in sa;
	struct io_uring ring;
	unsigned int have = 0;
	int res[2] = { NO_CQE, NO_CQE }, ls, cs, r;
	int fd = fd_lowest_free(64);

	r = io_uring_queue_init(8, &ring, 0);
	if (r < 0) {
		tap_diag("probe: io_uring_queue_init: %s", strerror(-r));
		return 0;
	}
	have |= HAVE_RING;
	prep_open_fd(&ring, "/dev/null", &how, fd, 0);
	if (io_uring_submit(&ring) == 1 && reap(&ring, 1, res, 2) == 0) {
		if (res[0] >= 0) {
			have |= HAVE_URING_OPEN_FD;
			close(res[0]);
		} else if (res[0] != -EINVAL && res[0] != -E2BIG) {
			tap_diag("probe: OPENAT2 O_SPECIFIC_FD: %s", res_str(res[0]));
		}
	}
	ls = listener(&sa);
	cs = ls >= 0 ? client(&sa) : -1;
	if (cs >= 0) {
		prep_accept_fd(&ring, ls, 0, fd, 1);
		if (io_uring_submit(&ring) == 1 && reap(&ring, 1, res, 2) == 0) {
			if (res[1] >= 0)
				have |= HAVE_URING_ACCEPT_FD;
			else if (res[1] != -EINVAL)
				tap_diag("probe: ACCEPT at fd: %s", res_str(res[1]));
		}
	} else {
		tap_diag("probe: no loopback TCP: %s", strerror(errno));
	}
	_exit((int)(have >> 8));
}

int main(void)
{
	static const struct tap_feature features[] = {
		{ HAVE_RING, "io_uring not available" },
		{ HAVE_URING_OPEN_FD,
		  "IORING_OP_OPENAT2 O_SPECIFIC_FD not supported by this kernel" },
		{ HAVE_URING_ACCEPT_FD,
		  "IORING_ACCEPT_SPECIFIC_FD not supported by this kernel" },
		{ HAVE_MIN_FD, MISSING_MIN_FD },
		{ HAVE_OPENAT2_FD, MISSING_OPENAT2_FD },
	};
	unsigned int have;
	int status;
	pid_t pid;

	tap_plan(ARRAY_SIZE(tests));
	have = probe_features();
	fflush(stdout);
	pid = fork();
	if (pid == 0)
		probe_ring();
	if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status))
		have |= (unsigned int)WEXITSTATUS(status) << 8;
	if (getenv("SELFTEST_ASSUME_FEATURES"))
		have = ~0u;
	tap_diag("io_uring: ring=%s openat2_fd=%s accept_fd=%s",
		 have & HAVE_RING ? "yes" : "no",
		 have & HAVE_URING_OPEN_FD ? "yes" : "no",
		 have & HAVE_URING_ACCEPT_FD ? "yes" : "no");
	return tap_run(tests, ARRAY_SIZE(tests), have, features,
		       ARRAY_SIZE(features));
}
