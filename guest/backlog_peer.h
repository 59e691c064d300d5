/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The remote TCP peer that the backlog tests play, and what they share.
 *
 * A test enters a network namespace of its own, creates a tun or tap
 * device there (198.18.0.1 and 2001:2::1 for the kernel under test, the
 * peer 198.18.0.2 and 2001:2::2; both benchmarking ranges) and plays
 * the remote end of a TCP connection itself: it writes crafted segments
 * into the device and reads the kernel's replies from it.
 *
 *  - peer_dev_*: the device. tun gives linear skbs from kmalloc(), which
 *    merge only by copying into spare tailroom; tap, written
 *    non-blocking, builds skbs around page fragments as a NIC driver's
 *    build_skb() does, which merge by attaching fragments.
 *  - peer_conn_*: one connection: the handshake, segments out, the
 *    kernel's segments in. Every write must be whole.
 *  - nstat_*: the namespace's SNMP and TcpExt counters.
 *  - uffd_*: holding a socket owned. A thread's recv() into a fresh page
 *    registered with userfaultfd faults while the kernel copies with
 *    the socket owned, so the thread sleeps holding the socket lock;
 *    segments that arrive then go through tcp_add_backlog().
 *    uffd_resolve() lets the copy finish and release_sock() processes
 *    the backlog.
 */
#ifndef BACKLOG_PEER_H
#define BACKLOG_PEER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "backlog_pkt.h"

#define PEER_LOCAL4	0xc6120001u	/* 198.18.0.1: the kernel under test */
#define PEER_REMOTE4	0xc6120002u	/* 198.18.0.2: played by the test */
#define PEER_ETH_HLEN	14
#define PEER_FRAME_MAX	2048

extern const uint8_t peer_local6[16];	/* 2001:2::1 */
extern const uint8_t peer_remote6[16];	/* 2001:2::2 */

/* A KTAP diagnostic line ("# ..."), flushed. */
void diag(const char *fmt, ...);

/* The byte at offset off of every test stream. */
uint8_t stream_byte(uint32_t off);

void now(struct timespec *ts);
void deadline_in(struct timespec *ts, int ms);
int ms_left(const struct timespec *deadline);
/* Microseconds from a to b. */
double elapsed_us(const struct timespec *a, const struct timespec *b);

/*
 * How long a call may keep failing with EAGAIN or EINTR (a write into
 * the device) before its caller gives up.
 */
#define PEER_RETRY_MS	5000

/*
 * The deadline of a loop that retries a call failing with EAGAIN or
 * EINTR: *dl is { 0, 0 } until the first failure, which sets it
 * PEER_RETRY_MS ahead, so that no clock is read while calls succeed.
 * True while the loop may retry; false, with errno ETIMEDOUT, once the
 * deadline has passed.
 */
bool peer_retry(struct timespec *dl);

/*
 * Join thread within ms: 0, ETIMEDOUT when it had not returned by then
 * (it may still be running: what it writes must outlive the caller),
 * or another error number.
 */
int peer_join(pthread_t thread, int ms);

/* Write val to a file (a sysctl): 0 when all of it was written. */
int write_file(const char *path, const char *val);

/*
 * A new network namespace for the calling process, before any thread
 * exists: counters and sysctls are per namespace. Loopback comes up.
 */
int peer_netns(void);

/* Whether net.ipv4.tcp_backlog_coalesce exists; set it (0 or -1). */
bool has_sysctl(void);
int set_coalesce(int on);

struct peer_dev {
	int fd;
	bool tap;
	bool v6;		/* 2001:2::1/64 configured */
	uint8_t mac[6];		/* the device's own, for tap frames */
	uint16_t ip_id;
};

/*
 * Create the device in the current namespace: IPv4 always, IPv6 when
 * v6 (without DAD), link up, non-blocking. For tap, a permanent
 * neighbour entry for the peer. On failure -1 and why says what.
 */
int peer_dev_open(struct peer_dev *d, const char *name, bool tap, bool v6,
		  char *why, size_t cap);
void peer_dev_close(struct peer_dev *d);
/*
 * Write one IP packet (in a frame for tap), retrying EAGAIN for up to
 * PEER_RETRY_MS: 0 only when the whole packet went in, else -1 with
 * errno (ETIMEDOUT: the device kept refusing it).
 */
int peer_dev_write(struct peer_dev *d, const uint8_t *pkt, size_t len);
/*
 * Read one IP packet within ms: its length, 0 on timeout, -1. Frames
 * that are not IP or too big are skipped, the deadline checked after
 * each; with ms 0, a packet already queued is still read.
 */
ssize_t peer_dev_read(struct peer_dev *d, uint8_t *buf, size_t cap, int ms);

/* A listening TCP socket on the kernel's address, non-blocking. */
int peer_listen(bool v6, uint16_t port, int rcvbuf);

struct peer_conn {
	struct peer_dev *dev;
	bool v6;
	uint16_t lport;		/* the kernel's (listening) port */
	uint16_t pport;		/* the peer's */
	uint32_t iss;		/* the peer's initial sequence number */
	uint32_t irs;		/* the kernel's */
	uint16_t window;	/* what the peer advertises */
	uint8_t wscale;		/* the kernel's window scale, 0 if none */
	uint32_t ack;		/* what the peer's segments acknowledge */
	uint32_t snd_nxt;	/* end of what the kernel sent, seen by the peer */
	uint32_t last_ack;	/* highest ACK the kernel sent */
	bool acked_any;
	int fd;			/* the accepted socket */
};

/*
 * Handshake from pport to the listener lfd on port lport, offering
 * the SYN options given (none: only what the test wants negotiated).
 * 0, or -1 with why.
 */
int peer_conn_open(struct peer_conn *c, struct peer_dev *d, int lfd, bool v6,
		   uint16_t lport, uint16_t pport, const uint8_t *synopt,
		   size_t optlen, int ms, char *why, size_t cap);
/* RST the accepted socket (SO_LINGER 0) and forget what is queued. */
void peer_conn_close(struct peer_conn *c);

/*
 * Send one segment: addresses, ports, ip_id and (when s->ack is 0) the
 * connection's ack are filled in; the rest comes from s. corrupt
 * flips a payload byte after the checksum was computed. 0 when the
 * whole packet was written.
 */
int peer_conn_send(struct peer_conn *c, struct pkt_tcp *s, bool corrupt);

/*
 * The kernel's next segment on this connection within ms: 1 with *s
 * filled (data pointing into buf), 0 on timeout, -1. ACKs move
 * last_ack, data moves snd_nxt. Other flows' packets are skipped, the
 * deadline checked after each.
 */
int peer_conn_recv(struct peer_conn *c, struct pkt_tcp *s, uint8_t *buf,
		   size_t cap, int ms);
/*
 * Read and account whatever the kernel sent, waiting up to ms for each
 * next segment (0: what is queued), PEER_DRAIN_MS in all at most.
 */
#define PEER_DRAIN_MS	1000
void peer_conn_drain(struct peer_conn *c, int ms);

/*
 * The barrier: a SYN from the peer's address to a port nobody listens
 * on, which the kernel answers with a RST when it processes it. Where
 * the test would wait "long enough" for what may never come, it sets a
 * barrier and looks.
 *
 * Sound because tun_get_user() hands each packet written to
 * netif_receive_skb() and the stack processes it before write()
 * returns, in write order (no IFF_NAPI, no CONFIG_4KSTACKS, no RPS map
 * on the device): once the RST is read, every segment written before
 * the SYN has been processed and what the kernel sent meanwhile was
 * read; c's segments among it are accounted as peer_conn_recv() does
 * (an ACK the kernel delays is not among them). Under RPS or NAPI the
 * SYN, another flow, could overtake them: peer_barrier_sound() says
 * whether new devices get an RPS map. While c's socket is owned, the
 * answer only says its segments reached the backlog.
 *
 * 1 when answered, 0 on timeout (ms), -1 with errno.
 */
#define PEER_BARRIER_LPORT	9	/* discard: nothing listens there */
#define PEER_BARRIER_PPORT	39999
int peer_conn_barrier(struct peer_conn *c, int ms);
/* False, with why, when new devices get an RPS map (rps_default_mask). */
bool peer_barrier_sound(char *why, size_t cap);

/* The counters the tests read, from /proc/net/{netstat,snmp}. */
enum nstat_id {
	NS_COALESCE,		/* TcpExt TCPBacklogCoalesce */
	NS_BACKLOGDROP,		/* TcpExt TCPBacklogDrop */
	NS_HPHITS,		/* TcpExt TCPHPHits */
	NS_SYNCHALLENGE,	/* TcpExt TCPSYNChallenge */
	NS_CSUMERRORS,		/* Tcp InCsumErrors */
	NS_COUNT
};

struct nstat {
	long long v[NS_COUNT];
};

extern const char * const nstat_names[NS_COUNT];

/* Read every counter: 0, or -1 when one could not be read. */
int nstat_read(struct nstat *n);

struct uffd_hold {
	int fd;
	uint8_t *page;
	uint8_t *zero;		/* a page of zeros: what resolving copies */
	long pagesz;		/* the kernel's page size, whatever it is */
};

/* 0, or -1 with errno; h can be closed either way. */
int uffd_open(struct uffd_hold *h);
void uffd_close(struct uffd_hold *h);
/* Map a fresh page and register it: the next copy into it faults. */
int uffd_arm(struct uffd_hold *h);
/* Wait up to ms for the fault: 1 when it came, 0 on timeout, -1. */
int uffd_wait(struct uffd_hold *h, int ms);
/*
 * Copy a page of zeros to the faulting address: the copy goes on.
 * 0, or -1 with errno.
 */
int uffd_resolve(struct uffd_hold *h);
/*
 * Join a thread that may be held in a fault on h's page within ms
 * (once it was resolved or the thread was otherwise woken): 0 when it
 * returned. One that has not is let go by closing h (its fault fails)
 * and joined for up to ms more; -1 then, with errno ETIMEDOUT, and h
 * closed.
 */
int uffd_join(struct uffd_hold *h, pthread_t thread, int ms);

/*
 * The link-layer header of a packet the peer writes into d, into buf:
 * for tap an Ethernet header to the device's address from the peer's,
 * of type proto (ETH_P_IP, ETH_P_IPV6), PEER_ETH_HLEN bytes; for tun
 * nothing. Returns its length. For writing a packet from pieces
 * (writev()) rather than through peer_dev_write().
 */
size_t peer_dev_hdr(const struct peer_dev *d, uint8_t *buf, uint16_t proto);

#endif /* BACKLOG_PEER_H */
