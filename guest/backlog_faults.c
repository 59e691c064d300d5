// SPDX-License-Identifier: GPL-2.0
/*
 * kgate's test-the-test hooks for backlog_coalesce. Linked into the
 * native backlog_coalesce_faults only: never into a guest's programs,
 * never into the selftest patch. Each hook wraps a function the test
 * calls in another file, at link time (ld --wrap=SYMBOL sends the
 * test's calls of SYMBOL to __wrap_SYMBOL, which calls __real_SYMBOL),
 * so the test's own sources carry no trace of them. The wrapped
 * symbols are listed in suites/backlog.yaml beside this file.
 *
 * KGATE_FAULT= one of
 *   write:N   the Nth write to a tun/tap device is one byte short
 *   eagain:N  every try of the Nth device write fails with EAGAIN
 *   gap:N     the Nth device write's TCP sequence number one on: its
 *             bytes sit past a hole and are never readable
 *   nstat:N   the Nth counter read fails
 *   coalesce  every TCPBacklogCoalesce read is 0
 *   hphits    every TCPHPHits read is 0
 *   hold      the held receiver's page fault never arrives
 *   release   the page fault is never resolved (the receiver stays held)
 * N counts from 1 in the process. Anything else in KGATE_FAULT: one
 * line on stderr and exit 2, before main().
 */
#include <errno.h>
#include <limits.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "backlog_peer.h"
#include "backlog_pkt.h"
#include "backlog_faults.h"

static const char * const fault_counted[] = { "write", "eagain", "gap", "nstat", NULL };
static const char * const fault_plain[] = { "coalesce", "hphits", "hold", "release", NULL };

static const char *fault;	/* KGATE_FAULT, NULL when unset */

/* N of "what:N" in f: 1..INT_MAX, or -1 (not a number, out of range). */
static long fault_count(const char *f, size_t n)
{
	char *end;
	long v;

	if (f[n] != ':' || f[n + 1] < '0' || f[n + 1] > '9')
		return -1;
	errno = 0;
	v = strtol(f + n + 1, &end, 10);
	return errno || *end || v < 1 || v > INT_MAX ? -1 : v;
}

/* N when the fault is "what:N", else 0. */
static long counted(const char *what)
{
	size_t n = strlen(what);

	if (!fault || strncmp(fault, what, n))
		return 0;
	return fault_count(fault, n) > 0 ? fault_count(fault, n) : 0;
}

static bool plain(const char *what)
{
	return fault && !strcmp(fault, what);
}

__attribute__((constructor)) static void fault_check(void)
{
	const char * const *h;

	fault = getenv("KGATE_FAULT");
	if (!fault)
		return;
	for (h = fault_plain; *h; h++)
		if (plain(*h))
			return;
	for (h = fault_counted; *h; h++)
		if (counted(*h))
			return;
	fprintf(stderr,
		"KGATE_FAULT: '%s' is no fault: write:N, eagain:N, gap:N, nstat:N (N from 1 to %d), coalesce, hphits, hold or release\n",
		fault, INT_MAX);
	exit(2);
}

/* Whether fd is a tun/tap device, and which. */
static bool is_dev(int fd, bool *tap)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	if (ioctl(fd, TUNGETIFF, &ifr))
		return false;
	*tap = ifr.ifr_flags & IFF_TAP;
	return true;
}

/* One's complement checksum c with the 16-bit word old replaced by new. */
static uint16_t csum_replace(uint16_t c, uint16_t old, uint16_t new)
{
	uint32_t s = (uint16_t)~c + (uint16_t)~old + new;

	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return ~s;
}

/* Write the frame with its TCP sequence number one on. */
static ssize_t write_gapped(int fd, const uint8_t *frame, size_t n, bool tap)
{
	uint8_t copy[PEER_ETH_HLEN + PEER_FRAME_MAX];
	size_t ip = tap ? PEER_ETH_HLEN : 0, tcp;
	uint32_t seq;
	uint8_t *t;

	if (n > sizeof(copy) || n < ip + 1)
		return __real_write(fd, frame, n);
	memcpy(copy, frame, n);
	if ((copy[ip] >> 4) == 4 && copy[ip + 9] == IPPROTO_TCP)
		tcp = ip + (copy[ip] & 0xf) * 4;
	else if ((copy[ip] >> 4) == 6 && copy[ip + 6] == IPPROTO_TCP)
		tcp = ip + 40;
	else
		return __real_write(fd, frame, n);
	if (tcp + 20 > n)
		return __real_write(fd, frame, n);
	t = copy + tcp;
	seq = pkt_get32(t + 4);
	pkt_put32(t + 4, seq + 1);
	pkt_put16(t + 16, csum_replace(pkt_get16(t + 16), seq >> 16, (seq + 1) >> 16));
	pkt_put16(t + 16, csum_replace(pkt_get16(t + 16), seq & 0xffff, (seq + 1) & 0xffff));
	return __real_write(fd, copy, n);
}

ssize_t __wrap_write(int fd, const void *buf, size_t n)
{
	/* The write eagain:N refuses, retried with the same buffer. */
	static const void *stuck;
	static size_t stuck_n;
	static long writes;
	bool tap;

	if (!fault || !is_dev(fd, &tap))
		return __real_write(fd, buf, n);
	if (stuck && buf == stuck && n == stuck_n) {
		errno = EAGAIN;
		return -1;
	}
	writes++;
	if (counted("eagain") == writes) {
		stuck = buf;
		stuck_n = n;
		errno = EAGAIN;
		return -1;
	}
	if (counted("write") == writes)
		return __real_write(fd, buf, n - 1);
	if (counted("gap") == writes)
		return write_gapped(fd, buf, n, tap);
	return __real_write(fd, buf, n);
}

int __wrap_nstat_read(struct nstat *n)
{
	static long reads;

	if (counted("nstat") == ++reads) {
		memset(n, 0, sizeof(*n));
		return -1;
	}
	if (__real_nstat_read(n))
		return -1;
	if (plain("coalesce"))
		n->v[NS_COALESCE] = 0;
	if (plain("hphits"))
		n->v[NS_HPHITS] = 0;
	return 0;
}

int __wrap_uffd_wait(struct uffd_hold *h, int ms)
{
	if (plain("hold")) {
		usleep(ms > 200 ? 200000 : ms * 1000);
		return 0;
	}
	return __real_uffd_wait(h, ms);
}

int __wrap_uffd_resolve(struct uffd_hold *h)
{
	return plain("release") ? 0 : __real_uffd_resolve(h);
}
