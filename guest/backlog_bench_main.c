// SPDX-License-Identifier: GPL-2.0
/*
 * The guest's backlog_bench: the selftest backlog_bench.c as it goes
 * upstream, with its own options (--reps, --bulk-bytes, --drain,
 * --rcvbuf, --bulk-budget, --flight, --read-size, --no-bulk, --no-drain), taken out of the command line
 * first, and ksft_cli.h's command line over 6.1's harness for the rest
 * (--list, --case, --repeat, --timeout, --ptest, --help).
 */
#include "ksft_cli.h"

#define main backlog_bench_selftest_main
#include "backlog_bench.c"
#undef main

#include "ksft_cli.h"

enum {
	OPT_REPS, OPT_BULK_BYTES, OPT_DRAIN, OPT_RCVBUF, OPT_BULK_BUDGET, OPT_FLIGHT,
	OPT_READ_SIZE, OPT_NO_BULK, OPT_NO_DRAIN,
};

static const struct bench_option {
	const char *name;
	char letter;		/* the short form, 0 if none */
	bool arg;
} bench_options[] = {
	[OPT_REPS] = { "reps", 'r', true },
	[OPT_BULK_BYTES] = { "bulk-bytes", 'b', true },
	[OPT_DRAIN] = { "drain", 'd', true },
	[OPT_RCVBUF] = { "rcvbuf", 's', true },
	[OPT_BULK_BUDGET] = { "bulk-budget", 0, true },
	[OPT_FLIGHT] = { "flight", 0, true },
	[OPT_READ_SIZE] = { "read-size", 0, true },
	[OPT_NO_BULK] = { "no-bulk", 0, false },
	[OPT_NO_DRAIN] = { "no-drain", 0, false },
};

/* ksft_cli.h's options that take an argument: passed on with it. */
static const char * const cli_with_arg[] = {
	"-c", "--case", "-f", "--family", "-m", "--mode", "-n", "--repeat",
	"-t", "--timeout",
};

/*
 * Which of our options arg is: its index, with *val pointing at an
 * inline value ("--reps=3", "-r3") or NULL; -1 if none of ours.
 */
static int bench_option(const char *arg, const char **val)
{
	size_t n;
	int i;

	*val = NULL;
	for (i = 0; i < (int)ARRAY_SIZE(bench_options); i++) {
		const struct bench_option *o = &bench_options[i];

		n = strlen(o->name);
		if (!strncmp(arg, "--", 2) && !strncmp(arg + 2, o->name, n)) {
			if (!arg[2 + n])
				return i;
			if (o->arg && arg[2 + n] == '=') {
				*val = arg + 3 + n;
				return i;
			}
		}
		if (o->letter && arg[0] == '-' && arg[1] == o->letter) {
			if (arg[2])
				*val = arg + 2;
			return i;
		}
	}
	return -1;
}

/* A usage error: one line naming the option, its range and the value. */
static int bench_bad(const char *prog, const char *opt, const char *range,
		     const char *val)
{
	fprintf(stderr, "%s: --%s wants %s, not '%s'\n", prog, opt, range, val);
	return -1;
}

/*
 * Every number is range-checked in 64 bits (ksft_cli_number()) before
 * it is narrowed to its field, which each maximum here fits (int,
 * uint32_t) on every target: nothing wraps into range.
 */
static int bench_set(const char *prog, int opt, const char *val)
{
	const char *name = bench_options[opt].name;
	struct bench_opts *o = &bench_opts;
	char range[64], *copy, *tok, *save;
	long long v;

	switch (opt) {
	case OPT_REPS:
		snprintf(range, sizeof(range), "1..%d", MAX_REPS);
		if (ksft_cli_number(val, false, 1, MAX_REPS, &v))
			return bench_bad(prog, name, range, val);
		o->reps = (int)v;
		break;
	case OPT_BULK_BYTES:
		if (ksft_cli_number(val, true, 1, 1L << 30, &v))
			return bench_bad(prog, name, "1..1G", val);
		o->bulk_bytes = (uint32_t)v;
		break;
	case OPT_DRAIN:
		snprintf(range, sizeof(range), "up to %d counts of 0..100000", MAX_SIZES);
		/* Tokenised in a copy: the whole value is what the error shows. */
		copy = strdup(val);
		if (!copy)
			return bench_bad(prog, name, range, val);
		o->nsizes = 0;
		for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			if (o->nsizes == MAX_SIZES || ksft_cli_number(tok, false, 0, 100000, &v))
				break;
			o->sizes[o->nsizes++] = (int)v;
		}
		free(copy);
		if (tok || !o->nsizes)
			return bench_bad(prog, name, range, val);
		break;
	case OPT_RCVBUF:
		if (ksft_cli_number(val, true, 0, 1L << 30, &v))
			return bench_bad(prog, name, "0..1G", val);
		o->rcvbuf = (int)v;
		break;
	case OPT_BULK_BUDGET:
		snprintf(range, sizeof(range), "0..%d", BULK_TIMEOUT - BULK_MARGIN);
		if (ksft_cli_number(val, false, 0, BULK_TIMEOUT - BULK_MARGIN, &v))
			return bench_bad(prog, name, range, val);
		o->bulk_budget = (int)v;
		break;
	case OPT_FLIGHT:
		if (ksft_cli_number(val, false, 1, 100000, &v))
			return bench_bad(prog, name, "1..100000", val);
		o->flight = (int)v;
		break;
	case OPT_READ_SIZE:
		if (ksft_cli_number(val, true, 1, 65536, &v))
			return bench_bad(prog, name, "1..64K", val);
		o->read_size = (int)v;
		break;
	case OPT_NO_BULK:
		o->bulk = false;
		break;
	case OPT_NO_DRAIN:
		o->drain = false;
		break;
	}
	return 0;
}

/*
 * Take our options out of argv (into rest, argv[0] kept): 0, or -1
 * after saying what was wrong.
 */
static int bench_parse(int argc, char **argv, char **rest, int *nrest)
{
	const char *inl, *val;
	int i, j, opt;

	*nrest = 0;
	rest[(*nrest)++] = argv[0];
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--")) {
			while (i < argc)
				rest[(*nrest)++] = argv[i++];
			break;
		}
		for (j = 0; j < (int)ARRAY_SIZE(cli_with_arg); j++)
			if (!strcmp(argv[i], cli_with_arg[j]))
				break;
		if (j < (int)ARRAY_SIZE(cli_with_arg)) {
			rest[(*nrest)++] = argv[i];
			if (i + 1 < argc)
				rest[(*nrest)++] = argv[++i];
			continue;
		}
		opt = bench_option(argv[i], &inl);
		if (opt < 0) {
			rest[(*nrest)++] = argv[i];
			continue;
		}
		val = inl;
		if (bench_options[opt].arg && !val) {
			if (i + 1 == argc) {
				fprintf(stderr, "%s: %s wants a value\n", argv[0], argv[i]);
				return -1;
			}
			val = argv[++i];
		}
		if (bench_set(argv[0], opt, val))
			return -1;
	}
	rest[*nrest] = NULL;
	if (!bench_opts.bulk && !bench_opts.drain) {
		fprintf(stderr, "%s: --no-bulk and --no-drain leave nothing to do\n", argv[0]);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	char **rest = calloc((size_t)argc + 1, sizeof(*rest));
	int nrest;

	if (!rest || bench_parse(argc, argv, rest, &nrest))
		return 2;
	return ksft_cli_main(nrest, rest,
			     "Receive goodput and backlog drain time with TCP backlog coalescing\n"
			     "on and off (net.ipv4.tcp_backlog_coalesce), runs alternating. Needs\n"
			     "root: each test runs in a network namespace of its own with a tap\n"
			     "device and touches nothing else. IPv4 only. Tests: bench.bulk\n"
			     "(goodput, the receive path steered to the reader's CPU), bench.drain (backlog drain time); each sets up its own\n"
			     "connection and warms it up with a transfer of --bulk-bytes.\n\n"
			     "  -r, --reps N        runs per mode (default 5)\n"
			     "  -b, --bulk-bytes N  bytes per bulk run, K and M suffixes (default 1M)\n"
			     "  -d, --drain N,...   segments held per drain (default 0,100,1000);\n"
			     "                      0 times the release alone. Capped by the window\n"
			     "  -s, --rcvbuf N      SO_RCVBUF of the receiver (default 4M; 0: the\n"
			     "                      kernel's autotuning)\n"
			     "      --bulk-budget S seconds bench.bulk takes runs for (default and\n"
			     "                      most: its deadline less a margin); runs that\n"
			     "                      do not fit make it inconclusive: too slow here\n"
			     "      --flight N      segments the sender keeps unacknowledged at\n"
			     "                      most (default 512), under the kernel's\n"
			     "                      netdev_max_backlog (1000), so that the queue RPS\n"
			     "                      fills for the receiver's CPU never overflows\n"
			     "      --read-size N   bytes each recv() of the reader asks for (default\n"
			     "                      and most 64K)\n"
			     "      --no-bulk       skip bench.bulk\n"
			     "      --no-drain      skip bench.drain\n\n"
			     "Figures: '# kgate-measure NAME VALUE UNITS' lines, medians with _min,\n"
			     "_max, _q1 and _q3 (quartiles); the ratios are on/off goodput and\n"
			     "off/on drain time, per pair of runs. Without the sysctl (a kernel without the kgate patch)\n"
			     "only the 'on' figures are measured.\n",
			     NULL);
}
