// SPDX-License-Identifier: MIT
/*
 * readfile-bench: read the small files a ps-like tool reads three ways and
 * compare, in one run:
 *
 *   open/read/close   openat + read + close per file (3 system calls)
 *   readfile()        the series' readfile(2) (1 system call, no fd)
 *   io_uring chains   linked openat2(O_SPECIFIC_FD = Y) -> read(Y) -> close(Y)
 *                     on fds Y from a PR_INCREASE_MIN_FD range, many chains
 *                     in flight, one io_uring_enter per submit-and-wait
 *
 * The files: /proc/PID/{stat,status,cmdline} of every process (the
 * benchmark first forks --children sleeping processes so there is a
 * process table to read) and up to --sysfs attributes found under /sys.
 * Rounds interleave the methods (the order rotates each round), so drift on
 * a busy machine hits all three. System calls are counted at the call
 * sites. Prints one table; ratios are against open/read/close.
 *
 * Built statically by tests/bench/guest-readfile against the patched uapi
 * headers and run in the guest; a method the kernel lacks reports "n/a".
 */
#include "readfile_abi.h"
#include "specific_fd_abi.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <liburing.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct opts {
	int children;
	int rounds;
	int inflight;
	int sysfs;
	int bufsize;
};

struct files {
	char **path;
	int n, cap, nproc, nsys;
};

struct result {
	const char *name;
	bool available;
	double secs, cpu;
	double *round_secs; /* per counted round, for the median ratio */
	long files, syscalls, errors, bytes;
};

enum {
	M_CLASSIC,
	M_READFILE,
	M_URING,
	M_COUNT
};

static char *rbuf;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* user + system CPU of the whole process, io_uring workers included */
static double cpu_now(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static void add_file(struct files *f, const char *path)
{
	if (f->n == f->cap) {
		f->cap = f->cap ? 2 * f->cap : 1024;
		f->path = realloc(f->path, f->cap * sizeof(*f->path));
		if (!f->path) {
			perror("realloc");
			exit(1);
		}
	}
	f->path[f->n++] = strdup(path);
}

static void collect_proc(struct files *f)
{
	static const char *const names[] = {"stat", "status", "cmdline"};
	struct dirent *de;
	char p[300];
	DIR *d = opendir("/proc");

	if (!d) {
		perror("/proc");
		exit(1);
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		f->nproc++;
		for (size_t i = 0; i < 3; i++) {
			snprintf(p, sizeof(p), "/proc/%s/%s", de->d_name,
				 names[i]);
			add_file(f, p);
		}
	}
	closedir(d);
}

/* Readable regular files under @dir that read without error, up to @max. */
static void collect_sysfs(struct files *f, const char *dir, int max, int depth,
			  size_t bufsize)
{
	struct dirent *de;
	char p[4096];
	DIR *d;

	if (depth > 8 || f->nsys >= max)
		return;
	d = opendir(dir);
	if (!d)
		return;
	while (f->nsys < max && (de = readdir(d))) {
		struct stat st;

		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		if (lstat(p, &st))
			continue;
		if (S_ISDIR(st.st_mode)) {
			collect_sysfs(f, p, max, depth + 1, bufsize);
		} else if (S_ISREG(st.st_mode) && (st.st_mode & S_IRUSR) &&
			   open_read_close(AT_FDCWD, p, rbuf, bufsize, 0) >=
				   0) {
			add_file(f, p);
			f->nsys++;
		}
	}
	closedir(d);
}

static void run_classic(const struct files *f, size_t bufsize, struct result *r)
{
	for (int i = 0; i < f->n; i++) {
		long n =
			open_read_close(AT_FDCWD, f->path[i], rbuf, bufsize, 0);

		r->syscalls += 3;
		if (n < 0)
			r->errors++;
		else
			r->bytes += n;
	}
	r->files += f->n;
}

static void run_readfile(const struct files *f, size_t bufsize,
			 struct result *r)
{
	for (int i = 0; i < f->n; i++) {
		long n = sys_readfile(AT_FDCWD, f->path[i], rbuf, bufsize, 0);

		r->syscalls++;
		if (n < 0)
			r->errors++;
		else
			r->bytes += n;
	}
	r->files += f->n;
}

/* ---- io_uring open -> read -> close chains on chosen fds ---- */

enum {
	OP_OPEN,
	OP_READ,
	OP_CLOSE
};

struct chain {
	struct open_how_v1 how;
	char *buf;
	int fd;	     /* the chain's own fd from the reserved range */
	int pending; /* CQEs still to come; the fd is reusable at 0 */
	bool failed;
};

struct uring_bench {
	struct io_uring ring;
	long err[3][134]; /* [op][errno] of failed CQEs, for the report */
	struct chain *chain;
	int *free_slot, nfree;
	int inflight;
};

/*
 * PR_INCREASE_MIN_FD hands out [old minimum, + n), and fds already open in
 * it (stdin, stdout, stderr, the ring) stay open: reserve some spare and
 * give the chains only the free numbers.
 */
static int reserve_fds(struct chain *chain, int inflight)
{
	int spare = 64, got = 0;
	int base = prctl(PR_INCREASE_MIN_FD, inflight + spare, 0, 0, 0);

	if (base < 0) {
		fprintf(stderr, "PR_INCREASE_MIN_FD: %s\n", strerror(errno));
		return -1;
	}
	for (int fd = base; fd < base + inflight + spare && got < inflight;
	     fd++)
		if (fcntl(fd, F_GETFD) < 0)
			chain[got++].fd = fd;
	return got == inflight ? 0 : -1;
}

static int uring_setup(struct uring_bench *u, int inflight, size_t bufsize)
{
	int ret = io_uring_queue_init(4 * inflight, &u->ring, 0);

	if (ret < 0) {
		fprintf(stderr, "io_uring_queue_init: %s\n", strerror(-ret));
		return -1;
	}
	u->inflight = inflight;
	u->chain = calloc(inflight, sizeof(*u->chain));
	u->free_slot = calloc(inflight, sizeof(*u->free_slot));
	if (!u->chain || !u->free_slot || reserve_fds(u->chain, inflight)) {
		io_uring_queue_exit(&u->ring);
		return -1;
	}
	for (int i = 0; i < inflight; i++) {
		u->chain[i].buf = malloc(bufsize);
		if (!u->chain[i].buf)
			return -1;
		u->free_slot[i] = inflight - 1 - i;
	}
	u->nfree = inflight;
	return 0;
}

static void queue_chain(struct uring_bench *u, int slot, const char *path,
			size_t bufsize)
{
	struct chain *c = &u->chain[slot];
	__u32 fd = c->fd;
	struct io_uring_sqe *sqe;

	c->how = (struct open_how_v1){
		.flags = O_RDONLY | O_CLOEXEC | O_SPECIFIC_FD, .fd = fd};
	c->pending = 3;
	c->failed = false;
	sqe = io_uring_get_sqe(&u->ring);
	io_uring_prep_openat2(sqe, AT_FDCWD, path, (struct open_how *)&c->how);
	sqe->len = sizeof(c->how); /* VER1: the fd field */
	sqe->flags |= IOSQE_IO_LINK;
	io_uring_sqe_set_data64(sqe, (__u64)slot << 2 | OP_OPEN);
	/*
	 * A short read (every /proc file is shorter than the buffer) counts
	 * as a failed link; a hard link still runs the close after it.
	 */
	sqe = io_uring_get_sqe(&u->ring);
	io_uring_prep_read(sqe, fd, c->buf, bufsize, 0);
	sqe->flags |= IOSQE_IO_HARDLINK;
	io_uring_sqe_set_data64(sqe, (__u64)slot << 2 | OP_READ);
	sqe = io_uring_get_sqe(&u->ring);
	io_uring_prep_close(sqe, fd);
	io_uring_sqe_set_data64(sqe, (__u64)slot << 2 | OP_CLOSE);
}

static void reap(struct uring_bench *u, struct result *r)
{
	struct io_uring_cqe *cqe;
	unsigned int head, seen = 0;

	io_uring_for_each_cqe(&u->ring, head, cqe)
	{
		int slot = (int)(cqe->user_data >> 2);
		int op = (int)(cqe->user_data & 3);
		struct chain *c = &u->chain[slot];

		seen++;
		if (op == OP_READ && cqe->res >= 0)
			r->bytes += cqe->res;
		/* a failed open cancels the read and the close: one error */
		else if (cqe->res < 0 && cqe->res != -ECANCELED) {
			c->failed = true;
			if (-cqe->res < 134)
				u->err[op][-cqe->res]++;
		}
		if (--c->pending == 0) {
			if (c->failed)
				r->errors++;
			u->free_slot[u->nfree++] = slot;
		}
	}
	io_uring_cq_advance(&u->ring, seen);
}

static void run_uring(struct uring_bench *u, const struct files *f,
		      size_t bufsize, struct result *r)
{
	int next = 0;

	while (next < f->n || u->nfree < u->inflight) {
		while (next < f->n && u->nfree > 0)
			queue_chain(u, u->free_slot[--u->nfree],
				    f->path[next++], bufsize);
		io_uring_submit_and_wait(&u->ring, 1);
		r->syscalls++;
		reap(u, r);
	}
	r->files += f->n;
}

static void uring_errors(const struct uring_bench *u)
{
	static const char *const op[] = {"openat2", "read", "close"};

	for (int i = 0; i < 3; i++)
		for (int e = 0; e < 134; e++)
			if (u->err[i][e])
				printf("io_uring %s failed with %s: %ld times\n",
				       op[i], strerror(e), u->err[i][e]);
}

/* ---- children, report, main ---- */

static pid_t *spawn_children(int n)
{
	pid_t *pids = calloc(n ? n : 1, sizeof(*pids));

	for (int i = 0; i < n; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			for (;;)
				pause();
		}
		if (pids[i] < 0) {
			perror("fork");
			exit(1);
		}
	}
	return pids;
}

static void reap_children(pid_t *pids, int n)
{
	for (int i = 0; i < n; i++)
		kill(pids[i], SIGKILL);
	for (int i = 0; i < n; i++)
		waitpid(pids[i], NULL, 0);
	free(pids);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/*
 * Median over rounds of this method's speed relative to open/read/close in
 * the same round: a burst of outside load hits one round of every method.
 */
static double median_ratio(const struct result *r, const struct result *base,
			   int rounds)
{
	double *v = calloc(rounds, sizeof(*v)), m;

	if (!v)
		return 0;
	for (int i = 0; i < rounds; i++)
		v[i] = base->round_secs[i] / r->round_secs[i];
	qsort(v, rounds, sizeof(*v), cmp_double);
	m = rounds % 2 ? v[rounds / 2] :
			 (v[rounds / 2 - 1] + v[rounds / 2]) / 2;
	free(v);
	return m;
}

static void report(const struct opts *o, const struct files *f,
		   const struct result *res)
{
	const struct result *base = &res[M_CLASSIC];
	double base_rate = base->files / base->secs;
	double base_sc = (double)base->syscalls / base->files;

	printf("readfile-bench: %d files per round = %d processes x 3 /proc files + %d sysfs attributes; %d forked sleepers; %d rounds; bufsize %d; %d io_uring chains in flight\n",
	       f->n, f->nproc, f->nsys, o->children, o->rounds, o->bufsize,
	       o->inflight);
	printf("| method | files/s | vs open/read/close | median of rounds | syscalls/file | vs open/read/close | CPU us/file | errors | bytes/round |\n");
	printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
	for (int m = 0; m < M_COUNT; m++) {
		const struct result *r = &res[m];
		double rate, sc;

		if (!r->available) {
			printf("| %s | n/a | | | | | | | |\n", r->name);
			continue;
		}
		rate = r->files / r->secs;
		sc = (double)r->syscalls / r->files;
		printf("| %s | %.0f | %.2fx | %.2fx | %.3f | %.3fx | %.2f | %ld | %ld |\n",
		       r->name, rate, rate / base_rate,
		       median_ratio(r, base, o->rounds), sc, sc / base_sc,
		       r->cpu / r->files * 1e6, r->errors,
		       r->bytes / o->rounds);
	}
}

static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{"children", required_argument, NULL, 'c'},
		{"rounds", required_argument, NULL, 'r'},
		{"inflight", required_argument, NULL, 'i'},
		{"sysfs", required_argument, NULL, 's'},
		{"bufsize", required_argument, NULL, 'b'},
		{NULL, 0, NULL, 0},
	};
	int c;

	*o = (struct opts){.children = 200,
			   .rounds = 20,
			   .inflight = 64,
			   .sysfs = 400,
			   .bufsize = 4096};
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		int v = optarg ? atoi(optarg) : 0;

		switch (c) {
		case 'c':
			o->children = v;
			break;
		case 'r':
			o->rounds = v;
			break;
		case 'i':
			o->inflight = v;
			break;
		case 's':
			o->sysfs = v;
			break;
		case 'b':
			o->bufsize = v;
			break;
		default:
			return -1;
		}
	}
	if (o->children < 0 || o->rounds < 1 || o->inflight < 1 ||
	    o->inflight > 1024 || o->sysfs < 0 || o->bufsize < 1)
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	struct result res[M_COUNT] = {
		{.name = "open/read/close", .available = true},
		{.name = "readfile()"},
		{.name = "io_uring chains"},
	};
	static struct uring_bench u;
	struct files f = {0};
	struct opts o;
	pid_t *kids;
	char c;

	if (parse(argc, argv, &o)) {
		fprintf(stderr,
			"usage: readfile-bench [--children N] [--rounds R] [--inflight K] [--sysfs M] [--bufsize B]\n");
		return 2;
	}
	rbuf = malloc(o.bufsize);
	if (!rbuf)
		return 1;
	kids = spawn_children(o.children);
	collect_proc(&f);
	collect_sysfs(&f, "/sys", o.sysfs, 0, o.bufsize);
	res[M_READFILE].available =
		sys_readfile(AT_FDCWD, "/dev/null", &c, 1, 0) == 0;
	res[M_URING].available = uring_setup(&u, o.inflight, o.bufsize) == 0;
	for (int m = 0; m < M_COUNT; m++) {
		res[m].round_secs = calloc(o.rounds, sizeof(double));
		if (!res[m].round_secs)
			return 1;
	}

	for (int round = -1; round < o.rounds; round++) {
		for (int k = 0; k < M_COUNT; k++) {
			/* round -1 warms the caches and is not counted */
			int m = (k + (round < 0 ? 0 : round)) % M_COUNT;
			struct result scratch = {0}, *r;
			double t0, c0;

			if (!res[m].available)
				continue;
			r = round < 0 ? &scratch : &res[m];
			t0 = now();
			c0 = cpu_now();
			if (m == M_CLASSIC)
				run_classic(&f, o.bufsize, r);
			else if (m == M_READFILE)
				run_readfile(&f, o.bufsize, r);
			else
				run_uring(&u, &f, o.bufsize, r);
			t0 = now() - t0;
			r->secs += t0;
			r->cpu += cpu_now() - c0;
			if (round >= 0)
				r->round_secs[round] = t0;
		}
	}
	report(&o, &f, res);
	if (res[M_URING].available)
		uring_errors(&u);
	reap_children(kids, o.children);
	/* a benchmark, not a test: failed reads are reported, not judged */
	return 0;
}
