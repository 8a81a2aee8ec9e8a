// SPDX-License-Identifier: MIT
#include "log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "mono.h"

#include "http_cond.h"

void log_msg(int prio, const char *fmt, ...)
{
	char line[4096];
	int n = snprintf(line, sizeof(line), "<%d>orcd: ", prio & LOG_PRIMASK);
	va_list ap;

	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	/* One write so lines from several threads never interleave. */
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}

struct access_log {
	int fd;
	char *path;   /* NULL for stdout */
	size_t batch; /* longest write that stays in one piece */
	/* One batch writes at a time, so that none lands between a
	 * write that stopped inside a line and the newline that ends it
	 * (the workers' batches go about once a second each). */
	pthread_mutex_t lock;
	/* Under lock: */
	bool torn;	   /* the log ends inside a line */
	uint64_t lost;	   /* lines no write took */
	int64_t report_ms; /* when a failure may be reported */
	uint64_t reported; /* lost as of the last report */
};

/* At most one report of lost lines per this long (nginx: a minute). */
#define LOST_REPORT_MS (60 * 1000)

/* 64 KiB batches to a regular file (O_APPEND: one write lands whole);
 * to a pipe only PIPE_BUF bytes are written in one piece. */
#define BATCH_FILE (64u * 1024u)

static void say_lost(struct access_log *l, const char *when);

/* O_NONBLOCK: a FIFO with no reader is -ENXIO at once, where a blocking
 * open would hold the main thread (and its signals) until one came.
 * Writes block as before. */
static int open_log_file(const char *path)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC |
				    O_NONBLOCK,
		      0640);
	int fl;

	if (fd < 0)
		return -errno;
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

const char *access_log_strerror(int err)
{
	return err == -ENXIO ? "a FIFO no process reads" : strerror(-err);
}

int access_log_open(const char *spec, struct access_log **out)
{
	struct access_log *l = calloc(1, sizeof(*l));
	struct stat st;

	if (!l)
		return -ENOMEM;
	pthread_mutex_init(&l->lock, NULL);
	if (!strcmp(spec, "-") || !strcmp(spec, "stdout")) {
		l->fd = STDOUT_FILENO;
	} else {
		l->path = strdup(spec);
		l->fd = l->path ? open_log_file(spec) : -ENOMEM;
		if (l->fd < 0) {
			int err = l->fd;

			pthread_mutex_destroy(&l->lock);
			free(l->path);
			free(l);
			return err;
		}
	}
	l->batch = fstat(l->fd, &st) == 0 && S_ISREG(st.st_mode) ? BATCH_FILE :
								   PIPE_BUF;
	*out = l;
	return 0;
}

int access_log_reopen(struct access_log *l)
{
	int fd;

	if (!l->path)
		return 0;
	fd = open_log_file(l->path);
	if (fd < 0)
		return fd;
	/* dup3 swaps the file under the same number atomically: writers in
	 * other threads never see a closed or half-reopened descriptor.
	 * (dup2 would leave the number without FD_CLOEXEC.) */
	pthread_mutex_lock(&l->lock);
	if (dup3(fd, l->fd, O_CLOEXEC) < 0) {
		int err = -errno;

		pthread_mutex_unlock(&l->lock);
		close(fd);
		return err;
	}
	/* A torn end was the old file's: the new one starts clean. */
	l->torn = false;
	pthread_mutex_unlock(&l->lock);
	close(fd);
	return 0;
}

void access_log_close(struct access_log *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&l->lock);
	say_lost(l, "not said before");
	pthread_mutex_unlock(&l->lock);
	if (l->path)
		close(l->fd);
	pthread_mutex_destroy(&l->lock);
	free(l->path);
	free(l);
}

static uint64_t count_lines(const char *p, size_t n)
{
	uint64_t k = 0;

	for (const char *e = p + n; (p = memchr(p, '\n', (size_t)(e - p))); p++)
		k++;
	return k;
}

/* A write failed: the first failure is said at once, later ones at most
 * once per LOST_REPORT_MS, each with the lines lost since. Under l->lock. */
static void lost_lines(struct access_log *l, uint64_t n, int err)
{
	int64_t now = mono_ms();

	l->lost += n;
	if (now < l->report_ms)
		return;
	l->report_ms = now + LOST_REPORT_MS;
	log_msg(LOG_ERR,
		"access log %s: write failed: %s; %llu lines lost (%llu in all)",
		l->path ? l->path : "(stdout)", strerror(err),
		(unsigned long long)(l->lost - l->reported),
		(unsigned long long)l->lost);
	l->reported = l->lost;
}

/* Lines lost after the last report, which the rate limit held back: said
 * once a write lands again (no sooner than the limit allows) and at
 * close, so that the count in all is never short. Under l->lock. */
static void say_lost(struct access_log *l, const char *when)
{
	if (l->lost == l->reported)
		return;
	log_msg(LOG_ERR, "access log %s: %llu more lines lost, %s (%llu in all)",
		l->path ? l->path : "(stdout)",
		(unsigned long long)(l->lost - l->reported), when,
		(unsigned long long)l->lost);
	l->reported = l->lost;
}

/* One batch: whole lines, one write(2) unless the disk is short. When a
 * write stops inside a line (ENOSPC, EFBIG), the rest of the batch is
 * lost and the log ends in a torn line: the next write that lands begins
 * with a newline, so that no line is ever glued to the torn one. Under
 * l->lock. */
static void write_locked(struct access_log *l, const char *p, size_t n)
{
	/* The log ends inside a line of an earlier batch: */
	bool gap = l->torn;
	bool mid = false; /* or inside one of this batch */

	while (n) {
		struct iovec v[2] = {{(void *)"\n", 1}, {(void *)p, n}};
		ssize_t w = gap ? writev(l->fd, v, 2) : write(l->fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			lost_lines(l, count_lines(p, n),
				   w < 0 ? errno : ENOSPC);
			l->torn = gap || mid;
			return;
		}
		if (gap) { /* the newline went first */
			gap = false;
			w--;
		}
		if (w) {
			mid = p[w - 1] != '\n';
			p += w;
			n -= (size_t)w;
		}
	}
	l->torn = false;
	if (l->lost != l->reported && mono_ms() >= l->report_ms)
		say_lost(l, "writes land again");
}

/* The workers' batches, one at a time. */
static void write_batch(void *ctx, const char *p, size_t n)
{
	struct access_log *l = ctx;

	pthread_mutex_lock(&l->lock);
	write_locked(l, p, n);
	pthread_mutex_unlock(&l->lock);
}

void access_log_buf_init(struct access_log_buf *b, struct access_log *l)
{
	b->l = l;
	if (l && logbuf_init(&b->b, l->batch, write_batch, l))
		log_msg(LOG_WARNING,
			"no memory for an access log buffer: lines go one by one");
}

void access_log_buf_fini(struct access_log_buf *b)
{
	if (b->l)
		logbuf_fini(&b->b);
}

void access_log_flush(struct access_log_buf *b)
{
	if (b->l)
		logbuf_flush(&b->b);
}

void access_log_tick(struct access_log_buf *b, int64_t now_ms)
{
	if (b->l)
		logbuf_tick(&b->b, now_ms);
}

/* Copy a client-supplied string for the log, escaping '"', '\\' and
 * non-printable bytes as \xHH so a request cannot forge log lines. One
 * that does not fit in cap ends in "\..." (escaping never writes a
 * backslash but before 'x'), so a cut field is not taken for all of it. */
static size_t put_escaped(char *out, size_t cap, const char *s, size_t n)
{
	static const char cut[] = "\\...";
	size_t o = 0, i;

	/* Room for one more escape and its NUL, then for the marker. */
	for (i = 0; i < n && o + 5 + sizeof(cut) - 1 < cap; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\')
			o += (size_t)snprintf(out + o, cap - o, "\\x%02X", c);
		else
			out[o++] = (char)c;
	}
	if (i < n) {
		memcpy(out + o, cut, sizeof(cut) - 1);
		o += sizeof(cut) - 1;
	}
	return o;
}

static size_t put_str_or_dash(char *out, size_t cap, struct http_str s)
{
	if (!s.n) {
		out[0] = '-';
		return 1;
	}
	return put_escaped(out, cap, s.p, s.n);
}

static void format_peer(const struct sockaddr *peer, char *out, size_t cap)
{
	const void *a = NULL;

	if (peer && peer->sa_family == AF_INET)
		a = &((const struct sockaddr_in *)peer)->sin_addr;
	else if (peer && peer->sa_family == AF_INET6)
		a = &((const struct sockaddr_in6 *)peer)->sin6_addr;
	if (!a || !inet_ntop(peer->sa_family, a, out, (socklen_t)cap))
		snprintf(out, cap, "-");
}

void access_log_write(struct access_log_buf *b, const struct sockaddr *peer,
		      const struct http_request *req, int status,
		      uint64_t bytes, time_t now)
{
	static const char *const mon[] = {"Jan", "Feb", "Mar", "Apr",
					  "May", "Jun", "Jul", "Aug",
					  "Sep", "Oct", "Nov", "Dec"};
	char line[4096], addr[INET6_ADDRSTRLEN];
	struct tm tm;
	size_t n, cap = sizeof(line) - 1;

	if (!b->l)
		return;
	format_peer(peer, addr, sizeof(addr));
	gmtime_r(&now, &tm);
	n = (size_t)snprintf(line, cap,
			     "%s - - [%02d/%s/%04d:%02d:%02d:%02d +0000] \"",
			     addr, tm.tm_mday, mon[tm.tm_mon],
			     tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
			     tm.tm_sec);
	if (req) {
		/* The request line as received, like nginx's $request, so a
		 * malformed one is logged as the client sent it. Leave room
		 * for status, referer and agent. */
		n += put_escaped(line + n, cap - n - 1200, req->request_line.p,
				 req->request_line.n);
	} else {
		line[n++] = '-';
	}
	n += (size_t)snprintf(line + n, cap - n, "\" %d %llu \"", status,
			      (unsigned long long)bytes);
	if (req)
		n += put_str_or_dash(line + n, 512, req->referer);
	else
		line[n++] = '-';
	line[n++] = '"';
	line[n++] = ' ';
	line[n++] = '"';
	if (req)
		n += put_str_or_dash(line + n, cap - n - 8, req->user_agent);
	else
		line[n++] = '-';
	line[n++] = '"';
	line[n++] = '\n';
	logbuf_add(&b->b, line, n, mono_ms());
}
