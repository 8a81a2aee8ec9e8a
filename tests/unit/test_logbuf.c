// SPDX-License-Identifier: MIT
/* A worker's access log buffer: lines go out in batches of whole lines,
 * a batch never exceeds the buffer, a line that would not fit sends the
 * batch first, a full or LOGBUF_AGE_MS old batch goes out, a flush and
 * the end hand out everything, and without memory lines go one by one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "logbuf.h"

/* What the writer got: every batch, in order. */
struct sink {
	char bytes[4096];
	size_t len;
	size_t batch[64]; /* sizes */
	unsigned n;
};

static void sink_out(void *ctx, const char *p, size_t n)
{
	struct sink *s = ctx;

	assert_true(n > 0);
	assert_true(s->len + n <= sizeof(s->bytes));
	assert_int_equal(p[n - 1], '\n'); /* whole lines only */
	memcpy(s->bytes + s->len, p, n);
	s->len += n;
	s->batch[s->n++] = n;
}

static void add(struct logbuf *b, const char *line, int64_t now)
{
	logbuf_add(b, line, strlen(line), now);
}

static void test_batches_whole_lines(void **state)
{
	struct sink s = {0};
	struct logbuf b;

	(void)state;
	assert_int_equal(logbuf_init(&b, 16, sink_out, &s), 0);
	add(&b, "aaaa\n", 0);	/* 5 */
	add(&b, "bbbbbb\n", 1); /* 12 */
	assert_int_equal(s.n, 0);
	add(&b, "cccccc\n", 2); /* 19 > 16: the first two go, c waits */
	assert_int_equal(s.n, 1);
	assert_int_equal(s.batch[0], 12);
	add(&b, "ddddddddd\n", 3); /* 7 + 10 = 17 > 16 */
	assert_int_equal(s.n, 2);
	assert_int_equal(s.batch[1], 7);
	logbuf_fini(&b);
	assert_int_equal(s.n, 3);
	assert_int_equal(s.batch[2], 10);
	assert_int_equal(s.len, 5 + 7 + 7 + 10);
	assert_memory_equal(s.bytes, "aaaa\nbbbbbb\ncccccc\nddddddddd\n",
			    s.len);
}

static void test_full_goes_at_once(void **state)
{
	struct sink s = {0};
	struct logbuf b;

	(void)state;
	assert_int_equal(logbuf_init(&b, 10, sink_out, &s), 0);
	add(&b, "1234\n", 0);
	add(&b, "5678\n", 0); /* exactly full */
	assert_int_equal(s.n, 1);
	assert_int_equal(s.batch[0], 10);
	assert_int_equal(b.len, 0);
	logbuf_fini(&b);
	assert_int_equal(s.n, 1); /* nothing left: no empty batch */
}

static void test_line_larger_than_buffer(void **state)
{
	struct sink s = {0};
	struct logbuf b;

	(void)state;
	assert_int_equal(logbuf_init(&b, 8, sink_out, &s), 0);
	add(&b, "ab\n", 0);
	add(&b, "0123456789abcdef\n", 0); /* the batch, then the line alone */
	assert_int_equal(s.n, 2);
	assert_int_equal(s.batch[0], 3);
	assert_int_equal(s.batch[1], 17);
	assert_int_equal(b.len, 0);
	logbuf_fini(&b);
}

static void test_age(void **state)
{
	struct sink s = {0};
	struct logbuf b;

	(void)state;
	assert_int_equal(logbuf_init(&b, 4096, sink_out, &s), 0);
	logbuf_tick(&b, 100000); /* empty: nothing to hand out */
	assert_int_equal(s.n, 0);
	add(&b, "first\n", 1000);
	add(&b, "second\n", 1000 + LOGBUF_AGE_MS - 1);
	logbuf_tick(&b, 1000 + LOGBUF_AGE_MS - 1);
	assert_int_equal(s.n, 0);
	logbuf_tick(&b, 1000 + LOGBUF_AGE_MS); /* the first line's age */
	assert_int_equal(s.n, 1);
	assert_int_equal(s.batch[0], 13);
	/* The age counts from the first line of the next batch. */
	add(&b, "third\n", 5000);
	logbuf_tick(&b, 5000 + LOGBUF_AGE_MS - 1);
	assert_int_equal(s.n, 1);
	/* A line that finds the batch old sends it, itself included. */
	add(&b, "fourth\n", 5000 + LOGBUF_AGE_MS);
	assert_int_equal(s.n, 2);
	assert_int_equal(s.batch[1], 13);
	logbuf_fini(&b);
	assert_int_equal(s.n, 2);
}

static void test_flush(void **state)
{
	struct sink s = {0};
	struct logbuf b;

	(void)state;
	assert_int_equal(logbuf_init(&b, 4096, sink_out, &s), 0);
	logbuf_flush(&b);
	assert_int_equal(s.n, 0);
	add(&b, "x\n", 0);
	add(&b, "y\n", 0);
	logbuf_flush(&b);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.batch[0], 4);
	logbuf_flush(&b);
	assert_int_equal(s.n, 1);
	logbuf_fini(&b);
	assert_int_equal(s.n, 1);
}

/* Without memory for the buffer (cap 0), every line goes alone. */
static void test_unbuffered(void **state)
{
	struct sink s = {0};
	struct logbuf b = {0};

	(void)state;
	b.out = sink_out;
	b.ctx = &s;
	add(&b, "one\n", 0);
	add(&b, "two\n", 0);
	assert_int_equal(s.n, 2);
	logbuf_tick(&b, 100000);
	logbuf_fini(&b);
	assert_int_equal(s.n, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_batches_whole_lines),
		cmocka_unit_test(test_full_goes_at_once),
		cmocka_unit_test(test_line_larger_than_buffer),
		cmocka_unit_test(test_age),
		cmocka_unit_test(test_flush),
		cmocka_unit_test(test_unbuffered),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
