// SPDX-License-Identifier: GPL-2.0
/*
 * The guest's backlog_coalesce: the selftest backlog_coalesce.c as it
 * goes upstream, with ksft_cli.h's command line over 6.1's harness
 * (--list, --case, --family, --mode, --repeat, --timeout, --ptest).
 */
#include "ksft_cli.h"

#define main backlog_coalesce_selftest_main
#include "backlog_coalesce.c"
#undef main

#include "ksft_cli.h"

int main(int argc, char **argv)
{
	return ksft_cli_main(argc, argv,
			     "Deterministic test of every rule of TCP backlog coalescing\n"
			     "(tcp_add_backlog()). Needs root: each test runs in a network\n"
			     "namespace of its own and touches nothing else. Tests are\n"
			     "backlog.<variant>.<case>; the variants ipv4 and ipv6 hold the\n"
			     "socket with merging on, ipv4_off/ipv6_off hold it with\n"
			     "net.ipv4.tcp_backlog_coalesce=0, ipv4_ctl/ipv6_ctl send the same\n"
			     "segments without a hold. The cases are listed in the header of\n"
			     "backlog_coalesce.c and in kgate's README.\n",
			     &case_ms);
}
