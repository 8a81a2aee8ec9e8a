// SPDX-License-Identifier: GPL-2.0
#include "fifo_block.h"
#include "fdcheck.h"
#include "specific_fd_abi.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static void *fifo_opener(void *p)
{
	struct fifo_block *b = p;
	int r;

	__atomic_store_n(&b->tid, gettid(), __ATOMIC_SEQ_CST);
	b->err = 0;
	r = open_at_fd(b->path, O_RDONLY, b->want);
	b->err = errno;
	__atomic_store_n(&b->result, r, __ATOMIC_SEQ_CST);
	return NULL;
}

/* Is thread @tid asleep inside openat2(2)? 1, 0, or -1 if unreadable. */
static int blocked_in_openat2(pid_t tid)
{
	char path[64], buf[256];
	FILE *f;
	long nr = -1;
	char state = '?';

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	f = fopen(path, "re");
	if (f) {
		if (fgets(buf, sizeof(buf), f)) {
			char *p = strrchr(buf, ')');

			if (p && p[1])
				state = p[2];
		}
		fclose(f);
	}
	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	if (fscanf(f, "%ld", &nr) != 1)
		nr = -1;
	fclose(f);
	return state == 'S' && nr == SYS_openat2;
}

int fifo_block_start(struct fifo_block *b, int want)
{
	char *dir = make_tmpdir();
	struct timespec start, now;
	int blocked = 0, done = 0;

	b->result = -2;
	b->tid = 0;
	b->want = want;
	CHECK(dir, "mkdtemp: %s", strerror(errno));
	snprintf(b->path, sizeof(b->path), "%s/fifo", dir);
	CHECK(mkfifo(b->path, 0600) == 0, "mkfifo: %s", strerror(errno));
	CHECK(pthread_create(&b->th, NULL, fifo_opener, b) == 0,
	      "pthread_create");

	/* The FIFO open blocks until a writer comes: wait until it does. */
	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		pid_t tid = __atomic_load_n(&b->tid, __ATOMIC_SEQ_CST);

		done = __atomic_load_n(&b->result, __ATOMIC_SEQ_CST) != -2;
		if (tid && !done)
			blocked = blocked_in_openat2(tid);
		CHECK(blocked >= 0 || done,
		      "cannot read /proc/self/task/%d/syscall", tid);
		if (blocked < 0)
			blocked = 0;
		if (!blocked && !done)
			usleep(1000);
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (!blocked && !done && now.tv_sec - start.tv_sec < 20);
	CHECK(blocked, "thread never blocked in openat2 (result %d: %s)",
	      b->result, done ? strerror(b->err) : "still running");
	return TAP_PASS;
}

int fifo_block_finish(struct fifo_block *b)
{
	int wr = open(b->path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);

	if (wr < 0) {
		tap_diag("open FIFO for writing: %s", strerror(errno));
		return -1;
	}
	pthread_join(b->th, NULL);
	return wr;
}
