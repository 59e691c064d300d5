/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A thin command line over the kselftest harness of Linux 6.1, whose
 * test_harness_run() ignores its arguments. Include this header twice
 * around the selftest, whose main() is renamed away:
 *
 *	#include "ksft_cli.h"		(before the harness)
 *	#define main selftest_main
 *	#include "the_selftest.c"	(kselftest_harness.h, TEST_F()s)
 *	#undef main
 *	#include "ksft_cli.h"		(after it)
 *
 * Before the harness it makes SKIP lines carry the test's name
 * ("ok N fixture.variant.test # SKIP reason", as newer harnesses print
 * them; 6.1's leaves the name out). After it, ksft_cli_main() prunes
 * the harness's own fixture, variant and test lists to what the options
 * select and runs what is left with the harness's __run_test(): its
 * fork, its timeout, its result lines. It adds:
 *   --list, --case NAME (full name, test name or variant name),
 *   --family F and --mode M (variants are named <family>[_<mode>], no
 *   mode meaning "hold"), --repeat N, --timeout MS, --ptest.
 * Exit status: 0 every test passed or was not applicable, 1 one failed,
 * 4 none failed but one was skipped as "inconclusive: ...", 2 usage.
 */
#ifndef __KSELFTEST_HARNESS_H
#ifndef KSFT_CLI_BEFORE
#define KSFT_CLI_BEFORE

/* The selftests use GNU extensions (sched_setaffinity()): before any header. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdarg.h>
#include <stdio.h>

#include "../kselftest.h"

/* The test being run, for its SKIP line. */
static char ksft_cli_name[256];

static inline void ksft_cli_result_skip(const char *msg, ...)
{
	va_list args;

	ksft_cnt.ksft_xskip++;
	va_start(args, msg);
	printf("ok %d %s # SKIP ", ksft_test_num(), ksft_cli_name);
	vprintf(msg, args);
	va_end(args);
}

#define ksft_test_result_skip ksft_cli_result_skip

#endif /* KSFT_CLI_BEFORE */
#else /* after the harness */
#ifndef KSFT_CLI_AFTER
#define KSFT_CLI_AFTER

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define KSFT_CLI_MAX_NAMES	64

/*
 * An option's number: decimal digits only (no sign, no blank), with a
 * K or M suffix (times 1024 or 1024 * 1024) where suffix allows it,
 * from min to max (0 <= min <= max). 0 with *v, or -1 when s is not
 * such a number: trailing characters, a sign, out of range, or too big
 * for 64 bits, before or after the suffix. Parsed in 64 bits on every
 * target and checked before it is narrowed: on none does a value wrap
 * into range.
 */
static inline int ksft_cli_number(const char *s, bool suffix, long long min,
				  long long max, long long *v)
{
	unsigned long long n, mult = 1;
	char *end;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	n = strtoull(s, &end, 10);
	if (errno)
		return -1;
	if (suffix && (*end == 'K' || *end == 'k')) {
		mult = 1024;
		end++;
	} else if (suffix && (*end == 'M' || *end == 'm')) {
		mult = 1024 * 1024;
		end++;
	}
	if (*end || n > (unsigned long long)max / mult)
		return -1;
	n *= mult;
	if ((long long)n < min)
		return -1;
	*v = (long long)n;
	return 0;
}

struct ksft_cli {
	const char *prog;
	const char *names[KSFT_CLI_MAX_NAMES];
	int nnames;
	const char *family;
	const char *mode;
	int repeat;
	int timeout_ms;		/* 0: each test's own */
	bool list;
	bool ptest;
};

static void ksft_cli_name_of(char *buf, size_t cap,
			     const struct __fixture_metadata *f,
			     const struct __fixture_variant_metadata *v,
			     const struct __test_metadata *t)
{
	snprintf(buf, cap, "%s%s%s.%s", f->name, v->name[0] ? "." : "",
		 v->name, t->name);
}

/* The mode of a variant named <family>[_<mode>]: "hold" without one. */
static const char *ksft_cli_mode_of(const char *variant)
{
	const char *us = strchr(variant, '_');

	return us ? us + 1 : "hold";
}

static bool ksft_cli_want_variant(const struct ksft_cli *cli,
				  const struct __fixture_variant_metadata *v)
{
	size_t n;

	if (cli->family) {
		n = strlen(cli->family);
		if (strncmp(v->name, cli->family, n) || (v->name[n] && v->name[n] != '_'))
			return false;
	}
	return !cli->mode || !strcmp(ksft_cli_mode_of(v->name), cli->mode);
}

static bool ksft_cli_want_test(const struct ksft_cli *cli, const char *full,
			       const struct __fixture_variant_metadata *v,
			       const struct __test_metadata *t, bool *hit)
{
	int i;

	if (!cli->nnames)
		return true;
	for (i = 0; i < cli->nnames; i++)
		if (!strcmp(cli->names[i], full) || !strcmp(cli->names[i], t->name) ||
		    !strcmp(cli->names[i], v->name)) {
			hit[i] = true;
			return true;
		}
	return false;
}

/*
 * Walk every fixture x variant x test the harness registered; call fn
 * for those selected. Returns how many were selected.
 */
static unsigned int ksft_cli_walk(const struct ksft_cli *cli, bool *hit,
				  void (*fn)(struct __fixture_metadata *,
					     struct __fixture_variant_metadata *,
					     struct __test_metadata *, void *),
				  void *arg)
{
	static struct __fixture_variant_metadata no_variant = { .name = "" };
	struct __fixture_variant_metadata *v;
	struct __fixture_metadata *f;
	struct __test_metadata *t;
	unsigned int n = 0;
	char full[256];

	for (f = __fixture_list; f; f = f->next)
		for (v = f->variant ?: &no_variant; v; v = v->next) {
			if (!ksft_cli_want_variant(cli, v))
				continue;
			for (t = f->tests; t; t = t->next) {
				ksft_cli_name_of(full, sizeof(full), f, v, t);
				if (!ksft_cli_want_test(cli, full, v, t, hit))
					continue;
				n++;
				if (fn)
					fn(f, v, t, arg);
			}
		}
	return n;
}

static void ksft_cli_print(struct __fixture_metadata *f,
			   struct __fixture_variant_metadata *v,
			   struct __test_metadata *t, void *arg)
{
	char full[256];

	ksft_cli_name_of(full, sizeof(full), f, v, t);
	printf("%s\n", full);
}

struct ksft_cli_tally {
	const struct ksft_cli *cli;
	struct __test_results *results;
	unsigned int fail, inconclusive;
};

static void ksft_cli_run_one(struct __fixture_metadata *f,
			     struct __fixture_variant_metadata *v,
			     struct __test_metadata *t, void *arg)
{
	struct ksft_cli_tally *tl = arg;

	if (tl->cli->timeout_ms)
		t->timeout = 2 * tl->cli->timeout_ms / 1000 + 5;
	ksft_cli_name_of(ksft_cli_name, sizeof(ksft_cli_name), f, v, t);
	t->results = tl->results;
	__run_test(f, v, t);
	if (!t->passed)
		tl->fail++;
	else if (t->skip && !strncmp(t->results->reason, "inconclusive", 12))
		tl->inconclusive++;
	t->results = NULL;
	fflush(stdout);
}

/* Yocto ptest lines from the KTAP of a child running the tests. */
static int ksft_cli_ptest(int fd, pid_t child)
{
	char line[2048], name[512];
	FILE *in = fdopen(fd, "r");
	int status, num;
	char *skip;

	while (in && fgets(line, sizeof(line), in)) {
		if (line[0] == '#') {
			fputs(line, stdout);
			continue;
		}
		if (sscanf(line, "not ok %d %511s", &num, name) == 2)
			printf("FAIL: %s\n", name);
		else if (sscanf(line, "ok %d %511s", &num, name) == 2) {
			skip = strstr(line, " # SKIP ");
			if (skip)
				printf("# %s: %s", name, skip + 8);
			printf("%s: %s\n", skip ? "SKIP" : "PASS", name);
		}
		fflush(stdout);
	}
	if (in)
		fclose(in);
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status))
		return KSFT_FAIL;
	return WEXITSTATUS(status);
}

static int ksft_cli_run(const struct ksft_cli *cli)
{
	struct ksft_cli_tally tl = { .cli = cli };
	bool hit[KSFT_CLI_MAX_NAMES] = { false };
	unsigned int n = ksft_cli_walk(cli, hit, NULL, NULL);
	int i, pfd[2];
	pid_t child;

	if (cli->ptest) {
		fflush(stdout);
		if (pipe(pfd))
			return KSFT_FAIL;
		child = fork();
		if (child < 0)
			return KSFT_FAIL;
		if (child) {
			close(pfd[1]);
			return ksft_cli_ptest(pfd[0], child);
		}
		close(pfd[0]);
		dup2(pfd[1], STDOUT_FILENO);
		close(pfd[1]);
	}
	tl.results = mmap(NULL, sizeof(*tl.results), PROT_READ | PROT_WRITE,
			  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (tl.results == MAP_FAILED)
		exit(KSFT_FAIL);
	ksft_print_header();
	ksft_set_plan(n * cli->repeat);
	for (i = 0; i < cli->repeat; i++)
		ksft_cli_walk(cli, hit, ksft_cli_run_one, &tl);
	ksft_print_cnts();
	exit(tl.fail ? KSFT_FAIL : tl.inconclusive ? KSFT_SKIP : KSFT_PASS);
}

/* Whether the selftest has variants: --family and --mode apply. */
static bool ksft_cli_has_variants(void)
{
	struct __fixture_metadata *f;

	for (f = __fixture_list; f; f = f->next)
		if (f->variant)
			return true;
	return false;
}

static void ksft_cli_usage(FILE *out, const char *prog, const char *about)
{
	fprintf(out,
		"Usage: %s [options]\n%s\n"
		"  -c, --case NAME     run only this: a full name from --list\n"
		"                      (fixture.variant.test), a test name for all its\n"
		"                      variants, or a variant name; repeatable\n",
		prog, about);
	if (ksft_cli_has_variants())
		fprintf(out,
			"  -f, --family F      only the variants of family F (ipv4, ipv6)\n"
			"  -m, --mode M        only the variants of mode M (hold, off, ctl)\n");
	fprintf(out,
		"  -l, --list          list the selected names and exit\n"
		"  -n, --repeat N      run the selection N times (default 1)\n"
		"  -t, --timeout MS    deadline of each test (default: its own)\n"
		"  -p, --ptest         Yocto ptest output (PASS:/FAIL:/SKIP: name)\n"
		"  -h, --help          this text\n\n"
		"Output: KTAP. Exit status: 0 all passed (or not applicable), 1 a test\n"
		"failed, 4 none failed but one was inconclusive, 2 usage.\n");
}

/*
 * Parse the options; run the selection (does not return) or list it.
 * Returns an exit status when it did not run anything.
 */
static int ksft_cli_main(int argc, char **argv, const char *about,
			 int *timeout_ms)
{
	static const struct option opts[] = {
		{ "case", required_argument, NULL, 'c' },
		{ "family", required_argument, NULL, 'f' },
		{ "mode", required_argument, NULL, 'm' },
		{ "list", no_argument, NULL, 'l' },
		{ "repeat", required_argument, NULL, 'n' },
		{ "timeout", required_argument, NULL, 't' },
		{ "ptest", no_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ksft_cli cli = { .prog = argv[0], .repeat = 1 };
	bool hit[KSFT_CLI_MAX_NAMES] = { false };
	long long v;
	int opt, i;

	while ((opt = getopt_long(argc, argv, "c:f:m:ln:t:ph", opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			if (cli.nnames == KSFT_CLI_MAX_NAMES) {
				fprintf(stderr, "%s: at most %d --case\n", argv[0],
					KSFT_CLI_MAX_NAMES);
				return 2;
			}
			cli.names[cli.nnames++] = optarg;
			break;
		case 'f':
			cli.family = optarg;
			break;
		case 'm':
			cli.mode = optarg;
			break;
		case 'l':
			cli.list = true;
			break;
		case 'n':
			if (ksft_cli_number(optarg, false, 1, 100000, &v)) {
				fprintf(stderr, "%s: --repeat wants 1..100000, not '%s'\n",
					argv[0], optarg);
				return 2;
			}
			cli.repeat = (int)v;
			break;
		case 't':
			if (ksft_cli_number(optarg, false, 100, 600000, &v)) {
				fprintf(stderr, "%s: --timeout wants 100..600000 ms, not '%s'\n",
					argv[0], optarg);
				return 2;
			}
			cli.timeout_ms = (int)v;
			break;
		case 'p':
			cli.ptest = true;
			break;
		case 'h':
			ksft_cli_usage(stdout, argv[0], about);
			return 0;
		default:
			ksft_cli_usage(stderr, argv[0], about);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", argv[0], argv[optind]);
		return 2;
	}
	if (!ksft_cli_walk(&cli, hit, NULL, NULL)) {
		fprintf(stderr, "%s: the options select no test (see --list)\n", argv[0]);
		return 2;
	}
	for (i = 0; i < cli.nnames; i++)
		if (!hit[i]) {
			fprintf(stderr, "%s: '%s' selects no test (see --list)\n", argv[0],
				cli.names[i]);
			return 2;
		}
	if (cli.list) {
		ksft_cli_walk(&cli, hit, ksft_cli_print, NULL);
		return 0;
	}
	if (cli.timeout_ms && timeout_ms)
		*timeout_ms = cli.timeout_ms;
	/* Results must reach a pipe before a test's child _exit()s. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	return ksft_cli_run(&cli);
}

#endif /* KSFT_CLI_AFTER */
#endif
