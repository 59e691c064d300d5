/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the kgate guest programs share: deadlines, KTAP diagnostics, the
 * test stream's byte pattern, the TcpExt counters of the current network
 * namespace, the net.ipv4.tcp_backlog_coalesce sysctl, and holding a
 * socket owned with userfaultfd.
 *
 * The hold: a thread's recv() into a fresh page registered with
 * userfaultfd faults while the kernel copies with the socket owned, so
 * the thread sleeps holding the socket lock; segments that arrive then
 * go through tcp_add_backlog(). uffd_resolve() lets the copy finish and
 * release_sock() processes the backlog.
 */
#ifndef KGATE_HARNESS_H
#define KGATE_HARNESS_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

#define KSFT_PASS	0
#define KSFT_FAIL	1
#define KSFT_SKIP	4

struct counters {
	long long coalesce;	/* TCPBacklogCoalesce */
	long long drop;		/* TCPBacklogDrop */
	long long hphits;	/* TCPHPHits */
};

struct uffd_hold {
	int fd;
	uint8_t *page;
	long pagesz;
};

/* A KTAP diagnostic line ("# ..."), flushed. */
void diag(const char *fmt, ...);

/* The byte at offset off of every test stream. */
uint8_t stream_byte(uint32_t off);

void now(struct timespec *ts);
void deadline_in(struct timespec *ts, int ms);
int ms_left(const struct timespec *deadline);
/* Microseconds from a to b. */
double elapsed_us(const struct timespec *a, const struct timespec *b);

int write_file(const char *path, const char *val);

/* TcpExt counters of the calling thread's network namespace; 0 or -1. */
int read_counters(struct counters *c);

/* Whether the kgate sysctl exists (said in a diagnostic); set it. */
bool has_sysctl(void);
int set_coalesce(int on);

int uffd_open(struct uffd_hold *h);
/* Map a fresh page and register it: the next copy into it faults. */
int uffd_arm(struct uffd_hold *h);
/* Wait up to ms for the fault: 1 when it came, 0 on timeout, -1. */
int uffd_wait(struct uffd_hold *h, int ms);
/* Map a zero page at the faulting address: the copy goes on. */
void uffd_resolve(struct uffd_hold *h);

#endif /* KGATE_HARNESS_H */
