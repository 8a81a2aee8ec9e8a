// SPDX-License-Identifier: MIT
/* orcd_readfile(): contents, short buffers, errors, flags, dfd and no fd
 * leaks, whichever implementation the running kernel gives (on a stock
 * kernel the open/read/close emulation). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "readfile.h"

static char dir[64];
static char file[128];
static char link_path[128];
static char content[10000];

/* The fd the next open gets: a leaked fd would have taken it. */
static int lowest_free_fd(void)
{
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	assert_true(fd >= 0);
	close(fd);
	return fd;
}

/* The reference: openat + one read + close, -errno on error. */
static ssize_t classic(int dfd, const char *path, void *buf, size_t size)
{
	int fd = openat(dfd, path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, size);
	if (n < 0)
		n = -errno;
	close(fd);
	return n;
}

static int setup(void **state)
{
	int fd;

	(void)state;
	strcpy(dir, "/tmp/orcd-readfile-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(file, sizeof(file), "%s/f", dir);
	snprintf(link_path, sizeof(link_path), "%s/link", dir);
	for (size_t i = 0; i < sizeof(content); i++)
		content[i] = (char)('a' + i % 23);
	fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 ||
	    write(fd, content, sizeof(content)) != (ssize_t)sizeof(content)) {
		return -1;
	}
	close(fd);
	return symlink("f", link_path);
}

static int teardown(void **state)
{
	(void)state;
	unlink(link_path);
	unlink(file);
	rmdir(dir);
	return 0;
}

static void test_whole_file(void **state)
{
	static char buf[20000];
	ssize_t n;

	(void)state;
	memset(buf, 0, sizeof(buf));
	n = orcd_readfile(AT_FDCWD, file, buf, sizeof(buf), 0);
	assert_int_equal(n, sizeof(content));
	assert_memory_equal(buf, content, sizeof(content));
	assert_int_not_equal(orcd_readfile_impl(), READFILE_UNPROBED);
}

static void test_short_buffer(void **state)
{
	char buf[200];

	(void)state;
	memset(buf, 'X', sizeof(buf));
	assert_int_equal(orcd_readfile(AT_FDCWD, file, buf, 100, 0), 100);
	assert_memory_equal(buf, content, 100);
	assert_int_equal(buf[100], 'X');
	assert_int_equal(orcd_readfile(AT_FDCWD, file, buf, 0, 0), 0);
}

/* A /proc file reports size 0; it must still read whole. */
static void test_proc_file(void **state)
{
	static char a[8192], b[8192];
	struct stat st;
	ssize_t na, nb;

	(void)state;
	assert_int_equal(stat("/proc/self/cmdline", &st), 0);
	assert_int_equal(st.st_size, 0);
	na = classic(AT_FDCWD, "/proc/self/cmdline", a, sizeof(a));
	nb = orcd_readfile(AT_FDCWD, "/proc/self/cmdline", b, sizeof(b), 0);
	assert_true(na > 0);
	assert_int_equal(nb, na);
	assert_memory_equal(a, b, (size_t)na);
}

static void test_errors(void **state)
{
	char buf[64];
	char missing[160];

	(void)state;
	snprintf(missing, sizeof(missing), "%s/missing", dir);
	assert_int_equal(orcd_readfile(AT_FDCWD, dir, buf, sizeof(buf), 0),
			 -EISDIR);
	assert_int_equal(orcd_readfile(AT_FDCWD, missing, buf, sizeof(buf), 0),
			 -ENOENT);
	assert_int_equal(orcd_readfile(-1, "f", buf, sizeof(buf), 0), -EBADF);
}

static void test_bad_flags(void **state)
{
	static const int bad[] = {O_WRONLY,    O_RDWR,	  O_CREAT,
				  O_TRUNC,     O_CLOEXEC, O_NONBLOCK,
				  O_DIRECTORY, O_PATH,	  -1};
	char buf[64];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(orcd_readfile(AT_FDCWD, file, buf, sizeof(buf),
					       bad[i]),
				 -EINVAL);
	assert_int_equal(orcd_readfile(AT_FDCWD, file, buf, sizeof(buf),
				       O_NOFOLLOW | O_NOATIME),
			 sizeof(buf));
}

static void test_nofollow(void **state)
{
	char buf[64];

	(void)state;
	assert_int_equal(orcd_readfile(AT_FDCWD, link_path, buf, sizeof(buf),
				       O_NOFOLLOW),
			 -ELOOP);
	assert_int_equal(orcd_readfile(AT_FDCWD, link_path, buf, sizeof(buf),
				       0),
			 sizeof(buf));
	assert_memory_equal(buf, content, sizeof(buf));
}

static void test_dfd_relative(void **state)
{
	char buf[64];
	int dfd, ffd;

	(void)state;
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(dfd >= 0);
	assert_int_equal(orcd_readfile(dfd, "f", buf, sizeof(buf), 0),
			 sizeof(buf));
	assert_memory_equal(buf, content, sizeof(buf));
	/* absolute paths ignore dfd, as for openat */
	assert_int_equal(orcd_readfile(dfd, file, buf, sizeof(buf), 0),
			 sizeof(buf));
	ffd = openat(dfd, "f", O_RDONLY | O_CLOEXEC);
	assert_true(ffd >= 0);
	assert_int_equal(orcd_readfile(ffd, "f", buf, sizeof(buf), 0),
			 -ENOTDIR);
	close(ffd);
	close(dfd);
}

static void test_bad_buffer(void **state)
{
	long page = sysconf(_SC_PAGESIZE);
	char *none;

	(void)state;
	none = mmap(NULL, (size_t)page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
		    -1, 0);
	assert_true(none != MAP_FAILED);
	assert_int_equal(orcd_readfile(AT_FDCWD, file, none, 100, 0), -EFAULT);
	munmap(none, (size_t)page);
}

/* Successes and every kind of failure leave the fd table as it was. */
static void test_no_fd_leak(void **state)
{
	char buf[64], *none;
	int before = lowest_free_fd();

	(void)state;
	none = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(none != MAP_FAILED);
	for (int i = 0; i < 200; i++) {
		assert_true(orcd_readfile(AT_FDCWD, file, buf, sizeof(buf), 0) >
			    0);
		assert_true(orcd_readfile(AT_FDCWD, dir, buf, sizeof(buf), 0) <
			    0);
		assert_true(orcd_readfile(AT_FDCWD, file, none, 10, 0) < 0);
		assert_true(orcd_readfile(AT_FDCWD, link_path, buf, sizeof(buf),
					  O_NOFOLLOW) < 0);
	}
	munmap(none, 4096);
	assert_int_equal(lowest_free_fd(), before);
}

/* The implementation chosen is the one the kernel allows, and stays. */
static void test_impl_matches_kernel(void **state)
{
	enum readfile_impl want = READFILE_EMULATED;
	char c;

	(void)state;
#ifdef __x86_64__
	/* the wrapper's own probe, repeated: readfile of /dev/null gives 0 */
	if (syscall(451, AT_FDCWD, "/dev/null", &c, 1, 0) == 0)
		want = READFILE_SYSCALL;
#else
	(void)c;
#endif
	assert_int_equal(orcd_readfile_impl(), want);
	assert_int_equal(orcd_readfile_impl(), want);
	print_message("readfile implementation: %s\n",
		      want == READFILE_SYSCALL ? "syscall" : "open/read/close");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_whole_file),
		cmocka_unit_test(test_short_buffer),
		cmocka_unit_test(test_proc_file),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_bad_flags),
		cmocka_unit_test(test_nofollow),
		cmocka_unit_test(test_dfd_relative),
		cmocka_unit_test(test_bad_buffer),
		cmocka_unit_test(test_no_fd_leak),
		cmocka_unit_test(test_impl_matches_kernel),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
