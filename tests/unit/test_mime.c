// SPDX-License-Identifier: MIT
/* mime.types parsing and lookup: a small text of our own and the system's
 * file. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "mime.h"

#define DEF "application/octet-stream"

static const char small[] = "# comment line\n"
			    "\n"
			    "text/html\t\t\t\thtml htm\n"
			    "text/x-dup html dup\n"
			    "application/x-upper UPPER Mixed\n"
			    "image/png png # a comment after the extensions\n"
			    "application/x-no-extensions\n"
			    "   \t  \n"
			    "text/plain\ttxt\ttext\n"
			    "text/x-crlf crlf\r\n"
			    "application/vnd.Mixed.Case+xml mcx\n"
			    "not-a-type foo\n"
			    "#text/x-commented cmt";

/* mime_parse cuts its text into lines in place: give it a copy. */
static struct mime_table *parse(const char *text)
{
	char *copy = strdup(text);
	struct mime_table *t = NULL;

	assert_non_null(copy);
	assert_int_equal(mime_parse(copy, &t), 0);
	assert_non_null(t);
	free(copy);
	return t;
}

static struct mime_table *load_small(void)
{
	return parse(small);
}

static void test_lookup(void **state)
{
	struct mime_table *t = load_small();

	(void)state;
	assert_string_equal(mime_lookup(t, "index.html", DEF), "text/html");
	assert_string_equal(mime_lookup(t, "a/b/page.htm", DEF), "text/html");
	assert_string_equal(mime_lookup(t, "x.png", DEF), "image/png");
	assert_string_equal(mime_lookup(t, "x.txt", DEF), "text/plain");
	assert_string_equal(mime_lookup(t, "x.text", DEF), "text/plain");
	assert_string_equal(mime_lookup(t, "x.dup", DEF), "text/x-dup");
	assert_string_equal(mime_lookup(t, "x.crlf", DEF), "text/x-crlf");
	/* The type is returned as written. */
	assert_string_equal(mime_lookup(t, "x.mcx", DEF),
			    "application/vnd.Mixed.Case+xml");
	/* The extension is the part after the last dot. */
	assert_string_equal(mime_lookup(t, "archive.tar.png", DEF),
			    "image/png");
	assert_string_equal(mime_lookup(t, "x.png.txt", DEF), "text/plain");
	mime_free(t);
}

/* A type that is not type/subtype tokens would go into Content-Type as it
 * is: its line is junk and adds nothing. */
static void test_junk_types_skipped(void **state)
{
	char text[] = "te\"xt/html j1\n"
		      "text/\xc3\xa9 j2\n"
		      "text/html;charset=x j3\n"
		      "text/a/b j4\n"
		      "text/x-ok ok\n";
	static const char *const junk[] = { "a.j1", "a.j2", "a.j3", "a.j4" };
	struct mime_table *t;

	(void)state;
	assert_int_equal(mime_parse(text, &t), 0);
	for (size_t i = 0; i < sizeof(junk) / sizeof(*junk); i++)
		assert_string_equal(mime_lookup(t, junk[i], DEF), DEF);
	assert_string_equal(mime_lookup(t, "a.ok", DEF), "text/x-ok");
	mime_free(t);
}

static void test_case_insensitive(void **state)
{
	struct mime_table *t = load_small();

	(void)state;
	assert_string_equal(mime_lookup(t, "INDEX.HTML", DEF), "text/html");
	assert_string_equal(mime_lookup(t, "x.Png", DEF), "image/png");
	/* Keys from the file are folded too. */
	assert_string_equal(mime_lookup(t, "x.upper", DEF),
			    "application/x-upper");
	assert_string_equal(mime_lookup(t, "x.UPPER", DEF),
			    "application/x-upper");
	assert_string_equal(mime_lookup(t, "x.mixed", DEF),
			    "application/x-upper");
	mime_free(t);
}

static void test_first_definition_wins(void **state)
{
	struct mime_table *t = load_small();

	(void)state;
	assert_string_equal(mime_lookup(t, "x.html", DEF), "text/html");
	mime_free(t);
}

static void test_no_extension(void **state)
{
	struct mime_table *t = load_small();

	(void)state;
	assert_string_equal(mime_lookup(t, "README", DEF), DEF);
	assert_string_equal(mime_lookup(t, "a/b/README", DEF), DEF);
	assert_string_equal(mime_lookup(t, "file.", DEF), DEF);
	assert_string_equal(mime_lookup(t, "file.png.", DEF), DEF);
	assert_string_equal(mime_lookup(t, "", DEF), DEF);
	/* Only the last segment counts. */
	assert_string_equal(mime_lookup(t, "dir.png/file", DEF), DEF);
	assert_string_equal(mime_lookup(t, "dir.png/", DEF), DEF);
	/* A leading dot names a file, it is not an extension. */
	assert_string_equal(mime_lookup(t, ".png", DEF), DEF);
	assert_string_equal(mime_lookup(t, "a/.png", DEF), DEF);
	/* Whole extensions only, no prefixes. */
	assert_string_equal(mime_lookup(t, "x.h", DEF), DEF);
	assert_string_equal(mime_lookup(t, "x.htmlx", DEF), DEF);
	assert_string_equal(mime_lookup(t, "x.gz", DEF), DEF);
	/* Bare types, non-types and comments add nothing. */
	assert_string_equal(mime_lookup(t, "x.foo", DEF), DEF);
	assert_string_equal(mime_lookup(t, "x.cmt", DEF), DEF);
	assert_string_equal(mime_lookup(t, "x.comment", DEF), DEF);
	assert_string_equal(mime_lookup(t, "x.#", DEF), DEF);
	/* The caller's default, whatever it is. */
	assert_string_equal(mime_lookup(t, "x.gz", "text/x-mine"),
			    "text/x-mine");
	assert_null(mime_lookup(t, "x.gz", NULL));
	mime_free(t);
}

static void test_empty_and_null(void **state)
{
	struct mime_table *t = mime_empty();

	(void)state;
	assert_non_null(t);
	assert_string_equal(mime_lookup(t, "index.html", DEF), DEF);
	assert_string_equal(mime_lookup(NULL, "index.html", DEF), DEF);
	mime_free(t);
	mime_free(NULL);
}

/* The strings the table keeps are its own, and an empty text is an
 * empty table. */
static void test_owns_its_strings(void **state)
{
	char text[] = "text/x-own own\n";
	struct mime_table *t = NULL;

	(void)state;
	assert_int_equal(mime_parse(text, &t), 0);
	memset(text, 'z', sizeof(text) - 1);
	assert_string_equal(mime_lookup(t, "a.own", DEF), "text/x-own");
	mime_free(t);
	t = parse("");
	assert_string_equal(mime_lookup(t, "a.own", DEF), DEF);
	mime_free(t);
}

/* Enough extensions to make the table grow several times. */
static void test_many(void **state)
{
	size_t cap = 5000 * 48, n = 0;
	char *big = malloc(cap), ext[32];
	struct mime_table *t;

	(void)state;
	assert_non_null(big);
	for (int i = 0; i < 5000; i++)
		n += (size_t)snprintf(big + n, cap - n,
				      "application/x-t%d e%d E%dx\n", i, i, i);
	t = parse(big);
	free(big);
	for (int i = 0; i < 5000; i++) {
		char want[32];

		snprintf(want, sizeof(want), "application/x-t%d", i);
		snprintf(ext, sizeof(ext), "f.e%d", i);
		assert_string_equal(mime_lookup(t, ext, DEF), want);
		snprintf(ext, sizeof(ext), "f.e%dX", i);
		assert_string_equal(mime_lookup(t, ext, DEF), want);
	}
	assert_string_equal(mime_lookup(t, "f.e5000", DEF), DEF);
	mime_free(t);
}

/* Debian's media-types package, which the daemon uses by default. */
static void test_system_file(void **state)
{
	static const char *const want[][2] = {
		{"index.html", "text/html"},
		{"a.htm", "text/html"},
		{"style.css", "text/css"},
		{"logo.png", "image/png"},
		{"photo.JPG", "image/jpeg"},
		{"app.js", "text/javascript"},
		{"mod.mjs", "text/javascript"},
		{"data.json", "application/json"},
		{"icon.svg", "image/svg+xml"},
		{"notes.txt", "text/plain"},
		{"code.wasm", "application/wasm"},
		{"doc.pdf", "application/pdf"},
	};
	static char text[1 << 20];
	struct mime_table *t;
	FILE *f;
	size_t n;

	(void)state;
	f = fopen("/etc/mime.types", "r");
	if (!f)
		skip();
	n = fread(text, 1, sizeof(text) - 1, f);
	assert_false(ferror(f));
	assert_true(feof(f));
	fclose(f);
	text[n] = '\0';
	t = parse(text);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		assert_string_equal(mime_lookup(t, want[i][0], DEF),
				    want[i][1]);
	assert_string_equal(mime_lookup(t, "x.no-such-extension", DEF), DEF);
	mime_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lookup),
		cmocka_unit_test(test_junk_types_skipped),
		cmocka_unit_test(test_case_insensitive),
		cmocka_unit_test(test_first_definition_wins),
		cmocka_unit_test(test_no_extension),
		cmocka_unit_test(test_empty_and_null),
		cmocka_unit_test(test_owns_its_strings),
		cmocka_unit_test(test_many),
		cmocka_unit_test(test_system_file),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
