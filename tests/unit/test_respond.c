// SPDX-License-Identifier: MIT
/* respond_plan() when the path changes between its lookup and the open
 * that checks it can be read (a HEAD, a conditional or a range request,
 * which send none of the file's bytes): the answer comes from what was
 * opened, and only a regular file is answered from. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

static int status_for(const char *head, mode_t opened)
{
	struct http_limits lim = {8192, 8192, 100};
	struct respond_lookup lk = {found_file, &opened, opened_as};
	struct http_clock clock = {.now = time(NULL)};
	struct response_plan plan;
	struct http_request req;
	struct orcd_config *cfg = config_new();
	char err[256], buf[8192];
	int st;

	assert_non_null(cfg);
	assert_int_equal(config_set(cfg, "root", dir, false, err, sizeof(err)),
			 0);
	assert_int_equal(config_finalize(cfg, err, sizeof(err)), 0);
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

static int setup(void **state)
{
	(void)state;
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	return rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_regular_file_is_answered),
		cmocka_unit_test(test_a_path_replaced_by_another_kind_is_404),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
