// SPDX-License-Identifier: GPL-2.0
/*
 * The guest's backlog_fuzz: the selftest backlog_fuzz.c with its own
 * options (--seed, --count, --max-segs, --max-len, --replay, --budget,
 * --regressions), taken
 * out of the command line first, and ksft_cli.h's command line over
 * 6.1's harness for the rest (--list, --case, --family, --repeat,
 * --timeout, --ptest, --help).
 */
#include "ksft_cli.h"

#define main backlog_fuzz_selftest_main
#include "backlog_fuzz.c"
#undef main

#include "ksft_cli.h"

static const char * const fuzz_options[] = {
	"--seed", "--count", "--max-segs", "--max-len", "--replay", "--budget",
	"--regressions",
};

/* ksft_cli.h's options that take an argument: passed on with it. */
static const char * const fuzz_cli_with_arg[] = {
	"-c", "--case", "-f", "--family", "-m", "--mode", "-n", "--repeat",
	"-t", "--timeout",
};

static int fuzz_set(const char *prog, int opt, const char *val)
{
	static const struct { long long min, max; } range[] = {
		{ 0, (1LL << 53) }, { 1, 1000000 }, { 2, FZ_SEGS }, { 76, FZ_LEN },
		{ 0, 0 }, { 1, 86400 },
	};
	long long v;

	if (opt == 4 || opt == 6) {
		if (!*val) {
			fprintf(stderr, "%s: %s wants a path\n", prog, fuzz_options[opt]);
			return -1;
		}
		if (opt == 4)
			fz_replay = val;
		else
			fz_regressions = val;
		return 0;
	}
	if (ksft_cli_number(val, false, range[opt].min, range[opt].max, &v)) {
		fprintf(stderr, "%s: %s wants %lld..%lld, not '%s'\n", prog, fuzz_options[opt],
			range[opt].min, range[opt].max, val);
		return -1;
	}
	switch (opt) {
	case 0:
		fz_seed = (unsigned long long)v;
		break;
	case 1:
		fz_count = (unsigned int)v;
		break;
	case 2:
		fz_max_segs = (unsigned int)v;
		break;
	case 3:
		fz_max_len = (unsigned int)v;
		break;
	case 5:
		fz_budget = (unsigned int)v;
		break;
	}
	return 0;
}

/* Take our options out of argv (into rest, argv[0] kept): 0, or -1. */
static int fuzz_parse(int argc, char **argv, char **rest, int *nrest)
{
	const char *val;
	size_t n;
	int i, j;

	*nrest = 0;
	rest[(*nrest)++] = argv[0];
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--")) {
			while (i < argc)
				rest[(*nrest)++] = argv[i++];
			break;
		}
		for (j = 0; j < (int)ARRAY_SIZE(fuzz_cli_with_arg); j++)
			if (!strcmp(argv[i], fuzz_cli_with_arg[j]))
				break;
		if (j < (int)ARRAY_SIZE(fuzz_cli_with_arg)) {
			rest[(*nrest)++] = argv[i];
			if (i + 1 < argc)
				rest[(*nrest)++] = argv[++i];
			continue;
		}
		for (j = 0; j < (int)ARRAY_SIZE(fuzz_options); j++) {
			n = strlen(fuzz_options[j]);
			if (!strncmp(argv[i], fuzz_options[j], n) &&
			    (argv[i][n] == '=' || !argv[i][n]))
				break;
		}
		if (j == (int)ARRAY_SIZE(fuzz_options)) {
			rest[(*nrest)++] = argv[i];
			continue;
		}
		val = argv[i][n] == '=' ? argv[i] + n + 1 : NULL;
		if (!val) {
			if (i + 1 == argc) {
				fprintf(stderr, "%s: %s wants a value\n", argv[0], argv[i]);
				return -1;
			}
			val = argv[++i];
		}
		if (fuzz_set(argv[0], j, val))
			return -1;
	}
	rest[*nrest] = NULL;
	return 0;
}

int main(int argc, char **argv)
{
	char **rest = calloc((size_t)argc + 1, sizeof(*rest));
	int nrest;

	if (!rest || fuzz_parse(argc, argv, rest, &nrest))
		return 2;
	if (fz_replay) {
		static struct fz_seq check[64];

		if (fz_read_replay(fz_replay, check, ARRAY_SIZE(check)) < 0)
			return 2;
	}
	return ksft_cli_main(nrest, rest,
			     "Random segment sequences through TCP backlog coalescing\n"
			     "(tcp_add_backlog()), each played with merging on and off (without\n"
			     "net.ipv4.tcp_backlog_coalesce: held and unheld); what the\n"
			     "application and the peer see must agree, and every merge must be\n"
			     "one the merge rules allow. Needs root: each test runs in a network\n"
			     "namespace of its own. Tests: fuzz.{ipv4,ipv6,ipv4_tap}.random (the\n"
			     "generated sequences), .regressions (the replay files of a folder:\n"
			     "sequences that once failed) and .burst (a held burst beyond the\n"
			     "backlog's limit, merging on and off); ipv4_tap writes through tap,\n"
			     "whose page-fragment heads the merge steals.\n\n"
			     "      --seed N        the first sequence's seed (default 1); sequence\n"
			     "                      i is seed N+i, the same on every architecture\n"
			     "      --count N       sequences per test (default 64)\n"
			     "      --max-segs N    segments per sequence at most, 2..16 (default 16)\n"
			     "      --max-len N     payload bytes per segment at most, 76..1000\n"
			     "                      (default 400)\n"
			     "      --replay FILE   play the sequences of FILE instead ('seq', 'seg'\n"
			     "                      and 'end' lines, as a failure prints them)\n"
			     "      --budget S      random stops after S seconds, 1..86400, even\n"
			     "                      if fewer than --count sequences were played\n"
			     "      --regressions DIR  the folder of *.seq files regressions plays\n"
			     "                      (default /usr/share/kgate/fuzz-regressions)\n\n"
			     "A failing sequence is printed, made smaller while it still fails,\n"
			     "and printed again: '# fuzz: ' lines that --replay reads.\n",
			     NULL);
}
