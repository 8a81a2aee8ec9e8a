// SPDX-License-Identifier: GPL-2.0
#include "probe.h"

#include "fdcheck.h"
#include "readfile_abi.h"
#include "specific_fd_abi.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static bool probe_min_fd(void)
{
	int r = prctl(PR_INCREASE_MIN_FD, 0, 0, 0, 0);

	if (r >= 0)
		return true;
	if (errno != EINVAL)
		tap_diag("probe: prctl(PR_INCREASE_MIN_FD) unexpected errno %d (%s)",
			 errno, strerror(errno));
	return false;
}

static bool probe_openat2_fd(void)
{
	int want = fd_lowest_free(64);
	int fd = open_at_fd("/dev/null", O_RDONLY, want);

	if (fd >= 0) {
		close(fd);
		/* A wrong fd is still "present"; the tests will say why. */
		return true;
	}
	if (errno != EINVAL && errno != E2BIG)
		tap_diag("probe: openat2(O_SPECIFIC_FD) unexpected errno %d (%s)",
			 errno, strerror(errno));
	return false;
}

static bool probe_pipe2_fd(void)
{
	int fds[2] = { fd_lowest_free(64), 0 };

	fds[1] = fd_lowest_free(fds[0] + 1);
	if (pipe2(fds, O_SPECIFIC_FD) == 0) {
		close(fds[0]);
		close(fds[1]);
		return true;
	}
	if (errno != EINVAL)
		tap_diag("probe: pipe2(O_SPECIFIC_FD) unexpected errno %d (%s)",
			 errno, strerror(errno));
	return false;
}

/*
 * Stock 6.1 says ENOSYS.  Kernels from 6.5 on have cachestat() at 451, which
 * would see these arguments as flags == 1 and say EINVAL; only readfile()
 * reads /dev/null and returns 0.
 */
static bool probe_readfile(void)
{
	char c;
	long r = sys_readfile(AT_FDCWD, "/dev/null", &c, 1, 0);

	if (r == 0)
		return true;
	if (r > 0 || errno != ENOSYS)
		tap_diag("probe: syscall %d is not readfile here (returned %ld, %s)",
			 SYS_readfile_nr, r, r < 0 ? strerror(errno) : "bytes");
	return false;
}

unsigned int probe_features(void)
{
	unsigned int have = 0;
	int status;
	pid_t pid;

	/* Lets a stock kernel show that every feature test can fail. */
	if (getenv("SELFTEST_ASSUME_FEATURES")) {
		tap_diag("SELFTEST_ASSUME_FEATURES set: running every test");
		return ~0u;
	}

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return 0;
	if (pid == 0) {
		have |= probe_min_fd() ? HAVE_MIN_FD : 0;
		have |= probe_openat2_fd() ? HAVE_OPENAT2_FD : 0;
		have |= probe_pipe2_fd() ? HAVE_PIPE2_FD : 0;
		have |= probe_readfile() ? HAVE_READFILE : 0;
		fflush(stdout);
		_exit((int)have);
	}
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
		return 0;
	have = (unsigned int)WEXITSTATUS(status);
	tap_diag("kernel features: min_fd=%s openat2_fd=%s pipe2_fd=%s readfile=%s",
		 have & HAVE_MIN_FD ? "yes" : "no",
		 have & HAVE_OPENAT2_FD ? "yes" : "no",
		 have & HAVE_PIPE2_FD ? "yes" : "no",
		 have & HAVE_READFILE ? "yes" : "no");
	return have;
}
