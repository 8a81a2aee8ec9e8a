// SPDX-License-Identifier: MIT
/*
 * sendbody-bench: the CPU one sending thread spends per MiB of a large body
 * delivered over TCP on 127.0.0.1, four ways and a variant, in one run
 * (issue 13, item 5):
 *
 *   sendfile             sendfile(2) from the file to a non-blocking socket,
 *                        poll(2) for POLLOUT when it is full (orcd's kept
 *                        large files, uring_chain.c sf_push)
 *   send                 IORING_OP_SEND from a mapping of the file: one copy
 *                        (orcd's mapped bodies that are not kept open)
 *   send_zc fixed        IORING_OP_SEND_ZC with IORING_RECVSEND_FIXED_BUF
 *                        from a registered buffer (the mapping if the kernel
 *                        pins it, else a copy read once into anonymous memory)
 *   send_zc              IORING_OP_SEND_ZC from the mapping, not registered
 *   send_zc fixed, wait  as send_zc fixed, but each body waits for its
 *                        notifications before the next one starts: what a
 *                        buffer that is rewritten (read/send) must do
 *
 * Every io_uring send carries the whole rest of the body without
 * MSG_WAITALL and a short send is resubmitted, as orcd does; the socket is
 * a registered file. A SEND_ZC buffer is never written or unmapped while a
 * notification (IORING_CQE_F_NOTIF) for it is outstanding, and a cell ends
 * only when all of them are in, so their cost is counted.
 *
 * A receiver thread pinned to another CPU reads and discards with a large
 * buffer and counts the bytes; each cell checks that exactly the bytes sent
 * arrived, and the warm-up round (not counted) also compares every byte
 * with the file. The sender is pinned too. Its CPU is getrusage
 * (RUSAGE_THREAD) plus that of io_uring's io-wq workers (iou-wrk threads,
 * from /proc/self/task), so work moved off the thread still counts.
 * Softirq work done while a thread runs is charged to it unless the kernel
 * has CONFIG_IRQ_TIME_ACCOUNTING (the header line says). On loopback much
 * of a send runs elsewhere: the receiver's ACK processing pushes the
 * sender's queued data in the receiver's context, and heavy softirq work
 * moves to ksoftirqd. So the table also gives the receiver's CPU, the
 * ksoftirqd threads' of both CPUs, and "all": everything the transfer
 * cost on both sides; the receiver's own copy to user is the same for
 * every method, so differences in "all" are differences in sending.
 *
 * Rounds interleave the methods (the order rotates each round); the table
 * gives medians over rounds and the median [min-max] of the per-round
 * ratios to sendfile; --csv writes every cell. A method the kernel lacks
 * prints "n/a" and why.
 *
 * Build: the normal CMake build makes build/sendbody-bench; alone:
 *   cc -O2 -std=gnu11 -Wall -Wextra -o sendbody-bench \
 *      tests/bench/sendbody-bench.c -luring -lpthread
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <liburing.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* 6.2+ uapi; liburing 2.3's header predates them. */
#ifndef IORING_SEND_ZC_REPORT_USAGE
#define IORING_SEND_ZC_REPORT_USAGE (1U << 3)
#endif
#ifndef IORING_NOTIF_USAGE_ZC_COPIED
#define IORING_NOTIF_USAGE_ZC_COPIED (1U << 31)
#endif

#define MIB	 (1024.0 * 1024.0)
#define NSIZES	 4
#define MAXROUND 64

static const size_t sizes[NSIZES] = {64 << 10, 256 << 10, 1 << 20, 8 << 20};
static const char *const size_name[NSIZES] = {"64 KiB", "256 KiB", "1 MiB",
					      "8 MiB"};

enum {
	M_SENDFILE,
	M_SEND,
	M_ZC_FIXED,
	M_ZC,
	M_ZC_FIXED_WAIT,
	M_COUNT
};

/* for --methods */
static const char *const method_key[M_COUNT] = {"sendfile", "send", "zc-fixed",
						"zc", "zc-fixed-wait"};

static const char *const method_name[M_COUNT] = {"sendfile", "send (mmap)",
						 "send_zc fixed",
						 "send_zc (mmap)",
						 "send_zc fixed, wait notif"};

struct opts {
	int rounds, mib, sender_cpu, receiver_cpu;
	size_t rbuf;
	const char *dir, *csv;
	unsigned methods; /* bit per method to run */
};

struct body {
	size_t size;
	int fd;
	char *map;   /* the file, mapped */
	char *fixed; /* what send_zc fixed sends from: map or an anon copy */
};

/* What the receiver thread and the sender share; under @lock. */
struct rx {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t got, expect;
	double cpu_us;	    /* the receiver's CPU when it last reached expect */
	const char *verify; /* compare the stream with this body, or NULL */
	size_t vsize;
	uint64_t vbase; /* stream offset where the verified cell began */
	long mismatches;
	bool eof;
	bool started;
	int sock, cpu;
	size_t bufsize;
};

/* One cell (method x size x round) as measured. */
struct cell {
	double cpu_us, iowq_us, recv_us, secs;
	double ksoftirqd_us[2]; /* on the receiver's CPU, on the sender's */
	long notifs, copied;
	long calls, polls; /* sendfile calls or sends submitted; poll(2)s */
	int sndbuf;	   /* SO_SNDBUF at the end, as autotuned */
};

struct method {
	bool available;
	char why[160];
	struct cell c[NSIZES][MAXROUND];
};

struct uring {
	struct io_uring ring;
	unsigned zc_flags; /* IORING_SEND_ZC_REPORT_USAGE where known */
	long pending_notifs, notifs, copied, sends;
	int send_res;
	bool send_done;
};

struct bench {
	struct opts o;
	struct body body[NSIZES];
	struct rx rx;
	struct uring u;
	bool have_ring;
	int sock;
	pid_t ksoftirqd[2];
	long sf_calls, sf_polls;
	struct method m[M_COUNT];
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double tv_us(struct timeval tv)
{
	return tv.tv_sec * 1e6 + tv.tv_usec;
}

/*
 * The sending thread's user + system CPU. getrusage(RUSAGE_THREAD) reads
 * the run time as of the scheduler's last update, up to a tick old for a
 * thread that has been running; reading the thread's CPU clock first
 * brings it up to date.
 */
static double sender_us(void)
{
	struct timespec ts;
	struct rusage ru;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	getrusage(RUSAGE_THREAD, &ru);
	return tv_us(ru.ru_utime) + tv_us(ru.ru_stime);
}

static double thread_cpu_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* A task's run time in µs from schedstat (ns, exact); 0 if unreadable. */
static double task_us(const char *path)
{
	unsigned long long ns = 0;
	FILE *f = fopen(path, "r");

	if (!f)
		return 0;
	if (fscanf(f, "%llu", &ns) != 1)
		ns = 0;
	fclose(f);
	return ns / 1e3;
}

/*
 * io_uring's io-wq workers (iou-wrk-*) of this process. One that exits
 * has been idle for seconds first, longer than a cell, so summing the
 * live ones at both ends misses nothing.
 */
static double iowq_us(void)
{
	char p[300], comm[64];
	double sum = 0;
	struct dirent *de;
	DIR *d = opendir("/proc/self/task");

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		FILE *f;

		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/proc/self/task/%s/comm", de->d_name);
		f = fopen(p, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f) &&
		    !strncmp(comm, "iou-wrk", 7)) {
			snprintf(p, sizeof(p), "/proc/self/task/%s/schedstat",
				 de->d_name);
			sum += task_us(p);
		}
		fclose(f);
	}
	closedir(d);
	return sum;
}

static double pid_us(pid_t pid)
{
	char p[64];

	if (pid <= 0)
		return 0;
	snprintf(p, sizeof(p), "/proc/%d/schedstat", (int)pid);
	return task_us(p);
}

static int pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set) ? -errno : 0;
}

/* ---- the receiver ---- */

static void verify_chunk(struct rx *rx, const char *buf, size_t n)
{
	uint64_t pos = rx->got - rx->vbase;

	while (n) {
		size_t at = pos % rx->vsize;
		size_t k = rx->vsize - at < n ? rx->vsize - at : n;

		if (memcmp(buf, rx->verify + at, k))
			rx->mismatches++;
		buf += k;
		pos += k;
		n -= k;
	}
}

static void *receiver(void *arg)
{
	struct rx *rx = arg;
	char *buf = malloc(rx->bufsize);

	pthread_mutex_lock(&rx->lock);
	rx->started = true;
	rx->cpu_us = thread_cpu_us();
	pthread_cond_broadcast(&rx->cond);
	pthread_mutex_unlock(&rx->lock);
	if (pin(rx->cpu))
		fprintf(stderr,
			"sendbody-bench: receiver not pinned to CPU %d\n",
			rx->cpu);
	for (;;) {
		ssize_t n = buf ? read(rx->sock, buf, rx->bufsize) : -1;

		if (n < 0 && errno == EINTR)
			continue;
		pthread_mutex_lock(&rx->lock);
		if (n <= 0) {
			rx->eof = true;
			pthread_cond_broadcast(&rx->cond);
			pthread_mutex_unlock(&rx->lock);
			break;
		}
		if (rx->verify)
			verify_chunk(rx, buf, (size_t)n);
		rx->got += (uint64_t)n;
		if (rx->got >= rx->expect) {
			rx->cpu_us = thread_cpu_us();
			pthread_cond_broadcast(&rx->cond);
		}
		pthread_mutex_unlock(&rx->lock);
	}
	free(buf);
	return NULL;
}

/* ---- set-up: files, sockets, ring ---- */

static void fill(char *p, size_t n, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (char)x;
	}
}

static int make_body(struct body *b, const char *dir, size_t size, int i)
{
	char path[4096];
	char *tmp = malloc(size);
	int fd;

	if (!tmp)
		return -ENOMEM;
	snprintf(path, sizeof(path), "%s/sendbody-bench.XXXXXX", dir);
	fd = mkstemp(path);
	if (fd < 0) {
		free(tmp);
		return -errno;
	}
	unlink(path);
	fill(tmp, size, (uint64_t)i + 1);
	if (write(fd, tmp, size) != (ssize_t)size) {
		free(tmp);
		close(fd);
		return -EIO;
	}
	free(tmp);
	b->size = size;
	b->fd = fd;
	b->map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	if (b->map == MAP_FAILED)
		return -errno;
	/* fault the mapping in: the page cache is warm, the page tables too */
	for (size_t off = 0; off < size; off += 4096)
		(void)*(volatile char *)(b->map + off);
	return 0;
}

static int tcp_pair(int *out_tx, int *out_rx)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), tx, rx;

	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(l, 1) || getsockname(l, (struct sockaddr *)&a, &len))
		return -errno;
	tx = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (tx < 0 || connect(tx, (struct sockaddr *)&a, sizeof(a)))
		return -errno;
	rx = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	if (rx < 0)
		return -errno;
	close(l);
	/* as sf_push leaves it: a full socket answers EAGAIN */
	if (fcntl(tx, F_SETFL, fcntl(tx, F_GETFL) | O_NONBLOCK))
		return -errno;
	*out_tx = tx;
	*out_rx = rx;
	return 0;
}

static void set_na(struct method *m, const char *fmt, int err)
{
	m->available = false;
	snprintf(m->why, sizeof(m->why), fmt, strerror(-err));
}

/* The ring as orcd sets it up (uring_setup.c): the strongest flags the
 * kernel takes; the socket is a registered file. */
static int ring_setup(struct bench *b)
{
	static const unsigned tries[] = {
		IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN |
			IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
		IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN,
		0,
	};
	int ret = -EINVAL;

	for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
		ret = io_uring_queue_init(64, &b->u.ring, tries[i]);
		if (ret == 0)
			break;
	}
	if (ret)
		return ret;
	ret = io_uring_register_files(&b->u.ring, &b->sock, 1);
	if (ret)
		return ret;
	io_uring_register_ring_fd(&b->u.ring); /* optional, as in orcd */
	return 0;
}

static bool opcode_ok(struct io_uring *ring, int op)
{
	struct io_uring_probe *p = io_uring_get_probe_ring(ring);
	bool ok = p && io_uring_opcode_supported(p, op);

	io_uring_free_probe(p);
	return ok;
}

/*
 * The buffers send_zc fixed sends from, one per size: the file mappings if
 * the kernel pins them, else anonymous copies read once. Returns what was
 * registered, for the header line.
 */
static const char *register_fixed(struct bench *b)
{
	struct iovec iov[NSIZES];
	int ret;

	for (int i = 0; i < NSIZES; i++)
		iov[i] = (struct iovec){b->body[i].map, b->body[i].size};
	ret = io_uring_register_buffers(&b->u.ring, iov, NSIZES);
	if (ret == 0) {
		for (int i = 0; i < NSIZES; i++)
			b->body[i].fixed = b->body[i].map;
		return "the file mappings";
	}
	for (int i = 0; i < NSIZES; i++) {
		size_t n = b->body[i].size;
		char *p = mmap(NULL, n, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED ||
		    pread(b->body[i].fd, p, n, 0) != (ssize_t)n) {
			set_na(&b->m[M_ZC_FIXED], "anonymous copy: %s",
			       -ENOMEM);
			set_na(&b->m[M_ZC_FIXED_WAIT], "anonymous copy: %s",
			       -ENOMEM);
			return "nothing";
		}
		b->body[i].fixed = p;
		iov[i] = (struct iovec){p, n};
	}
	ret = io_uring_register_buffers(&b->u.ring, iov, NSIZES);
	if (ret) {
		set_na(&b->m[M_ZC_FIXED], "io_uring_register_buffers: %s", ret);
		set_na(&b->m[M_ZC_FIXED_WAIT], "io_uring_register_buffers: %s",
		       ret);
		return "nothing";
	}
	return "anonymous copies (the mappings would not register)";
}

/* ---- the methods ---- */

/* One body by sendfile; returns the bytes sent or -errno with none sent. */
static long send_sendfile(struct bench *b, const struct body *body)
{
	off_t off = 0;

	while ((size_t)off < body->size) {
		ssize_t n = sendfile(b->sock, body->fd, &off,
				     body->size - (size_t)off);
		struct pollfd p = {.fd = b->sock, .events = POLLOUT};

		b->sf_calls++;
		if (n > 0)
			continue;
		if (n == 0 || (errno != EINTR && errno != EAGAIN))
			return off ? (long)off : n ? -errno : -EIO;
		if (errno == EINTR)
			continue;
		b->sf_polls++;
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			return off ? (long)off : -errno;
	}
	return (long)off;
}

/* Take every CQE there is: the send's result, notifications. */
static void reap(struct uring *u)
{
	struct io_uring_cqe *cqe;
	unsigned head, seen = 0;

	io_uring_for_each_cqe(&u->ring, head, cqe)
	{
		seen++;
		if (cqe->flags & IORING_CQE_F_NOTIF) {
			u->pending_notifs--;
			u->notifs++;
			if ((u->zc_flags & IORING_SEND_ZC_REPORT_USAGE) &&
			    ((unsigned)cqe->res & IORING_NOTIF_USAGE_ZC_COPIED))
				u->copied++;
			continue;
		}
		if (cqe->flags & IORING_CQE_F_MORE)
			u->pending_notifs++;
		u->send_res = cqe->res;
		u->send_done = true;
	}
	io_uring_cq_advance(&u->ring, seen);
}

static int wait_cqe(struct uring *u)
{
	struct io_uring_cqe *cqe;
	int ret = io_uring_wait_cqe(&u->ring, &cqe);

	if (ret)
		return ret;
	reap(u);
	return 0;
}

static int drain_notifs(struct uring *u)
{
	while (u->pending_notifs > 0) {
		int ret = wait_cqe(u);

		if (ret)
			return ret;
	}
	return 0;
}

static void prep(struct uring *u, int method, const struct body *body,
		 size_t off, int idx)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
	size_t len = body->size - off;

	switch (method) {
	case M_SEND:
		io_uring_prep_send(sqe, 0, body->map + off, len, MSG_NOSIGNAL);
		break;
	case M_ZC:
		io_uring_prep_send_zc(sqe, 0, body->map + off, len,
				      MSG_NOSIGNAL, u->zc_flags);
		break;
	default: /* the fixed-buffer ones */
		io_uring_prep_send_zc_fixed(sqe, 0, body->fixed + off, len,
					    MSG_NOSIGNAL, u->zc_flags, idx);
		break;
	}
	sqe->flags |= IOSQE_FIXED_FILE;
}

/* One body by io_uring; returns the bytes sent or -errno with none sent. */
static long send_uring(struct uring *u, int method, const struct body *body,
		       int idx)
{
	size_t off = 0;

	while (off < body->size) {
		int ret;

		prep(u, method, body, off, idx);
		u->sends++;
		u->send_done = false;
		ret = io_uring_submit_and_wait(&u->ring, 1);
		if (ret < 0)
			return off ? (long)off : ret;
		reap(u);
		while (!u->send_done)
			if ((ret = wait_cqe(u)))
				return off ? (long)off : ret;
		if (u->send_res <= 0)
			return off ? (long)off :
				     (u->send_res ? u->send_res : -EIO);
		off += (size_t)u->send_res;
	}
	if (method == M_ZC_FIXED_WAIT) {
		int ret = drain_notifs(u);

		if (ret)
			return ret;
	}
	return (long)off;
}

/* The first SEND_ZC tells whether the kernel knows REPORT_USAGE (6.2+). */
static int probe_zc_usage(struct bench *b)
{
	const struct body *body = &b->body[0];
	struct uring *u = &b->u;
	long n;

	u->zc_flags = IORING_SEND_ZC_REPORT_USAGE;
	n = send_uring(u, M_ZC, body, 0);
	if (n == -EINVAL) {
		u->zc_flags = 0;
		n = send_uring(u, M_ZC, body, 0);
	}
	if (n < 0)
		return (int)n;
	/* the receiver must take these bytes too */
	pthread_mutex_lock(&b->rx.lock);
	b->rx.expect += (uint64_t)n;
	pthread_mutex_unlock(&b->rx.lock);
	return drain_notifs(u);
}

/* ---- one cell: a method sends one body size for --mib MiB ---- */

/* Until the receiver has all that was sent: a stream that stops short for
 * 30 s (bytes lost, or a sender that counts wrong) is an error. */
static int wait_received(struct rx *rx)
{
	uint64_t seen = UINT64_MAX;
	struct timespec dl;
	int ret = 0;

	pthread_mutex_lock(&rx->lock);
	while (rx->got < rx->expect && !rx->eof && ret != ETIMEDOUT) {
		if (rx->got != seen) {
			seen = rx->got;
			clock_gettime(CLOCK_REALTIME, &dl);
			dl.tv_sec += 30;
		}
		ret = pthread_cond_timedwait(&rx->cond, &rx->lock, &dl);
	}
	ret = rx->got != rx->expect || rx->mismatches ? -EPROTO : 0;
	pthread_mutex_unlock(&rx->lock);
	return ret;
}

static int run_cell(struct bench *b, int method, int si, bool verify,
		    struct cell *out)
{
	const struct body *body = &b->body[si];
	long bodies = (long)((double)b->o.mib * MIB / body->size);
	uint64_t planned, sent = 0;
	double t0, c0, w0, r0, k0[2];
	int err = 0;

	if (bodies < 1)
		bodies = 1;
	planned = (uint64_t)bodies * body->size;
	pthread_mutex_lock(&b->rx.lock);
	b->rx.verify = verify ? body->map : NULL;
	b->rx.vsize = body->size;
	b->rx.vbase = b->rx.got;
	b->rx.expect = b->rx.got + planned;
	r0 = b->rx.cpu_us;
	pthread_mutex_unlock(&b->rx.lock);
	b->u.notifs = b->u.copied = b->u.sends = 0;
	b->sf_calls = b->sf_polls = 0;

	for (int i = 0; i < 2; i++)
		k0[i] = pid_us(b->ksoftirqd[i]);
	w0 = iowq_us();
	c0 = sender_us();
	t0 = now();
	for (long i = 0; i < bodies && !err; i++) {
		long n = method == M_SENDFILE ?
				 send_sendfile(b, body) :
				 send_uring(&b->u, method, body, si);

		sent += n > 0 ? (uint64_t)n : 0;
		err = n < 0 ? (int)n : n < (long)body->size ? -EIO : 0;
	}
	if (method != M_SENDFILE) {
		/* after a failure too: no notification may reach a later cell */
		int e = drain_notifs(&b->u);

		err = err ? err : e;
	}
	if (err) {
		/* the receiver waits for what did go out, then we stop */
		pthread_mutex_lock(&b->rx.lock);
		b->rx.expect = b->rx.vbase + sent;
		pthread_mutex_unlock(&b->rx.lock);
	}
	if (wait_received(&b->rx)) {
		fprintf(stderr,
			"sendbody-bench: %s, %s: receiver got %llu bytes of %llu sent, %ld mismatching chunks\n",
			method_name[method], size_name[si],
			(unsigned long long)(b->rx.got - b->rx.vbase),
			(unsigned long long)sent, b->rx.mismatches);
		return -EPROTO;
	}
	out->secs = now() - t0;
	out->cpu_us = sender_us() - c0;
	out->iowq_us = iowq_us() - w0;
	pthread_mutex_lock(&b->rx.lock);
	out->recv_us = b->rx.cpu_us - r0;
	pthread_mutex_unlock(&b->rx.lock);
	for (int i = 0; i < 2; i++)
		out->ksoftirqd_us[i] = pid_us(b->ksoftirqd[i]) - k0[i];
	out->notifs = b->u.notifs;
	out->copied = b->u.copied;
	out->calls = method == M_SENDFILE ? b->sf_calls : b->u.sends;
	out->polls = b->sf_polls;
	if (getsockopt(b->sock, SOL_SOCKET, SO_SNDBUF, &out->sndbuf,
		       &(socklen_t){sizeof(out->sndbuf)}))
		out->sndbuf = -1;
	return err;
}

/* ---- report ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* What a cell's figure is, per MiB delivered unless it is a rate. */
enum fig {
	F_SENDER, /* the thread and io-wq */
	F_IOWQ,
	F_RECV,
	F_SOFTIRQD,
	F_ALL, /* both sides and ksoftirqd: all the CPU the transfer took */
	F_MIBS,
	F_MIB /* the cell's size */
};

static double figure(const struct bench *b, int si, const struct cell *c,
		     enum fig f)
{
	long bodies = (long)((double)b->o.mib * MIB / b->body[si].size);
	double mib = (bodies < 1 ? 1 : bodies) * b->body[si].size / MIB;

	switch (f) {
	case F_SENDER:
		return (c->cpu_us + c->iowq_us) / mib;
	case F_IOWQ:
		return c->iowq_us / mib;
	case F_RECV:
		return c->recv_us / mib;
	case F_SOFTIRQD:
		return (c->ksoftirqd_us[0] + c->ksoftirqd_us[1]) / mib;
	case F_ALL:
		return (c->cpu_us + c->iowq_us + c->recv_us +
			c->ksoftirqd_us[0] + c->ksoftirqd_us[1]) /
		       mib;
	case F_MIBS:
		return mib / c->secs;
	default:
		return mib;
	}
}

static double med_fig(const struct bench *b, int m, int si, enum fig f)
{
	double v[MAXROUND];

	for (int r = 0; r < b->o.rounds; r++)
		v[r] = figure(b, si, &b->m[m].c[si][r], f);
	return median(v, b->o.rounds);
}

/*
 * "median [min-max]" of the per-round ratios to sendfile: paired by round,
 * so a burst of outside load hits every method of that round alike.
 */
static const char *ratio(const struct bench *b, int m, int si, enum fig f,
			 char *out, size_t len)
{
	double v[MAXROUND];
	int n = b->o.rounds;

	for (int r = 0; r < n; r++)
		v[r] = figure(b, si, &b->m[m].c[si][r], f) /
		       figure(b, si, &b->m[M_SENDFILE].c[si][r], f);
	median(v, n); /* sorts */
	snprintf(out, len, "%.2f [%.2f–%.2f]",
		 n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2, v[0],
		 v[n - 1]);
	return out;
}

static void report(const struct bench *b)
{
	printf("| method | size | sender CPU µs/MiB | vs sendfile | of which io-wq | receiver | ksoftirqd | all CPU µs/MiB | vs sendfile | MiB/s | ZC notifs copied |\n");
	printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
	for (int si = 0; si < NSIZES; si++)
		for (int m = 0; m < M_COUNT; m++) {
			const struct method *me = &b->m[m];
			long n = 0, cp = 0;
			char zc[32] = "–", r1[48], r2[48];

			if (!(b->o.methods & (1u << m)))
				continue;
			if (!me->available) {
				printf("| %s | %s | n/a: %s | | | | | | | | |\n",
				       method_name[m], size_name[si], me->why);
				continue;
			}
			for (int r = 0; r < b->o.rounds; r++) {
				n += me->c[si][r].notifs;
				cp += me->c[si][r].copied;
			}
			if (n && (b->u.zc_flags & IORING_SEND_ZC_REPORT_USAGE))
				snprintf(zc, sizeof(zc), "%.0f%% of %ld",
					 100.0 * cp / n, n);
			else if (n)
				snprintf(zc, sizeof(zc), "? of %ld", n);
			printf("| %s | %s | %.0f | %s | %.0f | %.0f | %.0f | %.0f | %s | %.0f | %s |\n",
			       method_name[m], size_name[si],
			       med_fig(b, m, si, F_SENDER),
			       ratio(b, m, si, F_SENDER, r1, sizeof(r1)),
			       med_fig(b, m, si, F_IOWQ),
			       med_fig(b, m, si, F_RECV),
			       med_fig(b, m, si, F_SOFTIRQD),
			       med_fig(b, m, si, F_ALL),
			       ratio(b, m, si, F_ALL, r2, sizeof(r2)),
			       med_fig(b, m, si, F_MIBS), zc);
		}
}

/* Every counted cell, one row each, for a closer look at the spread. */
static int write_csv(const struct bench *b)
{
	FILE *f = fopen(b->o.csv, "w");

	if (!f)
		return -errno;
	fprintf(f,
		"round,method,size,mib,secs,sender_us,iowq_us,receiver_us,ksoftirqd_receiver_cpu_us,ksoftirqd_sender_cpu_us,notifs,copied,calls,polls,sndbuf\n");
	for (int r = 0; r < b->o.rounds; r++)
		for (int si = 0; si < NSIZES; si++)
			for (int m = 0; m < M_COUNT; m++) {
				const struct cell *c = &b->m[m].c[si][r];

				if (!b->m[m].available)
					continue;
				fprintf(f,
					"%d,%s,%zu,%.0f,%.6f,%.1f,%.1f,%.1f,%.1f,%.1f,%ld,%ld,%ld,%ld,%d\n",
					r, method_key[m], sizes[si],
					figure(b, si, c, F_MIB), c->secs,
					c->cpu_us, c->iowq_us, c->recv_us,
					c->ksoftirqd_us[0], c->ksoftirqd_us[1],
					c->notifs, c->copied, c->calls,
					c->polls, c->sndbuf);
			}
	return fclose(f) ? -errno : 0;
}

/* ---- main ---- */

/* "sendfile,zc": a subset to run (sendfile always runs: the base). */
static int parse_methods(char *list, unsigned *out)
{
	*out = 1u << M_SENDFILE;
	for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
		int m = 0;

		while (m < M_COUNT && strcmp(tok, method_key[m]))
			m++;
		if (m == M_COUNT)
			return -1;
		*out |= 1u << m;
	}
	return 0;
}

static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{"rounds", required_argument, NULL, 'r'},
		{"mib", required_argument, NULL, 'm'},
		{"dir", required_argument, NULL, 'd'},
		{"sender-cpu", required_argument, NULL, 's'},
		{"receiver-cpu", required_argument, NULL, 'c'},
		{"rbuf", required_argument, NULL, 'b'},
		{"methods", required_argument, NULL, 'M'},
		{"csv", required_argument, NULL, 'C'},
		{NULL, 0, NULL, 0},
	};
	int c;

	*o = (struct opts){.rounds = 7,
			   .mib = 256,
			   .sender_cpu = 1,
			   .receiver_cpu = 0,
			   .rbuf = 1 << 20,
			   .methods = (1u << M_COUNT) - 1,
			   .dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp"};
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'r':
			o->rounds = atoi(optarg);
			break;
		case 'm':
			o->mib = atoi(optarg);
			break;
		case 'd':
			o->dir = optarg;
			break;
		case 's':
			o->sender_cpu = atoi(optarg);
			break;
		case 'c':
			o->receiver_cpu = atoi(optarg);
			break;
		case 'b':
			o->rbuf = (size_t)atol(optarg);
			break;
		case 'C':
			o->csv = optarg;
			break;
		case 'M':
			if (parse_methods(optarg, &o->methods))
				return -1;
			break;
		default:
			return -1;
		}
	}
	if (optind != argc || o->rounds < 1 || o->rounds > MAXROUND ||
	    o->mib < 1 || o->rbuf < 4096 || o->sender_cpu < 0 ||
	    o->receiver_cpu < 0)
		return -1;
	return 0;
}

static pid_t find_task(const char *comm)
{
	char p[64], name[64];

	for (pid_t pid = 2; pid < 4096; pid++) {
		FILE *f;

		snprintf(p, sizeof(p), "/proc/%d/comm", (int)pid);
		f = fopen(p, "r");
		if (!f)
			continue;
		if (fgets(name, sizeof(name), f)) {
			name[strcspn(name, "\n")] = 0;
			if (!strcmp(name, comm)) {
				fclose(f);
				return pid;
			}
		}
		fclose(f);
	}
	return -1;
}

/* Is softirq time split off from the task that ran it? Then the sender's
 * own figure would miss the receive path it runs; say so. */
static const char *irq_time_accounting(void)
{
	char line[64] = "";
	FILE *f = popen(
		"{ zcat /proc/config.gz || cat /boot/config-$(uname -r); } 2>/dev/null | awk '/^CONFIG_IRQ_TIME_ACCOUNTING=y/ { y = 1 } END { print NR ? (y ? \"y\" : \"n\") : \"?\" }'",
		"r");

	if (f) {
		if (!fgets(line, sizeof(line), f))
			line[0] = 0;
		pclose(f);
	}
	if (line[0] == 'y')
		return "SET: softirq time is not charged to the sender";
	return line[0] == 'n' ? "not set" : "unknown";
}

static int setup(struct bench *b, pthread_t *rt)
{
	int rxsock = -1, ret;
	char name[32];

	for (int i = 0; i < NSIZES; i++) {
		ret = make_body(&b->body[i], b->o.dir, sizes[i], i);
		if (ret) {
			fprintf(stderr, "sendbody-bench: a file in %s: %s\n",
				b->o.dir, strerror(-ret));
			return ret;
		}
	}
	ret = tcp_pair(&b->sock, &rxsock);
	if (ret) {
		fprintf(stderr, "sendbody-bench: TCP on 127.0.0.1: %s\n",
			strerror(-ret));
		return ret;
	}
	pthread_mutex_init(&b->rx.lock, NULL);
	pthread_cond_init(&b->rx.cond, NULL);
	b->rx.sock = rxsock;
	b->rx.cpu = b->o.receiver_cpu;
	b->rx.bufsize = b->o.rbuf;
	if (pthread_create(rt, NULL, receiver, &b->rx))
		return -EAGAIN;
	pthread_mutex_lock(&b->rx.lock);
	while (!b->rx.started)
		pthread_cond_wait(&b->rx.cond, &b->rx.lock);
	pthread_mutex_unlock(&b->rx.lock);
	ret = pin(b->o.sender_cpu);
	if (ret) {
		fprintf(stderr, "sendbody-bench: pinning to CPU %d: %s\n",
			b->o.sender_cpu, strerror(-ret));
		return ret;
	}
	for (int i = 0; i < 2; i++) {
		int cpu = i ? b->o.sender_cpu : b->o.receiver_cpu;

		snprintf(name, sizeof(name), "ksoftirqd/%d", cpu);
		b->ksoftirqd[i] = find_task(name);
	}

	for (int m = 0; m < M_COUNT; m++)
		if (b->o.methods & (1u << m))
			b->m[m].available = true;
		else
			snprintf(b->m[m].why, sizeof(b->m[m].why),
				 "not asked for (--methods)");
	ret = ring_setup(b);
	if (ret) {
		for (int m = M_SEND; m < M_COUNT; m++)
			set_na(&b->m[m], "io_uring set-up: %s", ret);
		return 0;
	}
	b->have_ring = true;
	if (!opcode_ok(&b->u.ring, IORING_OP_SEND))
		set_na(&b->m[M_SEND], "IORING_OP_SEND: %s", -EOPNOTSUPP);
	if (!opcode_ok(&b->u.ring, IORING_OP_SEND_ZC)) {
		for (int m = M_ZC_FIXED; m < M_COUNT; m++)
			set_na(&b->m[m],
			       "IORING_OP_SEND_ZC not in the probe: %s",
			       -EOPNOTSUPP);
		return 0;
	}
	ret = probe_zc_usage(b);
	if (ret)
		for (int m = M_ZC_FIXED; m < M_COUNT; m++)
			set_na(&b->m[m], "SEND_ZC: %s", ret);
	return wait_received(&b->rx);
}

int main(int argc, char **argv)
{
	static struct bench b;
	const char *fixed_src = "(not run)";
	pthread_t rt;
	int ret;

	if (parse(argc, argv, &b.o)) {
		fprintf(stderr,
			"usage: sendbody-bench [--rounds R] [--mib MIB per cell] [--dir DIR] [--sender-cpu N] [--receiver-cpu N] [--rbuf BYTES]\n"
			"                      [--methods sendfile,send,zc-fixed,zc,zc-fixed-wait] [--csv FILE]\n");
		return 2;
	}
	if (setup(&b, &rt))
		return 1;
	if (b.m[M_ZC_FIXED].available || b.m[M_ZC_FIXED_WAIT].available)
		fixed_src = register_fixed(&b);

	for (int round = -1; round < b.o.rounds; round++)
		for (int si = 0; si < NSIZES; si++)
			for (int k = 0; k < M_COUNT; k++) {
				/* round -1 warms up, checks bytes, is not
				 * counted; then the order rotates */
				int m = (k + (round < 0 ? 0 : round)) % M_COUNT;
				struct cell scratch;
				struct method *me = &b.m[m];

				if (!me->available)
					continue;
				ret = run_cell(&b, m, si, round < 0,
					       round < 0 ? &scratch :
							   &me->c[si][round]);
				if (ret == -EPROTO)
					return 1;
				if (ret && m == M_SENDFILE) {
					/* the base of every ratio */
					fprintf(stderr,
						"sendbody-bench: sendfile, %s: %s\n",
						size_name[si], strerror(-ret));
					return 1;
				}
				if (ret) {
					set_na(me, "failed: %s", ret);
					if (round >= 0)
						fprintf(stderr,
							"sendbody-bench: %s failed in a counted round: %s\n",
							method_name[m],
							strerror(-ret));
				}
			}

	printf("sendbody-bench: TCP over 127.0.0.1, sender on CPU %d, receiver on CPU %d (reads of %zu bytes); %d MiB per cell, %d rounds + 1 warm-up (bytes compared); files in %s; send_zc fixed sends from %s; SEND_ZC usage report %s; CONFIG_IRQ_TIME_ACCOUNTING %s\n",
	       b.o.sender_cpu, b.o.receiver_cpu, b.o.rbuf, b.o.mib, b.o.rounds,
	       b.o.dir, fixed_src,
	       b.u.zc_flags & IORING_SEND_ZC_REPORT_USAGE ? "on" : "off",
	       irq_time_accounting());
	report(&b);
	if (b.o.csv && (ret = write_csv(&b)))
		fprintf(stderr, "sendbody-bench: %s: %s\n", b.o.csv,
			strerror(-ret));
	shutdown(b.sock, SHUT_WR);
	pthread_join(rt, NULL);
	if (b.rx.got != b.rx.expect) {
		fprintf(stderr,
			"sendbody-bench: %llu bytes arrived, %llu sent\n",
			(unsigned long long)b.rx.got,
			(unsigned long long)b.rx.expect);
		return 1;
	}
	return 0;
}
