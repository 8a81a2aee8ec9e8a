// SPDX-License-Identifier: MIT
/*
 * path_normalize(): decoding, normalisation and every refusal;
 * path_dir_location(): the redirect's Location built back from it.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "path.h"

static char out[256];
static bool slash;

/* Runs path_normalize on a C string with a poisoned output buffer. */
static int norm(const char *raw)
{
	memset(out, 'X', sizeof(out));
	slash = false;
	return path_normalize(raw, strlen(raw), out, sizeof(out), &slash);
}

#define assert_ok(raw, want, want_slash)             \
	do {                                         \
		assert_int_equal(norm(raw), 0);      \
		assert_string_equal(out, want);      \
		assert_int_equal(slash, want_slash); \
	} while (0)

static void test_plain(void **state)
{
	(void)state;
	assert_ok("/", "", true);
	assert_ok("/index.html", "index.html", false);
	assert_ok("/a/b.html", "a/b.html", false);
	assert_ok("/a/b/", "a/b", true);
	assert_ok("/a.b/c.d", "a.b/c.d", false);
	assert_ok("/a../b..", "a../b..", false);
	assert_ok("/~user/x y", "~user/x y", false);
}

static void test_empty_and_dot_segments(void **state)
{
	(void)state;
	assert_ok("//a///b", "a/b", false);
	assert_ok("/a//", "a", true);
	/* A last dot segment leaves a directory (RFC 3986 5.2.4). */
	assert_ok("/./a/./b/.", "a/b", true);
	assert_ok("/a/%2e", "a", true);
	assert_ok("/.", "", true);
	assert_ok("/./", "", true);
	assert_ok("///", "", true);
}

static void test_dotdot(void **state)
{
	(void)state;
	assert_ok("/a/b/../c", "a/c", false);
	assert_ok("/a/b/c/../../d/", "a/d", true);
	assert_ok("/a/..", "", true);
	assert_ok("/a/b/..", "a", true);
	assert_ok("/a/b/%2e%2e", "a", true);
	assert_ok("/a/../", "", true);
	assert_ok("/a/b/../../c", "c", false);
	assert_ok("/a//..", "", true);
	assert_int_equal(norm("/.."), -EINVAL);
	assert_int_equal(norm("/../a"), -EINVAL);
	assert_int_equal(norm("/a/../.."), -EINVAL);
	assert_int_equal(norm("/a/../../etc/passwd"), -EINVAL);
	assert_int_equal(norm("/a/./../b/../../c"), -EINVAL);
}

static void test_decoding(void **state)
{
	(void)state;
	assert_ok("/%41%42c", "ABc", false);
	assert_ok("/%7euser", "~user", false);
	assert_ok("/a%20b", "a b", false);
	assert_ok("/caf%c3%a9", "caf\xc3\xa9", false);
	assert_ok("/caf\xc3\xa9", "caf\xc3\xa9", false);
	assert_ok("/%5Bx%5d", "[x]", false);
	/* Decoded exactly once. */
	assert_ok("/%252e%252e/x", "%2e%2e/x", false);
	assert_ok("/%2541", "%41", false);
	/* A decoded '/' separates segments like a literal one. */
	assert_ok("/a%2fb", "a/b", false);
	assert_ok("/a%2F", "a", true);
}

static void test_encoded_dots(void **state)
{
	(void)state;
	assert_int_equal(norm("/%2e%2e"), -EINVAL);
	assert_int_equal(norm("/%2E%2e/etc/passwd"), -EINVAL);
	assert_int_equal(norm("/.%2e/"), -EINVAL);
	assert_int_equal(norm("/a%2f..%2f..%2fetc"), -EINVAL);
	assert_int_equal(norm("/%2e%2e%2fetc"), -EINVAL);
	assert_ok("/a/%2e%2e/b", "b", false);
	assert_ok("/a/%2e/b", "a/b", false);
}

static void test_bad_escapes(void **state)
{
	(void)state;
	assert_int_equal(norm("/%"), -EINVAL);
	assert_int_equal(norm("/%2"), -EINVAL);
	assert_int_equal(norm("/a%"), -EINVAL);
	assert_int_equal(norm("/%g1"), -EINVAL);
	assert_int_equal(norm("/%1g"), -EINVAL);
	assert_int_equal(norm("/a%zzb"), -EINVAL);
	assert_int_equal(norm("/%-1"), -EINVAL);
	assert_int_equal(norm("/% 1"), -EINVAL);
}

static void test_control_bytes(void **state)
{
	static const char with_nul[] = "/a\0b";

	(void)state;
	assert_int_equal(norm("/a%00b"), -EINVAL);
	assert_int_equal(norm("/%00"), -EINVAL);
	assert_int_equal(norm("/a%0ab"), -EINVAL);
	assert_int_equal(norm("/a%0D%0A"), -EINVAL);
	assert_int_equal(norm("/a%1f"), -EINVAL);
	assert_int_equal(norm("/a%7f"), -EINVAL);
	assert_int_equal(norm("/a\tb"), -EINVAL);
	assert_int_equal(norm("/a\x7f"), -EINVAL);
	assert_int_equal(norm("/a\x01"), -EINVAL);
	/* A raw NUL inside len is refused, not taken as the end. */
	assert_int_equal(path_normalize(with_nul, sizeof(with_nul) - 1, out,
					sizeof(out), &slash),
			 -EINVAL);
	/* Control bytes in a segment later removed are still refused. */
	assert_int_equal(norm("/a%01/../b"), -EINVAL);
	/* 0x80 and above are data (UTF-8), 0x20 too. */
	assert_ok("/%80%ff%20", "\x80\xff ", false);
}

static void test_dotfiles(void **state)
{
	(void)state;
	assert_int_equal(norm("/.git/config"), -ENOENT);
	assert_int_equal(norm("/.git"), -ENOENT);
	assert_int_equal(norm("/.htaccess"), -ENOENT);
	assert_int_equal(norm("/a/.hidden"), -ENOENT);
	assert_int_equal(norm("/a/.b/"), -ENOENT);
	assert_int_equal(norm("/.well-known/acme-challenge/x"), -ENOENT);
	assert_int_equal(norm("/a/..."), -ENOENT);
	assert_int_equal(norm("/%2egit/config"), -ENOENT);
	assert_int_equal(norm("/a%2f.env"), -ENOENT);
	/* Only what survives normalisation counts. */
	assert_ok("/.a/../b", "b", false);
	assert_ok("/a/b.", "a/b.", false);
}

static void test_not_absolute(void **state)
{
	(void)state;
	assert_int_equal(path_normalize("", 0, out, sizeof(out), &slash),
			 -EINVAL);
	assert_int_equal(norm("a/b"), -EINVAL);
	assert_int_equal(norm("*"), -EINVAL);
	assert_int_equal(norm("%2fa"), -EINVAL);
	assert_int_equal(norm("http://x/a"), -EINVAL);
}

static void test_len_is_respected(void **state)
{
	(void)state;
	/* Only len bytes are read: the rest is not part of the path. */
	assert_int_equal(
		path_normalize("/ab/../..", 3, out, sizeof(out), &slash), 0);
	assert_string_equal(out, "ab");
	/* An escape cut by len is a bad escape. */
	assert_int_equal(path_normalize("/a%41", 4, out, sizeof(out), &slash),
			 -EINVAL);
	/* trailing_slash may be NULL. */
	assert_int_equal(path_normalize("/a/", 3, out, sizeof(out), NULL), 0);
	assert_string_equal(out, "a");
}

static void test_capacity(void **state)
{
	char buf[16];

	(void)state;
	/* "abc" needs 4 bytes with its NUL. */
	memset(buf, 'X', sizeof(buf));
	assert_int_equal(path_normalize("/abc", 4, buf, 4, &slash), 0);
	assert_string_equal(buf, "abc");
	memset(buf, 'X', sizeof(buf));
	assert_int_equal(path_normalize("/abc", 4, buf, 3, &slash),
			 -ENAMETOOLONG);
	/* Nothing written at or past cap. */
	assert_int_equal(buf[3], 'X');
	memset(buf, 'X', sizeof(buf));
	assert_int_equal(path_normalize("/abcdefghij", 11, buf, 4, &slash),
			 -ENAMETOOLONG);
	for (size_t i = 4; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 'X');
	/* The separator counts too. */
	assert_int_equal(path_normalize("/ab/cd", 6, buf, 6, &slash), 0);
	assert_string_equal(buf, "ab/cd");
	assert_int_equal(path_normalize("/ab/cd", 6, buf, 5, &slash),
			 -ENAMETOOLONG);
	assert_int_equal(path_normalize("/", 1, buf, 0, &slash), -ENAMETOOLONG);
	assert_int_equal(path_normalize("/", 1, buf, 1, &slash), 0);
	assert_string_equal(buf, "");
}

static void test_capacity_after_dotdot(void **state)
{
	char buf[4];
	const char *p;

	(void)state;
	/* Segments too long for out that ".." removes do not count. */
	p = "/aaaaaaaaaa/../b";
	assert_int_equal(path_normalize(p, strlen(p), buf, 2, &slash), 0);
	assert_string_equal(buf, "b");
	p = "/x/aaaaaaaa/bbbbbbbb/./../../y/";
	assert_int_equal(path_normalize(p, strlen(p), buf, sizeof(buf), &slash),
			 0);
	assert_string_equal(buf, "x/y");
	assert_true(slash);
	p = "/x/aaaaaaaa/bbbbbbbb/../y";
	assert_int_equal(path_normalize(p, strlen(p), buf, sizeof(buf), &slash),
			 -ENAMETOOLONG);
	/* Escaping the root stays -EINVAL even through long segments. */
	p = "/aaaaaaaa/../..";
	assert_int_equal(path_normalize(p, strlen(p), buf, sizeof(buf), &slash),
			 -EINVAL);
	/* A bad escape after a long segment is -EINVAL, not too long. */
	p = "/aaaaaaaa/%zz";
	assert_int_equal(path_normalize(p, strlen(p), buf, sizeof(buf), &slash),
			 -EINVAL);
}

/* ---- path_dir_location ---- */

static char loc[256];

struct loc_case {
	const char *raw; /* target path, normalised first */
	const char *query;
	const char *want;
};

static void expect_locations(const struct loc_case *c, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int len;

		if (norm(c[i].raw))
			fail_msg("case %zu (%s) does not normalise", i,
				 c[i].raw);
		memset(loc, 'X', sizeof(loc));
		len = path_dir_location(out, c[i].query, strlen(c[i].query),
					loc, sizeof(loc));
		if (len < 0 || (size_t)len != strlen(loc) ||
		    strcmp(loc, c[i].want) != 0)
			fail_msg("case %zu (%s ? %s): %d \"%s\", want \"%s\"",
				 i, c[i].raw, c[i].query, len,
				 len < 0 ? "" : loc, c[i].want);
	}
}

#define EXPECT_LOCATIONS(cases) \
	expect_locations(cases, sizeof(cases) / sizeof(cases[0]))

static void test_location_stays_on_this_server(void **state)
{
	(void)state;
	static const struct loc_case cases[] = {
		/* Each is the root without its slash; the raw target
		 * echoed would be a network-path reference
		 * ("//evil.example/../"). */
		{"//evil.example/..", "", "/"},
		{"/\\evil.example/..", "", "/"},
		{"/%5cevil.example/..", "", "/"},
		{"/%2fevil.example/..", "", "/"},
		{"//evil.example/%2e%2e", "", "/"},
		{"//////evil.example//..", "", "/"},
		{"/.", "", "/"},
		{"/.", "q", "/?q"},
		{"//evil.example/..", "next=//x", "/?next=//x"},
		/* Many slashes and dot segments fold into one slash per
		 * name. */
		{"//a", "", "/a/"},
		{"////a//b", "", "/a/b/"},
		{"/x/../a/./b/.", "", "/a/b/"},
		{"/x/%2e%2e/a", "", "/a/"},
		{"/x%2F..%2Fa%2Fb", "", "/a/b/"},
		{"/\\\\a/../b", "", "/b/"},
	};

	EXPECT_LOCATIONS(cases);
}

static void test_location_encodes(void **state)
{
	(void)state;
	static const struct loc_case cases[] = {
		{"/a%20b", "", "/a%20b/"},
		{"/a b", "", "/a%20b/"},
		{"/a\\b", "", "/a%5Cb/"},
		{"/a%5cb", "", "/a%5Cb/"},
		{"/q%3fx%23y", "", "/q%3Fx%23y/"},
		{"/%252e%252e", "", "/%252e%252e/"},
		{"/100%25", "", "/100%25/"},
		{"/caf\xc3\xa9", "", "/caf%C3%A9/"},
		{"/\"<>^`{|}", "", "/%22%3C%3E%5E%60%7B%7C%7D/"},
		/* unreserved, sub-delims, ':' and '@' stay as they are. */
		{"/azAZ09-._~!$&'()*+,;=:@", "", "/azAZ09-._~!$&'()*+,;=:@/"},
		{"/a%3ab%40c%21%7e", "", "/a:b@c!~/"},
	};

	EXPECT_LOCATIONS(cases);
}

static void test_location_query(void **state)
{
	(void)state;
	static const struct loc_case cases[] = {
		{"/d", "x=1&y=2", "/d/?x=1&y=2"},
		{"/d", "a=/../..&b=%2F", "/d/?a=/../..&b=%2F"},
		{"/d", "a?b", "/d/?a?b"},
		{"/d", "%41%7e", "/d/?%41%7e"},
		/* What a URI may not carry there is encoded, '%' of a
		 * broken escape included. */
		{"/d", "a\\b", "/d/?a%5Cb"},
		{"/d", "a\"b<c>", "/d/?a%22b%3Cc%3E"},
		{"/d", "a b#c", "/d/?a%20b%23c"},
		{"/d", "%zz", "/d/?%25zz"},
		{"/d", "x%4", "/d/?x%254"},
		{"/d", "x%", "/d/?x%25"},
		{"/d", "caf\xc3\xa9", "/d/?caf%C3%A9"},
		/* An empty query adds nothing. */
		{"/d", "", "/d/"},
	};

	EXPECT_LOCATIONS(cases);
}

/* Every byte a name can hold comes back to the same name. */
static void test_location_round_trip(void **state)
{
	char name[8], back[sizeof(out)];

	(void)state;
	for (unsigned c = 0x20; c < 0x100; c++) {
		bool trailing = false;
		int n;

		if (c == '/' || c == '.' || c == 0x7f)
			continue;
		snprintf(name, sizeof(name), "a%cb", (char)c);
		n = path_dir_location(name, "", 0, loc, sizeof(loc));
		assert_true(n > 0);
		assert_null(strchr(loc, '\\'));
		assert_true(loc[0] == '/' && loc[1] != '/');
		for (int i = 0; i < n; i++)
			assert_true(loc[i] > 0x20 && loc[i] < 0x7f);
		assert_int_equal(path_normalize(loc, (size_t)n, back,
						sizeof(back), &trailing),
				 0);
		assert_string_equal(back, name);
		assert_true(trailing);
	}
}

static void test_location_capacity(void **state)
{
	char buf[16];

	(void)state;
	/* "/ab/" needs 5 bytes with its NUL. */
	memset(buf, 'X', sizeof(buf));
	assert_int_equal(path_dir_location("ab", "", 0, buf, 5), 4);
	assert_string_equal(buf, "/ab/");
	memset(buf, 'X', sizeof(buf));
	assert_int_equal(path_dir_location("ab", "", 0, buf, 4), -ENAMETOOLONG);
	for (size_t i = 4; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 'X');
	/* An escape never goes out cut: "/%20/" is 6 bytes with its NUL. */
	assert_int_equal(path_dir_location(" ", "", 0, buf, 6), 5);
	assert_string_equal(buf, "/%20/");
	assert_int_equal(path_dir_location(" ", "", 0, buf, 5), -ENAMETOOLONG);
	assert_int_equal(path_dir_location(" ", "", 0, buf, 3), -ENAMETOOLONG);
	/* The query counts too. */
	assert_int_equal(path_dir_location("a", "q", 1, buf, 6), 5);
	assert_string_equal(buf, "/a/?q");
	assert_int_equal(path_dir_location("a", "q", 1, buf, 5), -ENAMETOOLONG);
	/* qlen is respected: the rest is not part of the query. */
	assert_int_equal(path_dir_location("a", "q=1#x", 3, buf, sizeof(buf)),
			 7);
	assert_string_equal(buf, "/a/?q=1");
	assert_int_equal(path_dir_location("", "", 0, buf, 2), 1);
	assert_string_equal(buf, "/");
	assert_int_equal(path_dir_location("", "", 0, buf, 1), -ENAMETOOLONG);
	assert_int_equal(path_dir_location("", "", 0, buf, 0), -ENAMETOOLONG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain),
		cmocka_unit_test(test_empty_and_dot_segments),
		cmocka_unit_test(test_dotdot),
		cmocka_unit_test(test_decoding),
		cmocka_unit_test(test_encoded_dots),
		cmocka_unit_test(test_bad_escapes),
		cmocka_unit_test(test_control_bytes),
		cmocka_unit_test(test_dotfiles),
		cmocka_unit_test(test_not_absolute),
		cmocka_unit_test(test_len_is_respected),
		cmocka_unit_test(test_capacity),
		cmocka_unit_test(test_capacity_after_dotdot),
		cmocka_unit_test(test_location_stays_on_this_server),
		cmocka_unit_test(test_location_encodes),
		cmocka_unit_test(test_location_query),
		cmocka_unit_test(test_location_round_trip),
		cmocka_unit_test(test_location_capacity),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
