// SPDX-License-Identifier: GPL-2.0
#include "tap.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define REASON_MAX 256

/* Shared with the forked test, so a skip reason crosses without an fd. */
static char *skip_reason;

void tap_diag(const char *fmt, ...)
{
	va_list ap;

	fputs("# ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
}

int tap_skip(const char *fmt, ...)
{
	va_list ap;

	if (skip_reason) {
		va_start(ap, fmt);
		vsnprintf(skip_reason, REASON_MAX, fmt, ap);
		va_end(ap);
	}
	return TAP_SKIP;
}

static unsigned int test_timeout(void)
{
	const char *s = getenv("SELFTEST_TIMEOUT");
	unsigned int t = s ? (unsigned int)strtoul(s, NULL, 10) : 0;

	return t ? t : 120;
}

static int run_one(const struct tap_test *t)
{
	int status;
	pid_t pid;

	skip_reason[0] = '\0';
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		tap_diag("fork: %s", strerror(errno));
		return TAP_FAIL;
	}
	if (pid == 0) {
		alarm(test_timeout());
		int rc = t->fn();

		fflush(stdout);
		_exit(rc);
	}
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			tap_diag("waitpid: %s", strerror(errno));
			return TAP_FAIL;
		}
	}
	if (WIFSIGNALED(status)) {
		int sig = WTERMSIG(status);

		tap_diag("test killed by signal %d (%s)%s", sig, strsignal(sig),
			 sig == SIGALRM ? ": timed out" : "");
		return TAP_FAIL;
	}
	switch (WEXITSTATUS(status)) {
	case TAP_PASS:
		return TAP_PASS;
	case TAP_SKIP:
		return TAP_SKIP;
	default:
		return TAP_FAIL;
	}
}

void tap_plan(size_t ntests)
{
	printf("TAP version 13\n1..%zu\n", ntests);
	fflush(stdout);
}

int tap_run(const struct tap_test *tests, size_t ntests, unsigned int have,
	    const struct tap_feature *features, size_t nfeatures)
{
	size_t i, j, pass = 0, fail = 0, skip = 0;

	skip_reason = mmap(NULL, REASON_MAX, PROT_READ | PROT_WRITE,
			   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (skip_reason == MAP_FAILED) {
		perror("mmap");
		return TAP_FAIL;
	}
	for (i = 0; i < ntests; i++) {
		const struct tap_test *t = &tests[i];
		const char *missing = NULL;
		int rc;

		for (j = 0; j < nfeatures && !missing; j++)
			if ((t->needs & features[j].bit) &&
			    !(have & features[j].bit))
				missing = features[j].missing;
		if (missing) {
			printf("ok %zu - %s # SKIP %s\n", i + 1, t->name,
			       missing);
			skip++;
			continue;
		}
		rc = run_one(t);
		if (rc == TAP_PASS) {
			printf("ok %zu - %s\n", i + 1, t->name);
			pass++;
		} else if (rc == TAP_SKIP) {
			printf("ok %zu - %s # SKIP %s\n", i + 1, t->name,
			       skip_reason[0] ? skip_reason : "not supported");
			skip++;
		} else {
			printf("not ok %zu - %s\n", i + 1, t->name);
			fail++;
		}
		fflush(stdout);
	}
	printf("# Totals: pass:%zu fail:%zu xfail:0 xpass:0 skip:%zu error:0\n",
	       pass, fail, skip);
	fflush(stdout);
	if (fail)
		return TAP_FAIL;
	return pass ? TAP_PASS : TAP_SKIP;
}
