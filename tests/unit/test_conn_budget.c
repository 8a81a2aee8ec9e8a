// SPDX-License-Identifier: MIT
/* Connection budget: max_connections within what the slots hold, and the
 * one line that says when it does not fit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "conn_budget.h"

static void test_fits(void **state)
{
	struct conn_budget b;
	char line[256];

	(void)state;
	/* 128 slots keep 16 for files: 100 connections fit. */
	conn_budget(128, 100, &b);
	assert_int_equal(b.cap, 100);
	assert_int_equal(b.file_reserve, 16);
	assert_false(b.capped);
	conn_budget_describe(&b, 128, 100, line, sizeof(line));
	assert_string_equal(line, "");
	/* Exactly slots - reserve. */
	conn_budget(128, 112, &b);
	assert_int_equal(b.cap, 112);
	assert_false(b.capped);
}

static void test_capped_says_so(void **state)
{
	struct conn_budget b;
	char line[256];

	(void)state;
	conn_budget(128, 113, &b);
	assert_int_equal(b.cap, 112);
	assert_true(b.capped);
	conn_budget(4096, 16384, &b);
	assert_int_equal(b.cap, 3584);
	assert_true(b.capped);
	conn_budget_describe(&b, 4096, 16384, line, sizeof(line));
	assert_non_null(strstr(line, "max_connections 16384"));
	assert_non_null(strstr(line, "slots 4096"));
	assert_non_null(strstr(line, "at most 3584 connections per worker"));
	assert_null(strchr(line, '\n'));
}

static void test_default_is_silent(void **state)
{
	struct conn_budget b;

	(void)state;
	/* Unset: the default, within what the slots hold, no complaint. */
	conn_budget(4096, 0, &b);
	assert_int_equal(b.cap, 3584);
	assert_false(b.capped);
	conn_budget(1048576, 0, &b);
	assert_int_equal(b.cap, CONN_BUDGET_DEFAULT_MAX);
	assert_false(b.capped);
}

static void test_no_slots(void **state)
{
	struct conn_budget b;

	(void)state;
	/* epoll: max_connections as set, nothing reserved. */
	conn_budget(0, 100, &b);
	assert_int_equal(b.cap, 100);
	assert_int_equal(b.file_reserve, 0);
	assert_false(b.capped);
	conn_budget(0, 0, &b);
	assert_int_equal(b.cap, CONN_BUDGET_DEFAULT_MAX);
}

static void test_smallest(void **state)
{
	struct conn_budget b;

	(void)state;
	/* The fewest slots config allows still leave one for files. */
	conn_budget(16, 1, &b);
	assert_int_equal(b.file_reserve, 2);
	assert_int_equal(b.cap, 1);
	conn_budget(7, 100, &b); /* a table clamped by RLIMIT_NOFILE */
	assert_int_equal(b.file_reserve, 1);
	assert_int_equal(b.cap, 6);
	assert_true(b.capped);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fits),
		cmocka_unit_test(test_capped_says_so),
		cmocka_unit_test(test_default_is_silent),
		cmocka_unit_test(test_no_slots),
		cmocka_unit_test(test_smallest),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
