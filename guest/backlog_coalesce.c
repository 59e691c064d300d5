// SPDX-License-Identifier: GPL-2.0
/*
 * Every rule of TCP backlog coalescing (tcp_add_backlog()), for IPv4 and
 * IPv6, on connections whose remote end the test plays itself through
 * a tun device in a network namespace of its own (see backlog_peer.h).
 *
 * Segments are put into the socket backlog deterministically: a
 * receiver thread calls recv() for one byte into a page registered with
 * userfaultfd, the kernel faults while copying with the socket owned,
 * and the thread sleeps holding the socket lock. The userfaultfd event
 * tells the moment; the segments written then go through
 * tcp_add_backlog(), the fault is resolved, and release_sock()
 * processes the backlog. The one-byte read matters: the backlog is then
 * processed by release_sock(), where a merged data skb takes the header
 * prediction fast path, which is where a FIN known only to the control
 * block was lost in Linux 5.0.
 *
 * Each case injects two segments A and B (the flood: 1000) and checks
 * what the kernel decided (TCPBacklogCoalesce, read while the socket is
 * held) and what the application sees. Variants:
 *   ipv4, ipv6          held socket, merging on
 *   ipv4_off, ipv6_off  held socket, net.ipv4.tcp_backlog_coalesce=0:
 *                       nothing may merge (SKIP without the sysctl)
 *   ipv4_ctl, ipv6_ctl  control: the same segments, no hold, no backlog
 * The application must see the same thing in every variant.
 *
 * Cases (B follows A in sequence unless said otherwise):
 *   data_data    merge; the merged skb takes the fast path; all bytes
 *   data_psh     PSH on B only: merge; all bytes
 *   data_fin     FIN on B: merge; FIN carried into the merged header
 *                (the merged skb misses the fast path that the same pair
 *                without FIN took) and flags; EOF, CLOSE_WAIT, FIN acked
 *   data_rst     RST at B's sequence: no merge; ECONNRESET
 *   data_synack  SYN|ACK as B: no merge; challenge ACK; later data intact
 *   data_noack   B without ACK: no merge; B's bytes never delivered
 *   noack_data   A without ACK: no merge; B delivered once A is resent
 *   data_urg     URG on B: no merge; urgent byte out of band
 *   data_ece     ECE on B: no merge; all bytes
 *   data_cwr     CWR on B: no merge; all bytes
 *   opts_data    options on A only (header lengths differ): no merge
 *   data_tsval   same option length, other bytes: no merge
 *   opts_opts    identical options: merge; all bytes
 *   data_tos     another DS field on B: no merge; all bytes
 *   data_gap     a hole before B: no merge; all bytes once it is filled
 *   data_csum    B with a bad checksum: dropped and counted
 *                (InCsumErrors), never merged; B's bytes once resent
 *   end_seq      merge; the kernel acknowledges through B's end; later
 *                data delivered
 *   ack_new      the kernel has sent data, B acknowledges it: merge;
 *                nothing left unacknowledged
 *   ack_old      A acknowledges the kernel's data, B carries an older
 *                ACK and another window: merge; A's ACK and window hold
 *   window       B advertises another window: merge; the kernel's send
 *                window is B's
 *   rx_tstamp    B 20 ms after A: merge; the merged data's receive
 *                timestamp (SO_TIMESTAMPNS) is B's
 *   flood        1000 segments of 16 bytes: merging on, no backlog drop
 *                and every byte; off, the backlog limit drops
 *                (TCPBacklogDrop) and what was acknowledged arrives
 *
 * What may never arrive (bytes, EOF, a reset) is not waited for: the
 * test sets a barrier (peer_conn_barrier()) and looks once the kernel
 * has processed every segment written. Only what must come (the
 * kernel's own ACKs and data, which it may delay) has a timeout.
 *
 * A case that did not see its evidence (the hold, a required merge, the
 * fast path where the rule depends on it, a whole write, a good counter
 * read, the barrier's answer) is skipped with a reason starting
 * "inconclusive:", never passed.
 */
#define _GNU_SOURCE
#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <linux/sock_diag.h>
#include <linux/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../kselftest_harness.h"
#include "backlog_peer.h"
#include "backlog_pkt.h"

#define DEV_NAME	"blc0"
#define LISTEN_PORT	5001
#define PEER_PORT	40000
static_assert(LISTEN_PORT != PEER_BARRIER_LPORT && PEER_PORT != PEER_BARRIER_PPORT,
	      "the barrier's ports must be nobody's");
#define PEER_WINDOW	64000
#define OTHER_WINDOW	60000
#define OLD_WINDOW	50000
#define PRIME_LEN	8	/* queued before the hold; 1 byte is read */
#define SEG_A_LEN	300	/* first backlog segment */
#define SEG_B_LEN	100	/* fits A's spare room: it can be merged */
#define GAP_LEN		50
#define LATE_LEN	50	/* sent after the release */
#define KDATA_LEN	200	/* what the kernel sends in the ACK cases */
#define TSTAMP_GAP_MS	20
#define FLOOD_SEGS	1000
#define FLOOD_LEN	16
#define STREAM_MAX	(PRIME_LEN + FLOOD_SEGS * FLOOD_LEN + 4096)
/*
 * How long to wait for what must come (bytes, an ACK, the barrier's
 * answer). What may never come is not waited for: a barrier
 * (peer_conn_barrier()) says when the kernel has processed every
 * segment written, and the test looks then.
 */
#define SETTLE_MS	2000
/* How long the held receiver may take to return once released. */
#define RELEASE_MS	5000

/* The deadline of each case; the harness kills it some time later. */
static int case_ms = 10000;

/* NOP, NOP, timestamp: 12 bytes of options. */
#define TS_OPT(v) { 1, 1, 8, 10, 0, 0, 0, (v), 0, 0, 0, 0 }
static const uint8_t ts_opt_a[12] = TS_OPT(100);
static const uint8_t ts_opt_b[12] = TS_OPT(101);

#define AB		PKT_ACK
#define AP		(PKT_ACK | PKT_PSH)
#define DATA(f, n)	{ .flags = (f), .len = (n) }

enum verdict { V_PASS, V_FAIL, V_SKIP };
enum mode { M_HOLD, M_OFF, M_CTL };
enum merge { MERGE_REQUIRED, MERGE_FORBIDDEN };

struct result {
	enum verdict v;
	char why[320];
};

struct seg {
	uint8_t flags;
	uint16_t len;
	uint8_t tos;
	const uint8_t *opt;
	uint8_t optlen;
	uint16_t gap;		/* stream bytes skipped before this segment */
	uint16_t urg;		/* urgent pointer */
	uint16_t window;	/* 0: PEER_WINDOW */
	uint16_t ack_to;	/* acknowledge this much of the kernel's data */
	bool corrupt;		/* payload changed after the checksum */
	uint16_t delay_ms;	/* wait before sending it */
};

/* Counters around the injection, and what it did. */
struct held {
	struct nstat before, during, after;
	bool held;
	unsigned int backlog;	/* sk_backlog.len after the injection */
	struct timespec b_sent;	/* CLOCK_REALTIME before B was written */
};

/* One test's device, connection and stream: the fixture's data. */
struct bl {
	struct peer_dev dev;
	struct peer_conn c;
	struct uffd_hold hold;
	int lfd;
	uint32_t sent;		/* stream bytes sent: offsets [0, sent) */
	uint32_t rd;		/* next stream offset the application reads */
	uint32_t fin_end;	/* sequence after our FIN, 0 if none */
	struct timespec deadline;
	char na[160];		/* why the case cannot run here */
};

FIXTURE(backlog)
{
	struct bl b;
};

FIXTURE_VARIANT(backlog)
{
	bool v6;
	enum mode mode;
};

FIXTURE_VARIANT_ADD(backlog, ipv4) { .v6 = false, .mode = M_HOLD };
FIXTURE_VARIANT_ADD(backlog, ipv4_off) { .v6 = false, .mode = M_OFF };
FIXTURE_VARIANT_ADD(backlog, ipv4_ctl) { .v6 = false, .mode = M_CTL };
FIXTURE_VARIANT_ADD(backlog, ipv6) { .v6 = true, .mode = M_HOLD };
FIXTURE_VARIANT_ADD(backlog, ipv6_off) { .v6 = true, .mode = M_OFF };
FIXTURE_VARIANT_ADD(backlog, ipv6_ctl) { .v6 = true, .mode = M_CTL };

struct bcase;
typedef enum verdict (*check_fn)(struct bl *self,
				 enum mode mode,
				 const struct bcase *bc, const struct held *h,
				 struct result *r);

struct bcase {
	enum merge merge;
	struct seg segs[2];
	int nsegs;		/* 0: the flood */
	check_fn check;
	bool fast_path;		/* the merged skb must take the fast path */
	bool fin_evidence;	/* first show that a merged pair takes it */
	bool kdata;		/* the kernel sends data first */
	bool tstamp;		/* SO_TIMESTAMPNS on the socket */
};

static enum verdict set_result(struct result *r, enum verdict v,
			       const char *fmt, ...)
{
	va_list ap;

	r->v = v;
	va_start(ap, fmt);
	vsnprintf(r->why, sizeof(r->why), fmt, ap);
	va_end(ap);
	return v;
}

static int capped_ms(struct bl *self, int cap)
{
	int left = ms_left(&self->deadline);

	return left < cap ? left : cap;
}

FIXTURE_SETUP(backlog)
{
	struct bl *b = &self->b;
	char why[160];

	deadline_in(&b->deadline, case_ms);
	b->dev.fd = -1;
	b->lfd = -1;
	b->c.fd = -1;
	b->hold.fd = -1;
	ASSERT_EQ(0, peer_netns())
		TH_LOG("unshare(CLONE_NEWNET): %s (needs root)", strerror(errno));
	/* The backlog limit follows the buffers: the defaults, whatever the host's. */
	ASSERT_EQ(0, write_file("/proc/sys/net/ipv4/tcp_rmem", "4096 131072 6291456"));
	ASSERT_EQ(0, write_file("/proc/sys/net/ipv4/tcp_wmem", "4096 16384 4194304"));
	if (!peer_barrier_sound(b->na, sizeof(b->na)))
		return;
	if (variant->mode == M_OFF && !has_sysctl()) {
		snprintf(b->na, sizeof(b->na),
			 "no net.ipv4.tcp_backlog_coalesce: merging cannot be turned off");
		return;
	}
	if (variant->mode == M_OFF)
		ASSERT_EQ(0, set_coalesce(0))
			TH_LOG("setting tcp_backlog_coalesce: %s", strerror(errno));
	if (peer_dev_open(&b->dev, DEV_NAME, false, variant->v6, why, sizeof(why))) {
		/* A kernel without IPv6 cannot run the IPv6 variants. */
		if (variant->v6 && strstr(why, "no IPv6")) {
			snprintf(b->na, sizeof(b->na), "%s", why);
			return;
		}
		ASSERT_TRUE(false) TH_LOG("%s", why);
	}
	b->lfd = peer_listen(variant->v6, LISTEN_PORT, 0);
	ASSERT_LE(0, b->lfd) TH_LOG("listening socket: %s", strerror(errno));
	ASSERT_EQ(0, uffd_open(&b->hold)) TH_LOG("userfaultfd: %s", strerror(errno));
	/* Only MSS offered: no timestamps, no window scaling, no SACK. */
	b->c.window = PEER_WINDOW;
	{
		const uint16_t mss = variant->v6 ? 1440 : 1460;
		const uint8_t mss_opt[4] = { 2, 4, mss >> 8, mss & 0xff };

		ASSERT_EQ(0, peer_conn_open(&b->c, &b->dev, b->lfd, variant->v6,
					    LISTEN_PORT, PEER_PORT, mss_opt, sizeof(mss_opt),
					    ms_left(&b->deadline), why, sizeof(why)))
			TH_LOG("%s", why);
	}
}

FIXTURE_TEARDOWN(backlog)
{
	struct bl *b = &self->b;

	peer_conn_close(&b->c);
	uffd_close(&b->hold);
	if (b->lfd >= 0)
		close(b->lfd);
	peer_dev_close(&b->dev);
}

/* Send a segment of the test stream at stream offset off. */
static int send_at(struct bl *self, uint32_t off, const struct seg *sg)
{
	uint8_t data[2048];
	struct pkt_tcp s = {
		.seq = self->c.iss + 1 + off, .flags = sg->flags,
		.window = sg->window ? sg->window : PEER_WINDOW,
		.urg_ptr = sg->urg, .tos = sg->tos,
		.opt = sg->opt, .optlen = sg->optlen,
		.data = data, .len = sg->len,
		.ack = sg->ack_to ? self->c.irs + 1 + sg->ack_to : 0,
	};
	uint32_t i;

	if (sg->len > sizeof(data)) {
		errno = EMSGSIZE;
		return -1;
	}
	for (i = 0; i < sg->len; i++)
		data[i] = stream_byte(off + i);
	if (peer_conn_send(&self->c, &s, sg->corrupt))
		return -1;
	if (!(sg->flags & (PKT_SYN | PKT_RST)) && !sg->corrupt &&
	    off + sg->len > self->sent)
		self->sent = off + sg->len;
	if (sg->flags & PKT_FIN)
		self->fin_end = s.seq + sg->len + 1;
	return 0;
}

/* Send the next segment of the stream (after sg->gap skipped bytes). */
static int send_next(struct bl *self, const struct seg *sg)
{
	return send_at(self, self->sent + sg->gap, sg);
}

static int inject(struct bl *self, const struct bcase *bc,
		  struct held *h)
{
	const struct seg flood = { .flags = PKT_ACK, .len = FLOOD_LEN };
	int i, n = bc->nsegs ? bc->nsegs : FLOOD_SEGS;

	for (i = 0; i < n; i++) {
		const struct seg *sg = bc->nsegs ? &bc->segs[i] : &flood;

		if (sg->delay_ms)
			usleep(sg->delay_ms * 1000);
		if (i == 1)
			clock_gettime(CLOCK_REALTIME, &h->b_sent);
		if (send_next(self, sg))
			return -1;
	}
	return 0;
}

struct receiver {
	pthread_t thread;
	int fd;
	uint8_t *buf;
	ssize_t ret;
	int err;
};

/*
 * Bytes queued in the socket's backlog (SO_MEMINFO reads it without
 * taking the socket lock, so it works while the socket is held).
 */
static int backlog_len(int fd, unsigned int *len)
{
	uint32_t mem[SK_MEMINFO_VARS];
	socklen_t n = sizeof(mem);

	if (getsockopt(fd, SOL_SOCKET, SO_MEMINFO, mem, &n) || n <= SK_MEMINFO_BACKLOG * 4)
		return -1;
	*len = mem[SK_MEMINFO_BACKLOG];
	return 0;
}

static void *receiver_main(void *arg)
{
	struct receiver *rx = arg;
	sigset_t set;

	/* A signal pending here would turn the fault into EFAULT. */
	sigfillset(&set);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	/* One byte: the backlog is then processed by release_sock(). */
	rx->ret = recv(rx->fd, rx->buf, 1, 0);
	rx->err = rx->ret < 0 ? errno : 0;
	return NULL;
}

/* Readable now. */
static bool readable(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	return poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN);
}

/*
 * Every segment written so far has been processed: the kernel answered
 * the barrier. Else r is inconclusive and false.
 */
static bool settle(struct bl *self, struct result *r)
{
	int rc = peer_conn_barrier(&self->c, capped_ms(self, SETTLE_MS));

	if (rc == 1)
		return true;
	set_result(r, V_SKIP, "inconclusive: the kernel did not answer the barrier segment (%s)",
		   rc ? strerror(errno) : "timeout");
	return false;
}

/*
 * Queue PRIME_LEN stream bytes, then inject the case's segments: in the
 * hold modes while a 1-byte recv() holds the socket, without a hold in
 * control mode. V_PASS when all of it ran and every counter was read.
 */
static enum verdict run_segs(struct bl *self, enum mode mode,
			     const struct bcase *bc, struct held *h,
			     struct result *r)
{
	struct seg prime = { .flags = PKT_ACK | PKT_PSH, .len = PRIME_LEN };
	/* Static: a receiver that could not be joined may write it later. */
	static struct receiver rx;
	uint32_t start = self->sent;
	int rc, bad = 0, werr = 0, rel;

	memset(h, 0, sizeof(*h));
	memset(&rx, 0, sizeof(rx));
	rx.fd = self->c.fd;
	if (send_next(self, &prime))
		return set_result(r, V_SKIP, "inconclusive: writing to tun: %s", strerror(errno));
	peer_conn_drain(&self->c, 0);
	if (mode == M_CTL) {
		bad |= nstat_read(&h->before);
		if (inject(self, bc, h))
			return set_result(r, V_SKIP, "inconclusive: writing to tun: %s",
					  strerror(errno));
		bad |= nstat_read(&h->during);
		h->after = h->during;
		if (bad)
			return set_result(r, V_SKIP, "inconclusive: a counter read failed");
		return V_PASS;
	}

	/*
	 * The receiver faults only when it has data to copy: in-order bytes
	 * the kernel does not make readable are its failure, not a hold
	 * that went wrong.
	 */
	if (!readable(self->c.fd) && !settle(self, r))
		return r->v;
	if (!readable(self->c.fd))
		return set_result(r, V_FAIL,
				  "%d in-order bytes at offset %u never became readable (the kernel acknowledged to offset %u)",
				  PRIME_LEN, start, self->c.last_ack - self->c.iss - 1);
	if (uffd_arm(&self->hold))
		return set_result(r, V_FAIL, "userfaultfd page: %s", strerror(errno));
	rx.buf = self->hold.page;
	if (pthread_create(&rx.thread, NULL, receiver_main, &rx))
		return set_result(r, V_FAIL, "pthread_create failed");
	rc = uffd_wait(&self->hold, ms_left(&self->deadline));
	h->held = rc == 1;
	if (h->held) {
		bad |= nstat_read(&h->before);
		if (inject(self, bc, h))
			werr = errno;
		bad |= nstat_read(&h->during);
		bad |= backlog_len(self->c.fd, &h->backlog);
	}
	rel = uffd_resolve(&self->hold) ? errno : 0;
	if (rel)
		uffd_close(&self->hold);	/* its fault fails: the receiver returns */
	if (!h->held)
		shutdown(self->c.fd, SHUT_RD);	/* wake a receiver that never faulted */
	if (uffd_join(&self->hold, rx.thread, RELEASE_MS))
		return set_result(r, V_FAIL,
				  "the held recv() did not return within %d ms of its release",
				  RELEASE_MS);
	bad |= nstat_read(&h->after);
	if (!h->held)
		return set_result(r, V_SKIP,
				  "inconclusive: the receiver never faulted on the userfaultfd page, so the socket was not held");
	if (rel)
		return set_result(r, V_FAIL, "releasing the held recv(): UFFDIO_COPY: %s",
				  strerror(rel));
	if (werr)
		return set_result(r, V_SKIP, "inconclusive: writing to tun while held: %s",
				  strerror(werr));
	if (bad)
		return set_result(r, V_SKIP, "inconclusive: a counter read failed");
	if (!h->backlog)
		return set_result(r, V_SKIP,
				  "inconclusive: the socket was held, yet its backlog stayed empty");
	if (rx.ret != 1 || self->hold.page[0] != stream_byte(start))
		return set_result(r, V_FAIL,
				  "held recv() returned %zd (%s), byte 0x%02x, expected 1 byte 0x%02x",
				  rx.ret, rx.ret < 0 ? strerror(rx.err) : "ok",
				  self->hold.page[0], stream_byte(start));
	self->rd = start + 1;
	return V_PASS;
}

/*
 * Read what the application can read of the stream now, without
 * waiting, up to want bytes. Returns bytes read; *err is 0, -1 for EOF,
 * an errno, or ETIMEDOUT when nothing more was there; *bad is the first
 * offset whose byte was wrong, or -1. With ts, the last receive
 * timestamp seen (zero if none).
 */
static size_t read_stream(struct bl *self, size_t want,
			  int *err, size_t *bad, struct timespec *ts)
{
	static uint8_t buf[STREAM_MAX];
	char cbuf[CMSG_SPACE(sizeof(struct timespec)) * 2];
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;
	size_t got = 0, i;
	ssize_t n;

	*err = 0;
	*bad = (size_t)-1;
	while (got < want) {
		msg.msg_control = cbuf;
		msg.msg_controllen = sizeof(cbuf);
		n = recvmsg(self->c.fd, &msg, MSG_DONTWAIT);
		if (n == 0) {
			*err = -1;
			break;
		}
		if (n < 0) {
			*err = errno == EAGAIN ? ETIMEDOUT : errno;
			break;
		}
		for (i = 0; i < (size_t)n; i++)
			if (*bad == (size_t)-1 &&
			    buf[i] != stream_byte((uint32_t)(self->rd + i)))
				*bad = self->rd + i;
		self->rd += (uint32_t)n;
		got += (size_t)n;
		for (cm = CMSG_FIRSTHDR(&msg); ts && cm; cm = CMSG_NXTHDR(&msg, cm))
			if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_TIMESTAMPNS)
				memcpy(ts, CMSG_DATA(cm), sizeof(*ts));
	}
	return got;
}

static const char *err_name(int err)
{
	return err == -1 ? "EOF" : err ? strerror(err) : "nothing";
}

static int tcp_info_of(int fd, struct tcp_info *ti)
{
	socklen_t len = sizeof(*ti);

	memset(ti, 0, sizeof(*ti));
	return getsockopt(fd, IPPROTO_TCP, TCP_INFO, ti, &len);
}

static const char *state_name(int st)
{
	static const char * const names[] = {
		"?", "ESTABLISHED", "SYN_SENT", "SYN_RECV", "FIN_WAIT1",
		"FIN_WAIT2", "TIME_WAIT", "CLOSE", "CLOSE_WAIT", "LAST_ACK",
		"LISTEN", "CLOSING",
	};

	return st > 0 && st < (int)ARRAY_SIZE(names) ? names[st] : "?";
}

static int tcp_state(int fd)
{
	struct tcp_info ti;

	return tcp_info_of(fd, &ti) ? -1 : ti.tcpi_state;
}

#define TCP_ST_ESTABLISHED	1
#define TCP_ST_CLOSE_WAIT	8

/*
 * read_stream() without waiting for what may never come: what is
 * readable now; if that is less than want, a barrier, then what is
 * readable once every segment written has been processed (*err is
 * ETIMEDOUT when the stream simply ended there). False, with r
 * inconclusive, when the barrier went unanswered.
 */
static bool read_settled(struct bl *self, size_t want, size_t *got, int *err,
			 size_t *bad, struct timespec *ts, struct result *r)
{
	size_t more, bad2;

	*got = read_stream(self, want, err, bad, ts);
	if (*got == want || *err != ETIMEDOUT)
		return true;
	if (!settle(self, r))
		return false;
	more = read_stream(self, want - *got, err, &bad2, ts);
	if (*bad == (size_t)-1)
		*bad = bad2;
	*got += more;
	return true;
}

/* Read up to offset end of the stream: all of it must arrive, intact. */
static bool read_all_to(struct bl *self, uint32_t end,
			struct result *r, struct timespec *ts)
{
	size_t want = end - self->rd, got, bad;
	int err;

	if (!read_settled(self, want, &got, &err, &bad, ts, r))
		return false;
	if (bad != (size_t)-1) {
		set_result(r, V_FAIL, "stream corrupted at offset %zu", bad);
		return false;
	}
	if (got != want) {
		set_result(r, V_FAIL, "received %zu of %zu bytes, then %s", got, want,
			   err_name(err));
		return false;
	}
	return true;
}

/*
 * Nothing more arrives: once every segment written has been processed
 * (a barrier) the socket has nothing more to read; true if so.
 */
static bool quiet(struct bl *self, struct result *r, const char *what)
{
	size_t got, bad;
	int err;

	if (!settle(self, r))
		return false;
	got = read_stream(self, 1, &err, &bad, NULL);
	if (got) {
		set_result(r, V_FAIL, "%zu more bytes arrived: %s", got, what);
		return false;
	}
	if (err != ETIMEDOUT) {
		set_result(r, V_FAIL, "the read ended with %s", err_name(err));
		return false;
	}
	return true;
}

/*
 * Wait for the kernel to acknowledge up to stream offset end (with
 * TCP_QUICKACK, no delayed ACK). Returns the offset it acknowledged.
 */
static uint32_t acked_to(struct bl *self, uint32_t end)
{
	uint32_t base = self->c.iss + 1;
	uint8_t buf[PEER_FRAME_MAX];
	struct pkt_tcp s;
	int one = 1;

	setsockopt(self->c.fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
	while ((int32_t)(self->c.last_ack - (base + end)) < 0 &&
	       peer_conn_recv(&self->c, &s, buf, sizeof(buf), capped_ms(self, SETTLE_MS)) == 1 &&
	       ms_left(&self->deadline))
		;
	return self->c.last_ack - base;
}

/* Every byte sent arrives in order, and nothing more. */
static enum verdict check_stream(struct bl *self,
				 enum mode mode,
				 const struct bcase *bc, const struct held *h,
				 struct result *r)
{
	if (!read_all_to(self, self->sent, r, NULL) ||
	    !quiet(self, r, "beyond the stream"))
		return r->v;
	return set_result(r, V_PASS, "%u bytes in order", self->sent);
}

/* All bytes; the kernel acknowledges all of them; later data arrives. */
static enum verdict check_end_seq(struct bl *self,
				  enum mode mode,
				  const struct bcase *bc, const struct held *h,
				  struct result *r)
{
	const struct seg late = { .flags = PKT_ACK | PKT_PSH, .len = LATE_LEN };
	uint32_t acked;

	if (!read_all_to(self, self->sent, r, NULL))
		return r->v;
	acked = acked_to(self, self->sent);
	if (acked != self->sent)
		return set_result(r, V_FAIL,
				  "the kernel acknowledged the stream to offset %u, not to its end %u",
				  acked, self->sent);
	if (send_next(self, &late))
		return set_result(r, V_SKIP, "inconclusive: writing to tun: %s", strerror(errno));
	if (!read_all_to(self, self->sent, r, NULL) ||
	    !quiet(self, r, "beyond the stream"))
		return r->v;
	return set_result(r, V_PASS, "acknowledged to %u, later data in order", acked);
}

/* All bytes, then EOF; CLOSE_WAIT; the kernel acknowledged the FIN. */
static enum verdict check_fin(struct bl *self,
			      enum mode mode,
			      const struct bcase *bc, const struct held *h,
			      struct result *r)
{
	uint8_t buf[PEER_FRAME_MAX];
	struct pkt_tcp s;
	size_t got, bad;
	int err, st, one = 1;
	bool acked;

	if (!read_all_to(self, self->sent, r, NULL) ||
	    !read_settled(self, 1, &got, &err, &bad, NULL, r))
		return r->v;
	st = tcp_state(self->c.fd);
	acked = self->c.acked_any && self->c.last_ack == self->fin_end;
	/* The ACK of a FIN the kernel did see may be delayed: wait for it. */
	setsockopt(self->c.fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
	while (!got && err == -1 && !acked &&
	       peer_conn_recv(&self->c, &s, buf, sizeof(buf), capped_ms(self, SETTLE_MS)) == 1) {
		acked = self->c.last_ack == self->fin_end;
		if (!ms_left(&self->deadline))
			break;
	}
	diag("after FIN: read %s, state %s, kernel ACK iss+%u, FIN+1 is iss+%u",
	     got ? "more data" : err_name(err), state_name(st),
	     self->c.last_ack - self->c.iss, self->fin_end - self->c.iss);
	if (got || err != -1)
		return set_result(r, V_FAIL, "no EOF after the FIN (read: %s, state %s): FIN lost",
				  got ? "more data" : err_name(err), state_name(st));
	if (st != TCP_ST_CLOSE_WAIT)
		return set_result(r, V_FAIL, "state %s after EOF, expected CLOSE_WAIT",
				  state_name(st));
	if (!acked)
		return set_result(r, V_FAIL, "the kernel never acknowledged the FIN");
	return set_result(r, V_PASS, "EOF seen, CLOSE_WAIT, FIN acknowledged");
}

/* Data before the RST may be read; then ECONNRESET, nothing after. */
static enum verdict check_rst(struct bl *self,
			      enum mode mode,
			      const struct bcase *bc, const struct held *h,
			      struct result *r)
{
	size_t want = self->sent - self->rd, got, bad;
	int err, st;

	if (!read_settled(self, want + 1, &got, &err, &bad, NULL, r))
		return r->v;
	st = tcp_state(self->c.fd);
	diag("after RST: %zu bytes then %s, state %s", got, err_name(err), state_name(st));
	if (bad != (size_t)-1)
		return set_result(r, V_FAIL, "stream corrupted at offset %zu", bad);
	if (got > want)
		return set_result(r, V_FAIL, "received %zu bytes, more than the %zu sent",
				  got, want);
	if (err != ECONNRESET)
		return set_result(r, V_FAIL, "connection not reset: read ended with %s, state %s",
				  err_name(err), state_name(st));
	return set_result(r, V_PASS, "connection reset");
}

/* SYN|ACK on an established connection: challenged, survives. */
static enum verdict check_synack(struct bl *self,
				 enum mode mode,
				 const struct bcase *bc, const struct held *h,
				 struct result *r)
{
	const struct seg late = { .flags = PKT_ACK | PKT_PSH, .len = LATE_LEN };
	long long challenged = h->after.v[NS_SYNCHALLENGE] - h->before.v[NS_SYNCHALLENGE];
	int st;

	if (!read_all_to(self, self->sent, r, NULL))
		return r->v;
	st = tcp_state(self->c.fd);
	if (st != TCP_ST_ESTABLISHED)
		return set_result(r, V_FAIL,
				  "state %s after the in-window SYN, expected ESTABLISHED",
				  state_name(st));
	if (challenged != 1)
		return set_result(r, V_FAIL, "TCPSYNChallenge %+lld: the SYN was not challenged",
				  challenged);
	if (send_next(self, &late))
		return set_result(r, V_SKIP, "inconclusive: writing to tun: %s", strerror(errno));
	if (!read_all_to(self, self->sent, r, NULL) ||
	    !quiet(self, r, "beyond the stream"))
		return r->v;
	return set_result(r, V_PASS, "SYN challenged, connection alive, %u bytes in order",
			  self->sent);
}

/* The ACK-less B is discarded: its bytes never reach the reader. */
static enum verdict check_noack(struct bl *self,
				enum mode mode,
				const struct bcase *bc, const struct held *h,
				struct result *r)
{
	uint32_t end = self->sent - bc->segs[1].len;

	if (!read_all_to(self, end, r, NULL) ||
	    !quiet(self, r, "the bytes of the segment without ACK were delivered"))
		return r->v;
	return set_result(r, V_PASS, "ACK-less segment discarded, %u bytes in order", end);
}

/*
 * Out of order, a hole where a segment was dropped or skipped: nothing
 * beyond it arrives until it is filled, then everything once.
 */
static enum verdict fill_hole(struct bl *self, uint32_t hole,
			      const struct seg *fill, struct result *r)
{
	if (!read_all_to(self, hole, r, NULL) || !quiet(self, r, "across the hole"))
		return r->v;
	if (send_at(self, hole, fill))
		return set_result(r, V_SKIP, "inconclusive: writing to tun: %s", strerror(errno));
	if (!read_all_to(self, self->sent, r, NULL) ||
	    !quiet(self, r, "beyond the stream"))
		return r->v;
	return set_result(r, V_PASS, "hole at %u filled, %u bytes in order", hole,
			  self->sent);
}

/* The ACK-less A is discarded; B waits out of order until A comes. */
static enum verdict check_noack_data(struct bl *self,
				     enum mode mode,
				     const struct bcase *bc, const struct held *h,
				     struct result *r)
{
	const struct seg a = { .flags = PKT_ACK | PKT_PSH, .len = bc->segs[0].len };

	return fill_hole(self, self->sent - bc->segs[1].len - a.len, &a, r);
}

static enum verdict check_gap(struct bl *self,
			      enum mode mode,
			      const struct bcase *bc, const struct held *h,
			      struct result *r)
{
	const struct seg fill = { .flags = PKT_ACK, .len = GAP_LEN };

	return fill_hole(self, self->sent - bc->segs[1].len - GAP_LEN, &fill, r);
}

/* B's bad checksum: dropped and counted; its bytes once resent. */
static enum verdict check_csum(struct bl *self,
			       enum mode mode,
			       const struct bcase *bc, const struct held *h,
			       struct result *r)
{
	const struct seg b = { .flags = PKT_ACK | PKT_PSH, .len = bc->segs[1].len };
	long long errs = h->after.v[NS_CSUMERRORS] - h->before.v[NS_CSUMERRORS];

	if (errs != 1)
		return set_result(r, V_FAIL, "InCsumErrors %+lld, expected +1 for the bad segment",
				  errs);
	/* The application must not have seen B; self->sent stops at A. */
	return fill_hole(self, self->sent, &b, r);
}

/* Urgent byte (B's last) out of band; the rest in order. */
static enum verdict check_urg(struct bl *self,
			      enum mode mode,
			      const struct bcase *bc, const struct held *h,
			      struct result *r)
{
	uint32_t urg_off = self->sent - 1;
	uint8_t b = 0;
	ssize_t n;

	if (!read_all_to(self, urg_off, r, NULL))
		return r->v;
	n = recv(self->c.fd, &b, 1, MSG_OOB | MSG_DONTWAIT);
	if (n != 1)
		return set_result(r, V_FAIL, "no urgent byte (recv MSG_OOB: %s)",
				  n < 0 ? strerror(errno) : "0 bytes");
	if (b != stream_byte(urg_off))
		return set_result(r, V_FAIL, "urgent byte 0x%02x, expected 0x%02x", b,
				  stream_byte(urg_off));
	self->rd++;	/* the urgent byte is not in the in-band stream */
	if (!quiet(self, r, "after the urgent byte"))
		return r->v;
	return set_result(r, V_PASS, "urgent byte out of band, %u bytes in band in order",
			  urg_off);
}

/* The kernel's data is acknowledged: nothing left in flight. */
static enum verdict check_acked(struct bl *self,
				enum mode mode,
				const struct bcase *bc, const struct held *h,
				struct result *r)
{
	uint32_t want_wnd = PEER_WINDOW;
	struct tcp_info ti;

	if (!read_all_to(self, self->sent, r, NULL))
		return r->v;
	if (tcp_info_of(self->c.fd, &ti))
		return set_result(r, V_SKIP, "inconclusive: TCP_INFO: %s", strerror(errno));
	if (ti.tcpi_unacked)
		return set_result(r, V_FAIL,
				  "%u segment(s) of the kernel's data still unacknowledged: the merged segment lost the newer ACK",
				  ti.tcpi_unacked);
	if (ti.tcpi_snd_wnd != want_wnd)
		return set_result(r, V_FAIL, "send window %u, expected %u (the newer ACK's)",
				  ti.tcpi_snd_wnd, want_wnd);
	if (!quiet(self, r, "beyond the stream"))
		return r->v;
	return set_result(r, V_PASS, "kernel data acknowledged, window %u, %u bytes in order",
			  ti.tcpi_snd_wnd, self->sent);
}

/* The kernel's send window is the one B advertised. */
static enum verdict check_window(struct bl *self,
				 enum mode mode,
				 const struct bcase *bc, const struct held *h,
				 struct result *r)
{
	struct tcp_info ti;

	if (!read_all_to(self, self->sent, r, NULL))
		return r->v;
	if (tcp_info_of(self->c.fd, &ti))
		return set_result(r, V_SKIP, "inconclusive: TCP_INFO: %s", strerror(errno));
	if (ti.tcpi_snd_wnd != bc->segs[1].window)
		return set_result(r, V_FAIL, "send window %u, expected %u from the newer segment",
				  ti.tcpi_snd_wnd, bc->segs[1].window);
	if (!quiet(self, r, "beyond the stream"))
		return r->v;
	return set_result(r, V_PASS, "send window %u, %u bytes in order", ti.tcpi_snd_wnd,
			  self->sent);
}

/* The merged data carries B's receive timestamp, not A's. */
static enum verdict check_tstamp(struct bl *self,
				 enum mode mode,
				 const struct bcase *bc, const struct held *h,
				 struct result *r)
{
	struct timespec ts = { 0, 0 };
	double us;

	if (!read_all_to(self, self->sent, r, &ts))
		return r->v;
	if (!ts.tv_sec && !ts.tv_nsec)
		return set_result(r, V_SKIP, "inconclusive: no receive timestamp with the data");
	us = elapsed_us(&h->b_sent, &ts);
	diag("receive timestamp %+.0f us from B's write", us);
	if (us < 0)
		return set_result(r, V_FAIL,
				  "receive timestamp %.0f us before B was written: the merged data kept A's",
				  -us);
	if (!quiet(self, r, "beyond the stream"))
		return r->v;
	return set_result(r, V_PASS, "receive timestamp is B's (%+.0f us)", us);
}

/*
 * Flood. Merging on: no backlog drop, every byte. Off: the backlog
 * limit drops some, and the application gets exactly what the kernel
 * acknowledged, intact. Control (no backlog): the same.
 */
static enum verdict check_flood(struct bl *self,
				enum mode mode,
				const struct bcase *bc, const struct held *h,
				struct result *r)
{
	long long drops = h->during.v[NS_BACKLOGDROP] - h->before.v[NS_BACKLOGDROP];
	long long merged = h->during.v[NS_COALESCE] - h->before.v[NS_COALESCE];
	size_t want = self->sent - self->rd, got, bad;
	uint32_t acked;
	int err;

	if (!read_settled(self, want, &got, &err, &bad, NULL, r))
		return r->v;
	acked = acked_to(self, self->rd);
	diag("flood: %d segments of %d bytes, %lld merged, %lld backlog drops",
	     FLOOD_SEGS, FLOOD_LEN, merged, drops);
	diag("flood: %zu of %zu bytes read, acknowledged to %u of %u",
	     got, want, acked, self->rd);
	if (bad != (size_t)-1)
		return set_result(r, V_FAIL, "stream corrupted at offset %zu", bad);
	if (mode == M_HOLD) {
		if (drops)
			return set_result(r, V_FAIL, "coalescing on, yet TCPBacklogDrop +%lld",
					  drops);
		if (!merged)
			return set_result(r, V_FAIL,
					  "%d segments held, none merged (by TCPBacklogCoalesce) and none dropped",
					  FLOOD_SEGS);
		if (got != want)
			return set_result(r, V_FAIL, "received %zu of %zu bytes, then %s", got,
					  want, err_name(err));
	}
	if (mode == M_OFF && !drops)
		return set_result(r, V_FAIL,
				  "%d segments held with merging off, yet no TCPBacklogDrop: the backlog limit is gone",
				  FLOOD_SEGS);
	if (got < FLOOD_LEN)
		return set_result(r, V_FAIL, "only %zu bytes of the flood arrived", got);
	if (acked != self->rd)
		return set_result(r, V_FAIL,
				  "the application read to offset %u, the kernel acknowledged to %u",
				  self->rd, acked);
	if (!quiet(self, r, "beyond what was acknowledged"))
		return r->v;
	return set_result(r, V_PASS, "%zu bytes in order, as acknowledged", got);
}

/* The kernel sends KDATA_LEN bytes, which the peer leaves unacknowledged. */
static enum verdict kernel_sends(struct bl *self, struct result *r)
{
	uint8_t data[KDATA_LEN], buf[PEER_FRAME_MAX];
	uint32_t end = self->c.irs + 1 + KDATA_LEN;
	struct pkt_tcp s;

	memset(data, 0x6b, sizeof(data));
	if (send(self->c.fd, data, sizeof(data), 0) != (ssize_t)sizeof(data))
		return set_result(r, V_FAIL, "send() of %d bytes: %s", KDATA_LEN, strerror(errno));
	while (self->c.snd_nxt != end &&
	       peer_conn_recv(&self->c, &s, buf, sizeof(buf), capped_ms(self, SETTLE_MS)) == 1 &&
	       ms_left(&self->deadline))
		;
	if (self->c.snd_nxt != end)
		return set_result(r, V_FAIL, "the kernel's %d bytes never came out of tun",
				  KDATA_LEN);
	return V_PASS;
}

/* Receive timestamps on, and seen on a first piece of data. */
static enum verdict tstamp_on(struct bl *self, struct result *r)
{
	const struct seg probe = { .flags = PKT_ACK | PKT_PSH, .len = PRIME_LEN };
	struct timespec ts;
	int one = 1, i;

	if (setsockopt(self->c.fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one)))
		return set_result(r, V_SKIP, "inconclusive: SO_TIMESTAMPNS: %s", strerror(errno));
	/* Stamping may be switched on by a work item: wait until it is. */
	for (i = 0; i < 50; i++) {
		memset(&ts, 0, sizeof(ts));
		if (send_next(self, &probe))
			return set_result(r, V_SKIP, "inconclusive: writing to tun: %s",
					  strerror(errno));
		if (!read_all_to(self, self->sent, r, &ts))
			return r->v;
		if (ts.tv_sec || ts.tv_nsec)
			return V_PASS;
		usleep(10000);
	}
	return set_result(r, V_SKIP, "inconclusive: no receive timestamps on this kernel");
}

static long long delta(const struct held *h, enum nstat_id id, bool release)
{
	return release ? h->after.v[id] - h->during.v[id] : h->during.v[id] - h->before.v[id];
}

/*
 * Before a held two-segment case: a plain pair (data, data) merges on
 * this connection. Only then does "not merged" say the case's rule
 * refused it, and "merged" that it allowed it; without the twin, a
 * kernel that never merges would pass every case that forbids a
 * merge. Before a FIN case the merged twin must also take the fast path:
 * without that, a kernel that leaves FIN out of the merged header could
 * pass (its merged skb would miss the fast path for another reason).
 * The twin's bytes must then be read and acknowledged to their end: a
 * kernel that loses track of where a merged pair ends fails here, where
 * it shows, rather than leaving the case's own hold waiting for data
 * it would never deliver.
 */
static enum verdict twin_evidence(struct bl *self, const struct bcase *bc,
				  struct result *r)
{
	const struct bcase twin = {
		MERGE_REQUIRED,
		.segs = { DATA(AP, SEG_A_LEN), DATA(AP, SEG_B_LEN) }, .nsegs = 2,
	};
	struct held h;
	uint32_t acked;

	if (run_segs(self, M_HOLD, &twin, &h, r) != V_PASS)
		return r->v;
	if (delta(&h, NS_COALESCE, false) < 1)
		return set_result(r, V_SKIP,
				  "inconclusive: a plain data pair was not merged here (TCPBacklogCoalesce +0)");
	if (bc->fin_evidence && delta(&h, NS_HPHITS, true) < 1)
		return set_result(r, V_SKIP,
				  "inconclusive: the merged plain pair missed the fast path (TCPHPHits +0)");
	if (!read_all_to(self, self->sent, r, NULL))
		return r->v;
	/* What was merged must be acknowledged: the end_seq rule. */
	acked = acked_to(self, self->sent);
	if (acked != self->sent)
		return set_result(r, V_FAIL,
				  "after a merged plain data pair the kernel acknowledged the stream to offset %u, not to its end %u",
				  acked, self->sent);
	return V_PASS;
}

/* The kernel's decision: merged or not, against what the mode wants. */
static enum verdict decide(enum mode mode,
			   const struct bcase *bc, const struct held *h,
			   struct result *r)
{
	long long merged = delta(h, NS_COALESCE, false);
	bool may_merge = mode == M_HOLD && bc->merge == MERGE_REQUIRED;
	char sem[sizeof(r->why)];

	if (merged > 0 && !may_merge) {
		snprintf(sem, sizeof(sem), "%s", r->why);
		return set_result(r, V_FAIL,
				  "merged in the backlog (TCPBacklogCoalesce +%lld) %s; %s",
				  merged,
				  mode == M_HOLD ? "where it must not be" :
				  mode == M_OFF ? "with tcp_backlog_coalesce=0" :
				  "with no backlog at all", sem);
	}
	if (bc->fin_evidence && may_merge && merged > 0 && delta(h, NS_HPHITS, true) > 0) {
		snprintf(sem, sizeof(sem), "%s", r->why);
		return set_result(r, V_FAIL,
				  "the merged FIN segment took the fast path (TCPHPHits +%lld): FIN not carried into the merged header; %s",
				  delta(h, NS_HPHITS, true), sem);
	}
	if (r->v != V_PASS)
		return r->v;
	if (may_merge && merged < 1 && bc->nsegs)
		return set_result(r, V_FAIL,
				  "not merged (TCPBacklogCoalesce +0), though a plain pair merged on this connection");
	if (may_merge && merged < 1)
		return set_result(r, V_SKIP,
				  "inconclusive: TCPBacklogCoalesce +0: the coalescing path was not exercised");
	if (may_merge && bc->fast_path && delta(h, NS_HPHITS, true) < 1)
		return set_result(r, V_SKIP,
				  "inconclusive: the merged segment missed the fast path (TCPHPHits +0)");
	if (mode != M_CTL && bc->nsegs && delta(h, NS_BACKLOGDROP, false))
		return set_result(r, V_SKIP, "inconclusive: the backlog dropped %lld segments",
				  delta(h, NS_BACKLOGDROP, false));
	return V_PASS;
}

static void run_case(struct __test_metadata *_metadata,
		     struct bl *self,
		     enum mode mode,
		     const struct bcase *bc)
{
	struct result r = { V_PASS, "" };
	struct held h;

	if (self->na[0])
		SKIP(return, "%s", self->na);
	if (bc->kdata && kernel_sends(self, &r) != V_PASS)
		goto out;
	if (bc->tstamp && tstamp_on(self, &r) != V_PASS)
		goto out;
	if (mode == M_HOLD && bc->nsegs == 2 && twin_evidence(self, bc, &r) != V_PASS)
		goto out;
	if (run_segs(self, mode, bc, &h, &r) != V_PASS)
		goto out;
	diag("TCPBacklogCoalesce %+lld, TCPBacklogDrop %+lld while injecting",
	     delta(&h, NS_COALESCE, false), delta(&h, NS_BACKLOGDROP, false));
	diag("TCPHPHits %+lld in the release",
	     delta(&h, NS_HPHITS, true));
	bc->check(self, mode, bc, &h, &r);
	decide(mode, bc, &h, &r);
out:
	switch (r.v) {
	case V_PASS:
		diag("%s", r.why);
		break;
	case V_FAIL:
		diag("FAIL: %s", r.why);
		_metadata->passed = 0;
		break;
	case V_SKIP:
		SKIP(return, "%s", r.why);
	}
}

/* A, B: merged; the merged skb takes the fast path; all bytes. */
TEST_F(backlog, data_data)
{
	static const struct bcase bc = {
		MERGE_REQUIRED,
		.segs = { DATA(AP, SEG_A_LEN), DATA(AP, SEG_B_LEN) }, .nsegs = 2,
		.check = check_stream, .fast_path = true,
	};

	run_case(_metadata, &self->b, variant->mode, &bc);
}

/* A without PSH, B with it: merged (flags may differ there); all bytes. */
TEST_F(backlog, data_psh)
{
	static const struct bcase bc = {
		MERGE_REQUIRED,
		.segs = { DATA(AB, SEG_A_LEN), DATA(AP, SEG_B_LEN) }, .nsegs = 2,
		.check = check_stream,
	};

	run_case(_metadata, &self->b, variant->mode, &bc);
}

/*
 * A, B|FIN: merged, FIN carried into the merged header (no fast path,
 * though the same pair without FIN took it) and into the control
 * block's flags: EOF, CLOSE_WAIT, the FIN acknowledged.
 */
TEST_F(backlog, data_fin)
{
	static const struct bcase bc = {
		MERGE_REQUIRED,
		.segs = { DATA(AP, SEG_A_LEN), DATA(AP | PKT_FIN, SEG_B_LEN) }, .nsegs = 2,
		.check = check_fin, .fin_evidence = true,
	};

	run_case(_metadata, &self->b, variant->mode, &bc);
}

/* A, RST|ACK at the next sequence: not merged; the connection resets. */
TEST_F(backlog, data_rst)
{
	static const struct bcase bc = {
		MERGE_FORBIDDEN,
		.segs = { DATA(AP, SEG_A_LEN), DATA(PKT_ACK | PKT_RST, 0) }, .nsegs = 2,
		.check = check_rst,
	};

	run_case(_metadata, &self->b, variant->mode, &bc);
}

/*
 * A, SYN|ACK at the next sequence (ACK set, so only the SYN rule can
 * refuse it): not merged; challenged (RFC 5961); later data intact.
 */
TEST_F(backlog, data_synack)
{
	static const struct bcase bc = {
		MERGE_FORBIDDEN,
		.segs = { DATA(AP, SEG_A_LEN), DATA(PKT_SYN | PKT_ACK, 0) }, .nsegs = 2,
		.check = check_synack,
	};

	run_case(_metadata, &self->b, variant->mode, &bc);
}

/* A, B without ACK: not merged; B is discarded, A arrives. */
TEST_F(backlog, data_noack)
{
	static const struct bcase bc = {
		MERGE_FORBIDDEN,
		.segs = { DATA(AP, SEG_A_LEN), DATA(PKT_PSH, SEG_B_LEN) }, .nsegs = 2,
		.check = check_noack,
	};

	run_case(_metadata, &self->b, variant->mode, &bc);
}

/* A without ACK, B: not merged; A discarded, B only after A is resent. */
TEST_F(backlog, noack_data)
{
	static const struct bcase bc = {
		MERGE_FORBIDDEN,
		.segs = { DATA(PKT_PSH, SEG_A_LEN), DATA(AP, SEG_B_LEN) }, .nsegs = 2,
		.check = check_noack_data,
	};

	run_case(_metadata, &self->b, variant->mode, &bc);
}

/* A, B|URG (its last byte urgent): not merged; urgent byte out of band. */
TEST_F(backlog, data_urg)
{
	static const struct bcase bc = {
		MERGE_FORBIDDEN,
		.segs = { DATA(AP, SEG_A_LEN),
		     { .flags = AP | PKT_URG, .len = SEG_B_LEN, .urg = SEG_B_LEN } }, .nsegs = 2,
		.check = check_urg,
	};

	run_case(_metadata, &self->b, variant->mode, &bc);
}

/* A, B|ECE: not merged; all bytes. */
TEST_F(backlog, data_ece)
{
	static const struct bcase bc = {
		MERGE_FORBIDDEN,
		.segs = { DATA(AP, SEG_A_LEN), DATA(AP | PKT_ECE, SEG_B_LEN) }, .nsegs = 2,
		.check = check_stream,
	};

	run_case(_metadata, &self->b, variant->mode, &bc);
}

/* A, B|CWR: not merged; all bytes. */
TEST_F(backlog, data_cwr)
{
	static const struct bcase bc = {
		MERGE_FORBIDDEN,
		.segs = { DATA(AP, SEG_A_LEN), DATA(AP | PKT_CWR, SEG_B_LEN) }, .nsegs = 2,
		.check = check_stream,
	};

	run_case(_metadata, &self->b, variant->mode, &bc);
}

/*
 * A with 12 bytes of options, B without: only the header lengths (doff)
 * differ, the option bytes compared are none. Not merged; all bytes.
 */
TEST_F(backlog, opts_data)
{
	static const struct bcase bc = {
		MERGE_FORBIDDEN,
		.segs = { { .flags = AP, .len = SEG_A_LEN, .opt = ts_opt_a, .optlen = 12 },
		     DATA(AP, SEG_B_LEN) }, .nsegs = 2,
		.check = check_stream,
	};

	run_case(_metadata, &self->b, variant->mode, &bc);
}

/* Same option length, other option bytes: not merged; all bytes. */
TEST_F(backlog, data_tsval)
{
	static const struct bcase bc = {
		MERGE_FORBIDDEN,
		.segs = { { .flags = AP, .len = SEG_A_LEN, .opt = ts_opt_a, .optlen = 12 },
		     { .flags = AP, .len = SEG_B_LEN, .opt = ts_opt_b, .optlen = 12 } }, .nsegs = 2,
		.check = check_stream,
	};

	run_case(_metadata, &self->b, variant->mode, &bc);
}

/* Identical options on both: merged; all bytes. */
TEST_F(backlog, opts_opts)
{
	static const struct bcase bc = {
		MERGE_REQUIRED,
		.segs = { { .flags = AP, .len = SEG_A_LEN, .opt = ts_opt_a, .optlen = 12 },
		     { .flags = AP, .len = SEG_B_LEN, .opt = ts_opt_a, .optlen = 12 } }, .nsegs = 2,
		.check = check_stream,
	};

	run_case(_metadata, &self->b, variant->mode, &bc);
}

/* B with another DS field: not merged; all bytes. */
TEST_F(backlog, data_tos)
{
	static const struct bcase bc = {
		MERGE_FORBIDDEN,
		.segs = { DATA(AP, SEG_A_LEN),
			  { .flags = AP, .len = SEG_B_LEN, .tos = 0x20 } }, .nsegs = 2,
		.check = check_stream,
	};

	run_case(_metadata, &self->b, variant->mode, &bc);
}

/* A, a hole, B: not merged; all bytes once the hole is filled. */
TEST_F(backlog, data_gap)
{
	static const struct bcase bc = {
		MERGE_FORBIDDEN,
		.segs = { DATA(AP, SEG_A_LEN),
			  { .flags = AP, .len = SEG_B_LEN, .gap = GAP_LEN } }, .nsegs = 2,
		.check = check_gap,
	};

	run_case(_metadata, &self->b, variant->mode, &bc);
}

/*
 * A, B with a bad checksum (longer than the 76 bytes tcp_v4_rcv()
 * checks early, so tcp_add_backlog() checks it): dropped and counted,
 * not merged; B's bytes once it is resent whole.
 */
TEST_F(backlog, data_csum)
{
	static const struct bcase bc = {
		MERGE_FORBIDDEN,
		.segs = { DATA(AP, SEG_A_LEN),
		     { .flags = AP, .len = SEG_B_LEN, .corrupt = true } }, .nsegs = 2,
		.check = check_csum,
	};

	run_case(_metadata, &self->b, variant->mode, &bc);
}

/* A, B: merged; acknowledged through B's end; later data delivered. */
TEST_F(backlog, end_seq)
{
	static const struct bcase bc = {
		MERGE_REQUIRED,
		.segs = { DATA(AP, SEG_A_LEN), DATA(AP, SEG_B_LEN) }, .nsegs = 2,
		.check = check_end_seq,
	};

	run_case(_metadata, &self->b, variant->mode, &bc);
}

/*
 * The kernel has sent data; A does not acknowledge it, B does: merged,
 * the merged segment carries B's ACK: nothing left unacknowledged.
 */
TEST_F(backlog, ack_new)
{
	static const struct bcase bc = {
		MERGE_REQUIRED,
		.segs = { DATA(AP, SEG_A_LEN),
		     { .flags = AP, .len = SEG_B_LEN, .ack_to = KDATA_LEN } }, .nsegs = 2,
		.check = check_acked, .kdata = true,
	};

	run_case(_metadata, &self->b, variant->mode, &bc);
}

/*
 * The kernel has sent data; A acknowledges it, B carries the older ACK
 * and another window: merged, A's ACK and window stay.
 */
TEST_F(backlog, ack_old)
{
	static const struct bcase bc = {
		MERGE_REQUIRED,
		.segs = { { .flags = AP, .len = SEG_A_LEN, .ack_to = KDATA_LEN },
		     { .flags = AP, .len = SEG_B_LEN, .ack_to = KDATA_LEN / 2,
		       .window = OLD_WINDOW } }, .nsegs = 2,
		.check = check_acked, .kdata = true,
	};

	run_case(_metadata, &self->b, variant->mode, &bc);
}

/* B advertises another window: merged; the send window is B's. */
TEST_F(backlog, window)
{
	static const struct bcase bc = {
		MERGE_REQUIRED,
		.segs = { DATA(AP, SEG_A_LEN),
		     { .flags = AP, .len = SEG_B_LEN, .window = OTHER_WINDOW } }, .nsegs = 2,
		.check = check_window,
	};

	run_case(_metadata, &self->b, variant->mode, &bc);
}

/* B 20 ms after A: merged; the data's receive timestamp is B's. */
TEST_F(backlog, rx_tstamp)
{
	static const struct bcase bc = {
		MERGE_REQUIRED,
		.segs = { DATA(AP, SEG_A_LEN),
		     { .flags = AP, .len = SEG_B_LEN, .delay_ms = TSTAMP_GAP_MS } }, .nsegs = 2,
		.check = check_tstamp, .tstamp = true,
	};

	run_case(_metadata, &self->b, variant->mode, &bc);
}

/*
 * 1000 segments of 16 bytes, past the backlog limit: merging on, no
 * drop and every byte; off, TCPBacklogDrop and an intact, acknowledged
 * prefix.
 */
TEST_F(backlog, flood)
{
	static const struct bcase bc = {
		MERGE_REQUIRED, .nsegs = 0, .check = check_flood,
	};

	run_case(_metadata, &self->b, variant->mode, &bc);
}

TEST_HARNESS_MAIN
