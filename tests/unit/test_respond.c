// SPDX-License-Identifier: MIT
/* respond_plan() when the path changes between its lookup and the open
 * that checks it can be read (a HEAD, a conditional or a range request,
 * which send none of the file's bytes): the answer comes from what was
 * opened, and only a regular file is answered from. And the plan that
 * opens the file itself (RESPOND_KEEP_FD, no stat cache: epoll with
 * stat_cache 0) on real files: an open refused for what the path is (a
 * socket, a directory that may be searched but not read) is decided by
 * kind, as the O_PATH lookup decides it. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "file_meta.h"
#include "http_parse.h"
#include "http_render.h"
#include "respond.h"

static char dir[] = "/tmp/orcd-respond-XXXXXX";

/* The lookup (a stat cache's, or the O_PATH one) finds a regular file... */
static int found_file(void *ctx, struct orcd_config *cfg, const char *relpath,
		      struct file_meta *meta)
{
	(void)ctx;
	(void)cfg;
	(void)relpath;
	memset(meta, 0, sizeof(*meta));
	meta->mode = S_IFREG | 0644;
	meta->size = 5;
	meta->ino = 1;
	meta->mtime_sec = 1700000000;
	return 0;
}

/* ...and the open that follows finds *ctx's kind at that path. */
static int opened_as(void *ctx, struct orcd_config *cfg, const char *relpath,
		     struct file_meta *meta)
{
	(void)cfg;
	(void)relpath;
	memset(meta, 0, sizeof(*meta));
	meta->mode = *(mode_t *)ctx | 0644;
	meta->size = 4096;
	meta->ino = 2;
	meta->mtime_sec = 1700000001;
	return 0;
}

/* A finalized configuration serving dir. */
static struct orcd_config *dir_config(void)
{
	struct orcd_config *cfg = config_new();
	char err[256];

	assert_non_null(cfg);
	assert_int_equal(config_set(cfg, "root", dir, false, err, sizeof(err)),
			 0);
	assert_int_equal(config_finalize(cfg, err, sizeof(err)), 0);
	return cfg;
}

static int status_for(const char *head, mode_t opened)
{
	struct http_limits lim = {8192, 8192, 100};
	struct respond_lookup lk = {found_file, &opened, opened_as};
	struct http_clock clock = {.now = time(NULL)};
	struct response_plan plan;
	struct http_request req;
	struct orcd_config *cfg = dir_config();
	char buf[8192];
	int st;

	assert_int_equal(http_parse_request(head, strlen(head), &lim, &req, &st),
			 HTTP_PARSE_OK);
	assert_int_equal(respond_plan(cfg, &lk, &req, &clock, 0, buf,
				      sizeof(buf), &plan),
			 0);
	config_free(cfg);
	return plan.status;
}

static const char *const heads[] = {
	"HEAD /f.txt HTTP/1.1\r\nHost: t\r\n\r\n",
	"GET /f.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=0-1\r\n\r\n",
	"GET /f.txt HTTP/1.1\r\nHost: t\r\nIf-None-Match: \"x\"\r\n\r\n",
};

static void test_a_regular_file_is_answered(void **state)
{
	(void)state;
	assert_int_equal(status_for(heads[0], S_IFREG), 200);
	assert_int_equal(status_for(heads[1], S_IFREG), 206);
	assert_int_equal(status_for(heads[2], S_IFREG), 200);
}

static void test_a_path_replaced_by_another_kind_is_404(void **state)
{
	static const mode_t kinds[] = {S_IFDIR, S_IFIFO, S_IFCHR, S_IFSOCK};

	(void)state;
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
		for (size_t h = 0; h < sizeof(heads) / sizeof(heads[0]); h++)
			assert_int_equal(status_for(heads[h], kinds[k]), 404);
}

/* respond_plan() on the files under dir, with no stat cache: flags
 * RESPOND_KEEP_FD opens the file (epoll), 0 looks it up with O_PATH
 * (io_uring). As uid (-1: ours), for the lookups only. */
static int plan_real(const char *head, unsigned flags, uid_t uid,
		     struct response_plan *plan)
{
	struct http_limits lim = {8192, 8192, 100};
	struct http_clock clock = {.now = time(NULL)};
	struct http_request req;
	struct orcd_config *cfg = dir_config();
	char buf[8192];
	int st, rc;

	assert_int_equal(http_parse_request(head, strlen(head), &lim, &req,
					    &st),
			 HTTP_PARSE_OK);
	if (uid != (uid_t)-1)
		assert_int_equal(seteuid(uid), 0);
	rc = respond_plan(cfg, NULL, &req, &clock, flags, buf, sizeof(buf),
			  plan);
	if (uid != (uid_t)-1)
		assert_int_equal(seteuid(0), 0);
	assert_int_equal(rc, 0);
	config_free(cfg);
	return plan->status;
}

static void path_in_dir(char *out, size_t cap, const char *name)
{
	snprintf(out, cap, "%s/%s", dir, name);
}

#define REQ(method, target) method " " target " HTTP/1.1\r\nHost: t\r\n\r\n"

static const unsigned both_ways[] = {RESPOND_KEEP_FD, 0};

static void test_a_socket_file_is_404(void **state)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct response_plan plan;
	int s = socket(AF_UNIX, SOCK_STREAM, 0);

	(void)state;
	assert_true(s >= 0);
	path_in_dir(sa.sun_path, sizeof(sa.sun_path), "sock");
	assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	/* The open for reading fails with ENXIO: it was a 500. */
	for (size_t f = 0; f < 2; f++) {
		assert_int_equal(plan_real(REQ("GET", "/sock"), both_ways[f],
					   (uid_t)-1, &plan),
				 404);
		assert_int_equal(plan.fd, -1);
		assert_int_equal(plan_real(REQ("HEAD", "/sock"), both_ways[f],
					   (uid_t)-1, &plan),
				 404);
		assert_int_equal(plan_real(REQ("GET", "/sock/"), both_ways[f],
					   (uid_t)-1, &plan),
				 404);
	}
	close(s);
	assert_int_equal(unlink(sa.sun_path), 0);
}

static void test_a_fifo_is_404(void **state)
{
	struct response_plan plan;
	char p[PATH_MAX];

	(void)state;
	path_in_dir(p, sizeof(p), "pipe");
	assert_int_equal(mkfifo(p, 0644), 0);
	for (size_t f = 0; f < 2; f++) {
		assert_int_equal(plan_real(REQ("GET", "/pipe"), both_ways[f],
					   (uid_t)-1, &plan),
				 404);
		assert_int_equal(plan.fd, -1);
	}
	assert_int_equal(unlink(p), 0);
}

static void write_file(const char *name, const char *data, mode_t mode)
{
	char p[PATH_MAX];
	FILE *f;

	path_in_dir(p, sizeof(p), name);
	f = fopen(p, "w");
	assert_non_null(f);
	assert_int_equal(fputs(data, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(p, mode), 0);
}

/* A directory an unprivileged server may search but not read (0711, or
 * 0111 for its owner) is still a directory: redirected without its slash,
 * its readable index served with it. The open for reading fails with
 * EACCES: it was a 403. A regular file it may not read stays 403. As
 * root, which reads anything, the lookups run as nobody (65534). */
static void test_a_search_only_directory_serves_its_index(void **state)
{
	uid_t as = (uid_t)-1;
	struct response_plan plan;
	char p[PATH_MAX];

	(void)state;
	if (geteuid() == 0) {
		if (seteuid(65534) < 0)
			skip(); /* no CAP_SETUID: root reads it all */
		assert_int_equal(seteuid(0), 0);
		as = 65534;
	}
	path_in_dir(p, sizeof(p), "priv");
	assert_int_equal(mkdir(p, 0755), 0);
	write_file("priv/index.html", "<p>hi</p>\n", 0644);
	write_file("secret.txt", "secret\n", 0);
	assert_int_equal(chmod(p, 0111), 0);
	assert_int_equal(chmod(dir, 0711), 0);
	for (size_t f = 0; f < 2; f++) {
		assert_int_equal(plan_real(REQ("GET", "/priv"), both_ways[f],
					   as, &plan),
				 301);
		assert_int_equal(plan.fd, -1);
		assert_int_equal(plan_real(REQ("GET", "/priv/"), both_ways[f],
					   as, &plan),
				 200);
		assert_int_equal(plan.length, 10);
		assert_true(plan.send_file);
		assert_int_equal(plan.fd >= 0, both_ways[f] == RESPOND_KEEP_FD);
		if (plan.fd >= 0)
			close(plan.fd);
		assert_int_equal(plan_real(REQ("HEAD", "/priv/"), both_ways[f],
					   as, &plan),
				 200);
		assert_int_equal(plan.fd, -1);
		/* Without RESPOND_KEEP_FD a GET's refusal is the engine's open
		 * to find; a HEAD opens here. */
		assert_int_equal(plan_real(REQ("HEAD", "/secret.txt"),
					   both_ways[f], as, &plan),
				 403);
		assert_int_equal(plan.fd, -1);
	}
	assert_int_equal(plan_real(REQ("GET", "/secret.txt"), RESPOND_KEEP_FD,
				   as, &plan),
			 403);
	assert_int_equal(plan.fd, -1);
	assert_int_equal(chmod(dir, 0700), 0);
	assert_int_equal(chmod(p, 0755), 0);
	path_in_dir(p, sizeof(p), "secret.txt");
	assert_int_equal(unlink(p), 0);
	path_in_dir(p, sizeof(p), "priv/index.html");
	assert_int_equal(unlink(p), 0);
	path_in_dir(p, sizeof(p), "priv");
	assert_int_equal(rmdir(p), 0);
}

/* A directory's redirect repeats the target in its Location, three
 * bytes for each one escaped: longer than any fixed buffer respond.c
 * keeps, it is still a 301 where the response buffer holds its head,
 * and a 414 (never a 500) where it does not. */
static void test_a_long_redirect_fits_the_response_buffer(void **state)
{
	static char head[16384], buf[32768];
	struct http_limits lim = {16384, 16384, 100};
	struct http_clock clock = {.now = time(NULL)};
	struct orcd_config *cfg = dir_config();
	struct response_plan plan;
	struct http_request req;
	char p[PATH_MAX], *loc;
	size_t n;
	int st;

	(void)state;
	path_in_dir(p, sizeof(p), "long");
	assert_int_equal(mkdir(p, 0755), 0);
	n = (size_t)snprintf(head, sizeof(head), "GET /long?");
	memset(head + n, '<', 7000); /* each one %3C */
	n += 7000;
	snprintf(head + n, sizeof(head) - n, " HTTP/1.1\r\nHost: t\r\n\r\n");
	assert_int_equal(http_parse_request(head, strlen(head), &lim, &req,
					    &st),
			 HTTP_PARSE_OK);
	assert_int_equal(respond_plan(cfg, NULL, &req, &clock, 0, buf,
				      sizeof(buf), &plan),
			 0);
	assert_int_equal(plan.status, 301);
	buf[plan.head_len] = '\0';
	loc = strstr(buf, "\r\nLocation: /long/?%3C%3C");
	assert_non_null(loc);
	loc += strlen("\r\nLocation: ");
	assert_int_equal(strcspn(loc, "\r"), strlen("/long/?") + 3 * 7000);
	assert_int_equal(respond_plan(cfg, NULL, &req, &clock, 0, buf, 8192,
				      &plan),
			 0);
	assert_int_equal(plan.status, 414);
	config_free(cfg);
	assert_int_equal(rmdir(p), 0);
}

static int setup(void **state)
{
	(void)state;
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	static const char *const left[] = {"sock", "pipe", "secret.txt",
					   "priv/index.html"};
	char p[PATH_MAX];

	(void)state;
	/* What a failed case left behind. */
	chmod(dir, 0700);
	path_in_dir(p, sizeof(p), "priv");
	chmod(p, 0755);
	for (size_t i = 0; i < sizeof(left) / sizeof(left[0]); i++) {
		path_in_dir(p, sizeof(p), left[i]);
		unlink(p);
	}
	path_in_dir(p, sizeof(p), "priv");
	rmdir(p);
	path_in_dir(p, sizeof(p), "long");
	rmdir(p);
	return rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_regular_file_is_answered),
		cmocka_unit_test(test_a_path_replaced_by_another_kind_is_404),
		cmocka_unit_test(test_a_socket_file_is_404),
		cmocka_unit_test(test_a_fifo_is_404),
		cmocka_unit_test(test_a_search_only_directory_serves_its_index),
		cmocka_unit_test(test_a_long_redirect_fits_the_response_buffer),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
