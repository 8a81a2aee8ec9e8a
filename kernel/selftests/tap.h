/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A tiny kselftest-style TAP runner.  Every test runs in its own forked
 * child, so a test that raises the fd minimum, leaks an fd or crashes
 * cannot disturb the next one, and a hang is cut off by an alarm.
 *
 * A test returns TAP_PASS, TAP_FAIL or tap_skip("why").  Exit status of
 * the program: 0 all passed (some may have skipped), 1 any failure,
 * 4 (KSFT_SKIP) everything skipped.
 */
#ifndef TAP_H
#define TAP_H

#include <stddef.h>

enum { TAP_PASS = 0, TAP_FAIL = 1, TAP_SKIP = 4 };

struct tap_test {
	const char *name;
	int (*fn)(void);
	unsigned int needs;	/* feature bits that must all be present */
};

struct tap_feature {
	unsigned int bit;
	const char *missing;	/* SKIP reason when the feature is absent */
};

/* Print the TAP header and plan; call first, before any diagnostic. */
void tap_plan(size_t ntests);

/* Run @tests, print TAP; returns the exit status described above. */
int tap_run(const struct tap_test *tests, size_t ntests, unsigned int have,
	    const struct tap_feature *features, size_t nfeatures);

/* Diagnostic line ("# ...") on stdout, flushed. */
void tap_diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* From inside a test: record why it skips; returns TAP_SKIP. */
int tap_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define CHECK(cond, ...)						\
	do {								\
		if (!(cond)) {						\
			tap_diag("%s:%d: check failed: %s", __FILE__,	\
				 __LINE__, #cond);			\
			tap_diag(__VA_ARGS__);				\
			return TAP_FAIL;				\
		}							\
	} while (0)

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif /* TAP_H */
