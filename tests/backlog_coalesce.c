// SPDX-License-Identifier: GPL-2.0
/*
 * backlog_coalesce: deterministic test of every rule of TCP backlog
 * coalescing (tcp_add_backlog()), for IPv4 and IPv6. It grew from the
 * Linux 5.0 regression where a FIN merged into an earlier segment was
 * lost; the fix also keeps RST, SYN, URG and ACK-less segments apart.
 *
 * The program creates its own network namespace and a tun device, and
 * plays the remote TCP peer itself: it writes crafted segments into tun
 * and reads the kernel's replies from it. To put segments into the
 * socket backlog, a receiver thread calls recv() into a page registered
 * with userfaultfd: the kernel faults while copying with the socket
 * owned, so the thread sleeps holding the socket lock. The userfaultfd
 * event tells the exact moment; the segments are injected then (they go
 * through tcp_add_backlog()), the fault is resolved, and release_sock()
 * processes the backlog.
 *
 * Every case checks what the kernel decided (merged or not, from
 * TCPBacklogCoalesce of the test's own namespace, read while the socket
 * is held) and what the application sees. Each runs in three modes:
 *   <fam>_<case>      held socket, net.ipv4.tcp_backlog_coalesce=1
 *   <fam>_off_<case>  held socket, the sysctl at 0: nothing may merge
 *   <fam>_ctl_<case>  control: no hold, no backlog at all
 * A case whose precondition did not happen (no merge where one was
 * required, a socket that was never held) is a SKIP with the reason:
 * inconclusive, never a pass.
 *
 * Output: KTAP (kselftest), or Yocto ptest lines with --ptest. Exit 0
 * when every case passed or was not applicable, 1 when one failed, 4
 * when none failed but one was inconclusive, 2 on bad usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "pkt.h"

#define TUN_NAME	"kgate0"
#define LOCAL4		0xc6120001u	/* 198.18.0.1: the kernel under test */
#define PEER4		0xc6120002u	/* 198.18.0.2: played by this program */
#define LISTEN_PORT	5001
#define PEER_WINDOW	65535
#define PRIME_LEN	8	/* queued before the hold; 1 byte is read */
#define SEG_A_LEN	300	/* first backlog segment */
#define SEG_B_LEN	100	/* fits A's spare room: it can be merged */
#define GAP_LEN		50
#define LATE_LEN	50	/* sent after the release */
#define FLOOD_SEGS	1000
#define FLOOD_LEN	16
#define STREAM_MAX	(PRIME_LEN + FLOOD_SEGS * FLOOD_LEN + 1024)
/* What the kernel already processed shows up at once after release. */
#define SETTLE_MS	2000
/* How long "nothing more arrives" is watched. */
#define QUIET_MS	100

/* 2001:2::/48 is the IPv6 benchmarking range (RFC 5180). */
static const uint8_t local6[16] = { 0x20, 0x01, 0, 0x02, [15] = 1 };
static const uint8_t peer6[16] = { 0x20, 0x01, 0, 0x02, [15] = 2 };

/* NOP, NOP, timestamp: 12 bytes of options. */
#define TS_OPT(v) { 1, 1, 8, 10, 0, 0, 0, (v), 0, 0, 0, 0 }
static const uint8_t ts_opt_a[12] = TS_OPT(100);
static const uint8_t ts_opt_b[12] = TS_OPT(101);

enum verdict { V_PASS, V_FAIL, V_SKIP, V_NA };
enum mode { M_HOLD, M_OFF, M_CTL, M_COUNT };
enum merge { MERGE_REQUIRED, MERGE_FORBIDDEN };

static const char * const mode_prefix[M_COUNT] = { "", "off_", "ctl_" };
static const char * const mode_name[M_COUNT] = { "hold", "off", "ctl" };

struct fam {
	const char *name;
	int v6;
	int lfd;
	uint16_t mss;
	bool ok;
	char why[96];
};

struct env {
	int tun;
	struct uffd_hold hold;
	struct fam fam[2];
	uint16_t next_port;
	uint16_t ip_id;
	int timeout_ms;
	bool has_sysctl;
};

struct conn {
	const struct fam *f;
	int fd;
	uint16_t pport;		/* the peer's (our) port */
	uint32_t iss;		/* the peer's initial sequence number */
	uint32_t rcv_nxt;	/* the kernel's next sequence number */
	uint32_t last_ack;	/* highest ACK the kernel sent */
	bool acked_any;
	uint32_t sent;		/* stream bytes sent: offsets [0, sent) */
	uint32_t fin_end;	/* sequence after our FIN, 0 if none */
	uint32_t rd;		/* next stream offset the application reads */
	struct timespec deadline;
};

struct receiver {
	pthread_t thread;
	int fd;
	uint8_t *buf;
	ssize_t ret;
	int err;
};

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
};

/* What happened while the socket was held (or, in control, sent). */
struct held {
	struct counters before, during, after;
	bool held;
	enum mode mode;
};

struct testcase;
typedef enum verdict (*check_fn)(struct env *e, struct conn *c,
				 const struct testcase *tc,
				 const struct held *h, struct result *r);

struct testcase {
	const char *name;
	const char *desc;
	enum merge merge;
	struct seg segs[2];
	int nsegs;		/* 0: the flood */
	check_fn check;
	/*
	 * The merged skb must take the header prediction fast path: that
	 * is where a FIN known only to the control block gets lost, so
	 * without it the FIN case could not see the 5.0 bug.
	 */
	bool fast_path;
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

static int capped_ms(const struct conn *c, int cap)
{
	int left = ms_left(&c->deadline);

	return left < cap ? left : cap;
}

/* The in6_ifreq of <linux/ipv6.h>, which clashes with glibc's headers. */
struct kg_in6_ifreq {
	struct in6_addr addr;
	uint32_t prefixlen;
	int ifindex;
};

static void setup_ipv6(struct env *e)
{
	struct fam *f = &e->fam[1];
	struct kg_in6_ifreq req;
	int s;

	/* No DAD: the address is usable at once. No solicitations. */
	if (write_file("/proc/sys/net/ipv6/conf/" TUN_NAME "/accept_dad", "0") ||
	    write_file("/proc/sys/net/ipv6/conf/" TUN_NAME "/router_solicitations", "0")) {
		snprintf(f->why, sizeof(f->why), "no IPv6 on %s (kernel without IPv6?)", TUN_NAME);
		return;
	}
	s = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0) {
		snprintf(f->why, sizeof(f->why), "AF_INET6 socket: %s", strerror(errno));
		return;
	}
	memset(&req, 0, sizeof(req));
	memcpy(&req.addr, local6, 16);
	req.prefixlen = 64;
	req.ifindex = (int)if_nametoindex(TUN_NAME);
	if (ioctl(s, SIOCSIFADDR, &req))
		snprintf(f->why, sizeof(f->why), "IPv6 address on %s: %s", TUN_NAME, strerror(errno));
	else
		f->ok = true;
	close(s);
}

static int setup_tun(struct env *e)
{
	struct sockaddr_in *sin;
	struct ifreq ifr;
	int s;

	e->tun = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	if (e->tun < 0)
		return -1;
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
	strncpy(ifr.ifr_name, TUN_NAME, IFNAMSIZ - 1);
	if (ioctl(e->tun, TUNSETIFF, &ifr))
		return -1;
	if (fcntl(e->tun, F_SETFL, O_NONBLOCK))
		return -1;

	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	memset(&ifr, 0, sizeof(ifr));
	strncpy(ifr.ifr_name, TUN_NAME, IFNAMSIZ - 1);
	sin = (struct sockaddr_in *)&ifr.ifr_addr;
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(LOCAL4);
	if (ioctl(s, SIOCSIFADDR, &ifr))
		goto err;
	sin->sin_addr.s_addr = htonl(0xffffff00u);
	if (ioctl(s, SIOCSIFNETMASK, &ifr))
		goto err;
	setup_ipv6(e);
	if (ioctl(s, SIOCGIFFLAGS, &ifr))
		goto err;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr))
		goto err;
	close(s);
	e->fam[0].ok = true;
	return 0;
err:
	close(s);
	return -1;
}

static int setup_listener(struct fam *f)
{
	struct sockaddr_in6 sin6 = {
		.sin6_family = AF_INET6,
		.sin6_port = htons(LISTEN_PORT),
	};
	struct sockaddr_in sin = {
		.sin_family = AF_INET,
		.sin_port = htons(LISTEN_PORT),
		.sin_addr.s_addr = htonl(LOCAL4),
	};
	struct timespec dl;
	int one = 1;

	f->lfd = socket(f->v6 ? AF_INET6 : AF_INET,
			SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (f->lfd < 0)
		return -1;
	setsockopt(f->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (f->v6) {
		memcpy(&sin6.sin6_addr, local6, 16);
		setsockopt(f->lfd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
		/*
		 * Even without DAD the address stays tentative until a
		 * workqueue runs after the link came up: bind() says
		 * EADDRNOTAVAIL until then.
		 */
		deadline_in(&dl, 3000);
		while (bind(f->lfd, (struct sockaddr *)&sin6, sizeof(sin6))) {
			if (errno != EADDRNOTAVAIL || !ms_left(&dl))
				return -1;
			usleep(10000);
		}
	} else if (bind(f->lfd, (struct sockaddr *)&sin, sizeof(sin))) {
		return -1;
	}
	return listen(f->lfd, 16);
}

static void fill_addrs(const struct conn *c, struct pkt_tcp *s)
{
	s->v6 = c->f->v6;
	if (s->v6) {
		memcpy(s->saddr6, peer6, 16);
		memcpy(s->daddr6, local6, 16);
	} else {
		s->saddr = PEER4;
		s->daddr = LOCAL4;
	}
}

/* Write one segment from the peer to the kernel. */
static int peer_write(struct env *e, struct conn *c, uint32_t seq,
		      const struct seg *sg, const uint8_t *data)
{
	uint8_t buf[2048];
	struct pkt_tcp s = {
		.sport = c->pport, .dport = LISTEN_PORT,
		.seq = seq, .ack = c->rcv_nxt,
		.flags = sg->flags, .window = PEER_WINDOW,
		.urg_ptr = sg->urg, .tos = sg->tos,
		.ip_id = e->ip_id++,
		.opt = sg->opt, .optlen = sg->optlen,
		.data = data, .len = sg->len,
	};
	size_t n;

	fill_addrs(c, &s);
	n = pkt_build(buf, sizeof(buf), &s);
	if (!n || write(e->tun, buf, n) != (ssize_t)n)
		return -1;
	return 0;
}

/* Send a segment of the test stream at stream offset off. */
static int peer_send_at(struct env *e, struct conn *c, uint32_t off,
			const struct seg *sg)
{
	uint8_t data[2048];
	uint32_t i, seq = c->iss + 1 + off;

	if (sg->len > sizeof(data))
		return -1;
	for (i = 0; i < sg->len; i++)
		data[i] = stream_byte(off + i);
	if (peer_write(e, c, seq, sg, data))
		return -1;
	if (!(sg->flags & (PKT_SYN | PKT_RST)) && off + sg->len > c->sent)
		c->sent = off + sg->len;
	if (sg->flags & PKT_FIN)
		c->fin_end = seq + sg->len + 1;
	return 0;
}

/* Send the next segment of the stream (after sg->gap skipped bytes). */
static int peer_send(struct env *e, struct conn *c, const struct seg *sg)
{
	return peer_send_at(e, c, c->sent + sg->gap, sg);
}

/*
 * Read the kernel's next segment for this connection within ms.
 * Returns 1 with *s filled, 0 on timeout, -1 on error.
 */
static int peer_recv(struct env *e, struct conn *c, struct pkt_tcp *s,
		     uint8_t *buf, size_t cap, int ms)
{
	struct pollfd pfd = { .fd = e->tun, .events = POLLIN };
	struct timespec dl;
	bool ours;
	ssize_t n;

	deadline_in(&dl, ms);
	for (;;) {
		n = read(e->tun, buf, cap);
		if (n < 0 && errno != EAGAIN)
			return -1;
		if (n > 0 && !pkt_parse(buf, (size_t)n, s)) {
			ours = s->v6 == c->f->v6 && s->sport == LISTEN_PORT &&
			       s->dport == c->pport;
			if (ours && s->v6)
				ours = !memcmp(s->saddr6, local6, 16) &&
				       !memcmp(s->daddr6, peer6, 16);
			else if (ours)
				ours = s->saddr == LOCAL4 && s->daddr == PEER4;
			if (!ours)
				continue;
			if ((s->flags & PKT_ACK) &&
			    (!c->acked_any || (int32_t)(s->ack - c->last_ack) > 0)) {
				c->last_ack = s->ack;
				c->acked_any = true;
			}
			return 1;
		}
		if (!ms_left(&dl))
			return 0;
		if (n > 0)
			continue;
		if (poll(&pfd, 1, ms_left(&dl)) < 0 && errno != EINTR)
			return -1;
	}
}

/* Read and account whatever the kernel sent for this connection. */
static void peer_drain(struct env *e, struct conn *c, int ms)
{
	uint8_t buf[2048];
	struct pkt_tcp s;

	while (peer_recv(e, c, &s, buf, sizeof(buf), ms) == 1)
		;
}

static enum verdict conn_open(struct env *e, const struct fam *f,
			      struct conn *c, struct result *r)
{
	const uint8_t mss_opt[4] = { 2, 4, f->mss >> 8, f->mss & 0xff };
	const struct seg syn = { .flags = PKT_SYN, .opt = mss_opt, .optlen = 4 };
	const struct seg ack = { .flags = PKT_ACK };
	struct pollfd pfd = { .fd = f->lfd, .events = POLLIN };
	struct sockaddr_in6 sa;
	socklen_t slen = sizeof(sa);
	uint8_t buf[2048];
	struct pkt_tcp s;
	int rc;

	memset(c, 0, sizeof(*c));
	c->f = f;
	c->fd = -1;
	deadline_in(&c->deadline, e->timeout_ms);
	c->pport = e->next_port++;
	c->iss = 0x10000000u + ((uint32_t)c->pport << 12);

	/* Only MSS offered: no timestamps, no window scaling, no SACK. */
	if (peer_write(e, c, c->iss, &syn, NULL))
		return set_result(r, V_FAIL, "writing SYN to tun: %s", strerror(errno));
	for (;;) {
		rc = peer_recv(e, c, &s, buf, sizeof(buf), ms_left(&c->deadline));
		if (rc <= 0)
			return set_result(r, V_FAIL, "no SYN-ACK from the kernel");
		if ((s.flags & (PKT_SYN | PKT_ACK)) == (PKT_SYN | PKT_ACK) &&
		    s.ack == c->iss + 1)
			break;
	}
	c->rcv_nxt = s.seq + 1;
	if (peer_write(e, c, c->iss + 1, &ack, NULL))
		return set_result(r, V_FAIL, "writing ACK to tun: %s", strerror(errno));
	for (;;) {
		c->fd = accept4(f->lfd, (struct sockaddr *)&sa, &slen, SOCK_CLOEXEC);
		if (c->fd >= 0)
			break;
		if (errno != EAGAIN || !ms_left(&c->deadline) ||
		    poll(&pfd, 1, ms_left(&c->deadline)) < 0)
			return set_result(r, V_FAIL, "accept: %s", strerror(errno));
	}
	/* sin_port and sin6_port sit at the same offset. */
	if (ntohs(sa.sin6_port) != c->pport)
		return set_result(r, V_FAIL, "accepted port %u, expected %u",
				  ntohs(sa.sin6_port), c->pport);
	return V_PASS;
}

static void conn_close(struct env *e, struct conn *c)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	if (c->fd >= 0) {
		/* RST now: nothing of this case leaks into the next. */
		setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		close(c->fd);
		c->fd = -1;
	}
	peer_drain(e, c, 0);
}

static const char *watchdog_case = "";

/* A case that outlives every deadline: the kernel is stuck somewhere. */
static void on_alarm(int sig)
{
	static const char msg[] = "Bail out! a case hung past its deadline: ";

	(void)sig;
	if (write(STDOUT_FILENO, msg, sizeof(msg) - 1) < 0 ||
	    write(STDOUT_FILENO, watchdog_case, strlen(watchdog_case)) < 0 ||
	    write(STDOUT_FILENO, "\n", 1) < 0)
		_exit(KSFT_FAIL);
	_exit(KSFT_FAIL);
}

static void *receiver_main(void *arg)
{
	struct receiver *rx = arg;
	sigset_t set;

	/* A signal pending here would turn the fault into EFAULT. */
	sigemptyset(&set);
	sigaddset(&set, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);

	/* One byte: the backlog is then processed by release_sock(). */
	rx->ret = recv(rx->fd, rx->buf, 1, 0);
	rx->err = rx->ret < 0 ? errno : 0;
	return NULL;
}

static int join_receiver(struct receiver *rx, int ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000 + 1;
	return pthread_timedjoin_np(rx->thread, NULL, &ts);
}

static int inject(struct env *e, struct conn *c, const struct testcase *tc)
{
	const struct seg flood = { .flags = PKT_ACK, .len = FLOOD_LEN };
	int i, n = tc->nsegs ? tc->nsegs : FLOOD_SEGS;

	for (i = 0; i < n; i++)
		if (peer_send(e, c, tc->nsegs ? &tc->segs[i] : &flood))
			return -1;
	return 0;
}

/*
 * Queue PRIME_LEN stream bytes, then inject the case's segments: in
 * the hold modes while a 1-byte recv() holds the socket, without a
 * hold in control mode. Returns V_PASS when the sequence ran.
 */
static enum verdict run_segs(struct env *e, struct conn *c,
			     const struct testcase *tc, enum mode how,
			     struct held *h, struct result *r)
{
	const struct seg prime = { .flags = PKT_ACK | PKT_PSH, .len = PRIME_LEN };
	struct receiver rx = { .fd = c->fd };
	int rc;

	memset(h, 0, sizeof(*h));
	h->mode = how;
	if (peer_send(e, c, &prime))
		return set_result(r, V_FAIL, "writing to tun: %s", strerror(errno));
	peer_drain(e, c, 0);
	if (how == M_CTL) {
		read_counters(&h->before);
		if (inject(e, c, tc))
			return set_result(r, V_FAIL, "writing to tun: %s", strerror(errno));
		read_counters(&h->during);
		h->after = h->during;
		return V_PASS;
	}

	if (uffd_arm(&e->hold))
		return set_result(r, V_FAIL, "userfaultfd page: %s", strerror(errno));
	rx.buf = e->hold.page;
	if (pthread_create(&rx.thread, NULL, receiver_main, &rx))
		return set_result(r, V_FAIL, "pthread_create failed");
	rc = uffd_wait(&e->hold, ms_left(&c->deadline));
	h->held = rc == 1;
	if (h->held) {
		read_counters(&h->before);
		if (inject(e, c, tc))
			diag("writing to tun: %s", strerror(errno));
		read_counters(&h->during);
	}
	uffd_resolve(&e->hold);
	if (!h->held)
		shutdown(c->fd, SHUT_RD);	/* wake a receiver that never faulted */
	if (join_receiver(&rx, ms_left(&c->deadline))) {
		printf("Bail out! receiver thread stuck in recv()\n");
		exit(KSFT_FAIL);
	}
	read_counters(&h->after);
	if (!h->held)
		return set_result(r, V_SKIP,
				  "inconclusive: the receiver never faulted on the userfaultfd page, so the socket was not held");
	if (rx.ret != 1 || e->hold.page[0] != stream_byte(0))
		return set_result(r, V_FAIL, "held recv() returned %zd (%s), byte 0x%02x, expected 1 byte 0x%02x",
				  rx.ret, rx.ret < 0 ? strerror(rx.err) : "ok",
				  e->hold.page[0], stream_byte(0));
	c->rd = 1;
	return V_PASS;
}

/*
 * Read the stream at the application until want more bytes, EOF,
 * an error or ms. Returns bytes read; *err is 0, -1 for EOF, an errno,
 * or ETIMEDOUT; *bad is the first offset whose byte was wrong, or -1.
 */
static size_t read_stream(struct conn *c, size_t want, int ms, int *err,
			  size_t *bad)
{
	struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
	static uint8_t buf[STREAM_MAX];
	struct timespec dl;
	size_t got = 0, i;
	ssize_t n;

	*err = 0;
	*bad = (size_t)-1;
	deadline_in(&dl, ms);
	while (got < want) {
		/* The deadline also bounds a socket that polls readable but
		 * has nothing to read (a confused kernel can do that).
		 */
		if (!ms_left(&dl) || poll(&pfd, 1, ms_left(&dl)) <= 0) {
			*err = ETIMEDOUT;
			break;
		}
		n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0) {
			*err = -1;
			break;
		}
		if (n < 0) {
			if (errno == EAGAIN)
				continue;
			*err = errno;
			break;
		}
		for (i = 0; i < (size_t)n; i++)
			if (*bad == (size_t)-1 &&
			    buf[i] != stream_byte((uint32_t)(c->rd + i)))
				*bad = c->rd + i;
		c->rd += (uint32_t)n;
		got += (size_t)n;
	}
	return got;
}

static const char *err_name(int err)
{
	return err == -1 ? "EOF" : err ? strerror(err) : "nothing";
}

static int tcp_state(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len))
		return -1;
	return ti.tcpi_state;
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

#define TCP_ST_ESTABLISHED	1
#define TCP_ST_CLOSE_WAIT	8

/* Read up to offset end of the stream: all of it must arrive, intact. */
static bool read_all_to(struct conn *c, uint32_t end, struct result *r)
{
	size_t want = end - c->rd, got, bad;
	int err;

	got = read_stream(c, want, capped_ms(c, SETTLE_MS), &err, &bad);
	if (bad != (size_t)-1) {
		set_result(r, V_FAIL, "stream corrupted at offset %zu", bad);
		return false;
	}
	if (got > want) {
		set_result(r, V_FAIL, "received %zu bytes where %zu were expected", got, want);
		return false;
	}
	if (got != want) {
		set_result(r, V_FAIL, "received %zu of %zu bytes, then %s", got, want,
			   err_name(err));
		return false;
	}
	return true;
}

/* Nothing more may arrive for a while; true if so. */
static bool quiet(struct conn *c, struct result *r, const char *what)
{
	size_t got, bad;
	int err;

	got = read_stream(c, 1, capped_ms(c, QUIET_MS), &err, &bad);
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

/* Every byte sent arrives in order, and nothing more. */
static enum verdict check_stream(struct env *e, struct conn *c,
				 const struct testcase *tc,
				 const struct held *h, struct result *r)
{
	if (!read_all_to(c, c->sent, r) || !quiet(c, r, "beyond the stream"))
		return r->v;
	return set_result(r, V_PASS, "%u bytes in order", c->sent);
}

/* All bytes, then EOF; CLOSE_WAIT; the kernel acknowledged the FIN. */
static enum verdict check_fin(struct env *e, struct conn *c,
			      const struct testcase *tc,
			      const struct held *h, struct result *r)
{
	size_t got, bad;
	uint8_t buf[2048];
	struct pkt_tcp s;
	int err, st, one = 1;
	bool acked;

	if (!read_all_to(c, c->sent, r))
		return r->v;
	got = read_stream(c, 1, capped_ms(c, SETTLE_MS), &err, &bad);
	setsockopt(c->fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
	st = tcp_state(c->fd);
	acked = c->acked_any && c->last_ack == c->fin_end;
	while (!acked && peer_recv(e, c, &s, buf, sizeof(buf),
				   capped_ms(c, SETTLE_MS)) == 1)
		acked = c->last_ack == c->fin_end;
	diag("after FIN: read %s, state %s, kernel ACK iss+%u, FIN+1 is iss+%u",
	     got ? "more data" : err_name(err), state_name(st),
	     c->last_ack - c->iss, c->fin_end - c->iss);
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
static enum verdict check_rst(struct env *e, struct conn *c,
			      const struct testcase *tc,
			      const struct held *h, struct result *r)
{
	size_t want = c->sent - c->rd, got, bad;
	int err, st;

	got = read_stream(c, want + 1, capped_ms(c, SETTLE_MS), &err, &bad);
	st = tcp_state(c->fd);
	diag("after RST: %zu bytes then %s, state %s", got, err_name(err),
	     state_name(st));
	if (bad != (size_t)-1)
		return set_result(r, V_FAIL, "stream corrupted at offset %zu", bad);
	if (got > want)
		return set_result(r, V_FAIL, "received %zu bytes, more than the %zu sent", got, want);
	if (err != ECONNRESET)
		return set_result(r, V_FAIL, "connection not reset: read ended with %s, state %s",
				  err_name(err), state_name(st));
	return set_result(r, V_PASS, "connection reset");
}

/* SYN on an established connection: challenged, connection survives. */
static enum verdict check_syn(struct env *e, struct conn *c,
			      const struct testcase *tc,
			      const struct held *h, struct result *r)
{
	const struct seg late = { .flags = PKT_ACK | PKT_PSH, .len = LATE_LEN };
	int st;

	if (!read_all_to(c, c->sent, r))
		return r->v;
	st = tcp_state(c->fd);
	if (st != TCP_ST_ESTABLISHED)
		return set_result(r, V_FAIL, "state %s after the in-window SYN, expected ESTABLISHED",
				  state_name(st));
	if (peer_send(e, c, &late))
		return set_result(r, V_FAIL, "writing to tun: %s", strerror(errno));
	if (!read_all_to(c, c->sent, r))
		return r->v;
	return set_result(r, V_PASS, "SYN ignored, connection alive, %u bytes in order", c->sent);
}

/* The ACK-less segment is discarded: its bytes never reach the reader. */
static enum verdict check_noack(struct env *e, struct conn *c,
			       const struct testcase *tc,
			       const struct held *h, struct result *r)
{
	uint32_t end = c->sent - tc->segs[1].len;

	if (!read_all_to(c, end, r) ||
	    !quiet(c, r, "the bytes of the segment without ACK were delivered"))
		return r->v;
	return set_result(r, V_PASS, "ACK-less segment discarded, %u bytes in order", end);
}

/* Urgent byte (B's last) out of band; the rest in order. */
static enum verdict check_urg(struct env *e, struct conn *c,
			      const struct testcase *tc,
			      const struct held *h, struct result *r)
{
	uint32_t urg_off = c->sent - 1;
	uint8_t b = 0;
	ssize_t n;

	if (!read_all_to(c, urg_off, r))
		return r->v;
	n = recv(c->fd, &b, 1, MSG_OOB | MSG_DONTWAIT);
	if (n != 1)
		return set_result(r, V_FAIL, "no urgent byte (recv MSG_OOB: %s)",
				  n < 0 ? strerror(errno) : "0 bytes");
	if (b != stream_byte(urg_off))
		return set_result(r, V_FAIL, "urgent byte 0x%02x, expected 0x%02x", b,
				  stream_byte(urg_off));
	c->rd++;	/* the urgent byte is not in the in-band stream */
	if (!quiet(c, r, "after the urgent byte"))
		return r->v;
	return set_result(r, V_PASS, "urgent byte out of band, %u bytes in band in order", urg_off);
}

/* Out of order: once the hole is filled, everything arrives once. */
static enum verdict check_gap(struct env *e, struct conn *c,
			      const struct testcase *tc,
			      const struct held *h, struct result *r)
{
	const struct seg fill = { .flags = PKT_ACK, .len = GAP_LEN };
	uint32_t hole = c->sent - tc->segs[1].len - GAP_LEN;

	if (!read_all_to(c, hole, r) || !quiet(c, r, "across the hole"))
		return r->v;
	if (peer_send_at(e, c, hole, &fill))
		return set_result(r, V_FAIL, "writing to tun: %s", strerror(errno));
	if (!read_all_to(c, c->sent, r) || !quiet(c, r, "beyond the stream"))
		return r->v;
	return set_result(r, V_PASS, "hole filled, %u bytes in order", c->sent);
}

/*
 * Flood: with coalescing no backlog drop and every byte arrives;
 * without, whatever was accepted arrives intact, in order.
 */
static enum verdict check_flood(struct env *e, struct conn *c,
				const struct testcase *tc,
				const struct held *h, struct result *r)
{
	long long drops = h->during.drop - h->before.drop;
	size_t want = c->sent - c->rd, got, bad;
	int err;

	got = read_stream(c, want, capped_ms(c, SETTLE_MS), &err, &bad);
	diag("flood: %d segments of %d bytes, %lld backlog drops, %zu of %zu bytes read",
	     FLOOD_SEGS, FLOOD_LEN, drops, got, want);
	if (bad != (size_t)-1)
		return set_result(r, V_FAIL, "stream corrupted at offset %zu", bad);
	if (h->mode == M_HOLD && drops)
		return set_result(r, V_FAIL, "coalescing on, yet TCPBacklogDrop +%lld", drops);
	if (h->mode == M_HOLD && got != want)
		return set_result(r, V_FAIL, "received %zu of %zu bytes, then %s", got, want,
				  err_name(err));
	return set_result(r, V_PASS, "%zu bytes in order", got);
}

#define DATA(f, n)	{ .flags = (f), .len = (n) }
#define AB	PKT_ACK
#define AP	(PKT_ACK | PKT_PSH)

static const struct testcase cases[] = {
	{ "data_data", "data then data: merged, fast path taken, bytes in order",
	  MERGE_REQUIRED,
	  { DATA(AP, SEG_A_LEN), DATA(AP, SEG_B_LEN) }, 2, check_stream, true },
	{ "data_psh", "data then data|PSH: merged, bytes in order", MERGE_REQUIRED,
	  { DATA(AB, SEG_A_LEN), DATA(AP, SEG_B_LEN) }, 2, check_stream, false },
	{ "data_fin", "data then data|FIN: merged; EOF, CLOSE_WAIT, FIN acknowledged",
	  MERGE_REQUIRED,
	  { DATA(AP, SEG_A_LEN), DATA(AP | PKT_FIN, SEG_B_LEN) }, 2, check_fin, false },
	{ "data_rst", "data then RST: not merged; reset, nothing after it", MERGE_FORBIDDEN,
	  { DATA(AP, SEG_A_LEN), DATA(PKT_ACK | PKT_RST, 0) }, 2, check_rst, false },
	{ "data_syn", "data then SYN: not merged; challenged, connection survives",
	  MERGE_FORBIDDEN,
	  { DATA(AP, SEG_A_LEN), DATA(PKT_SYN, 0) }, 2, check_syn, false },
	{ "data_noack", "data then data without ACK: not merged; ACK-less bytes discarded",
	  MERGE_FORBIDDEN,
	  { DATA(AP, SEG_A_LEN), DATA(PKT_PSH, SEG_B_LEN) }, 2, check_noack, false },
	{ "data_urg", "data then data|URG: not merged; urgent byte out of band",
	  MERGE_FORBIDDEN,
	  { DATA(AP, SEG_A_LEN),
	    { .flags = AP | PKT_URG, .len = SEG_B_LEN, .urg = SEG_B_LEN } },
	  2, check_urg, false },
	{ "data_ece", "data then data|ECE: not merged, bytes in order", MERGE_FORBIDDEN,
	  { DATA(AP, SEG_A_LEN), DATA(AP | PKT_ECE, SEG_B_LEN) }, 2, check_stream, false },
	{ "data_cwr", "data then data|CWR: not merged, bytes in order", MERGE_FORBIDDEN,
	  { DATA(AP, SEG_A_LEN), DATA(AP | PKT_CWR, SEG_B_LEN) }, 2, check_stream, false },
	{ "data_optlen", "header lengths differ (options on one): not merged, bytes in order",
	  MERGE_FORBIDDEN,
	  { DATA(AP, SEG_A_LEN),
	    { .flags = AP, .len = SEG_B_LEN, .opt = ts_opt_b, .optlen = 12 } },
	  2, check_stream, false },
	{ "data_tsval", "same options, different timestamps: not merged, bytes in order",
	  MERGE_FORBIDDEN,
	  { { .flags = AP, .len = SEG_A_LEN, .opt = ts_opt_a, .optlen = 12 },
	    { .flags = AP, .len = SEG_B_LEN, .opt = ts_opt_b, .optlen = 12 } },
	  2, check_stream, false },
	{ "data_tos", "DS field differs: not merged, bytes in order", MERGE_FORBIDDEN,
	  { DATA(AP, SEG_A_LEN), { .flags = AP, .len = SEG_B_LEN, .tos = 0x20 } },
	  2, check_stream, false },
	{ "data_gap", "sequence gap: not merged; all delivered once the hole is filled",
	  MERGE_FORBIDDEN,
	  { DATA(AP, SEG_A_LEN), { .flags = AP, .len = SEG_B_LEN, .gap = GAP_LEN } },
	  2, check_gap, false },
	{ "flood", "1000 small segments past the backlog limit: merged, no drop, intact",
	  MERGE_REQUIRED, { }, 0, check_flood, false },
};

/* A run of one case in one family and mode. */
struct item {
	const struct testcase *tc;
	int fam;
	enum mode mode;
	char name[64];
};

static void item_name(struct item *it, const struct env *e)
{
	snprintf(it->name, sizeof(it->name), "%s_%s%s", e->fam[it->fam].name,
		 mode_prefix[it->mode], it->tc->name);
}

/* The kernel's decision: merged or not, against what the mode wants. */
static enum verdict check_merge(const struct item *it, const struct held *h,
				struct result *r)
{
	long long merged = h->during.coalesce - h->before.coalesce;
	bool may_merge = it->mode == M_HOLD && it->tc->merge == MERGE_REQUIRED;
	char sem[sizeof(r->why)];

	if (merged > 0 && !may_merge) {
		snprintf(sem, sizeof(sem), "%s", r->why);
		return set_result(r, V_FAIL, "merged in the backlog (TCPBacklogCoalesce +%lld) %s; %s",
				  merged,
				  it->mode == M_HOLD ? "where it must not be" :
				  it->mode == M_OFF ? "with tcp_backlog_coalesce=0" :
				  "with no backlog at all", sem);
	}
	if (r->v != V_PASS)
		return r->v;
	if (may_merge && merged < 1)
		return set_result(r, V_SKIP, "inconclusive: TCPBacklogCoalesce +%lld, a merge was required: the coalescing path was not exercised",
				  merged);
	if (may_merge && it->tc->fast_path && h->after.hphits == h->during.hphits)
		return set_result(r, V_SKIP, "inconclusive: the merged segment missed the fast path (TCPHPHits +0), where a lost FIN would show");
	if (it->mode != M_CTL && it->tc->nsegs &&
	    h->during.drop != h->before.drop)
		return set_result(r, V_SKIP, "inconclusive: the backlog dropped %lld segments",
				  h->during.drop - h->before.drop);
	return V_PASS;
}

static enum verdict run_item(struct env *e, const struct item *it,
			     struct result *r)
{
	const struct fam *f = &e->fam[it->fam];
	struct conn c = { .fd = -1 };
	struct held h;

	if (!f->ok)
		return set_result(r, V_NA, "%s", f->why);
	if (it->mode == M_OFF && !e->has_sysctl)
		return set_result(r, V_NA, "net.ipv4.tcp_backlog_coalesce absent (a kernel without the kgate patch)");
	if (e->has_sysctl && set_coalesce(it->mode != M_OFF)) {
		set_result(r, V_FAIL, "setting tcp_backlog_coalesce: %s", strerror(errno));
		goto out;
	}
	if (conn_open(e, f, &c, r) != V_PASS ||
	    run_segs(e, &c, it->tc, it->mode, &h, r) != V_PASS)
		goto out;
	diag("%s: TCPBacklogCoalesce %+lld, TCPBacklogDrop %+lld; TCPHPHits %+lld after",
	     it->name, h.during.coalesce - h.before.coalesce,
	     h.during.drop - h.before.drop, h.after.hphits - h.during.hphits);
	it->tc->check(e, &c, it->tc, &h, r);
	check_merge(it, &h, r);
out:
	conn_close(e, &c);
	if (e->has_sysctl)
		set_coalesce(1);
	return r->v;
}

static void print_help(FILE *f, const char *prog)
{
	size_t i;

	fprintf(f,
		"Usage: %s [options]\n"
		"Deterministic test of TCP backlog coalescing (tcp_add_backlog()).\n"
		"Needs root (a network namespace, tun and userfaultfd); it runs in a\n"
		"namespace of its own and touches nothing else.\n\n"
		"  -c, --case NAME     run only this case: a full name from --list or\n"
		"                      a base name (data_fin) for all its variants;\n"
		"                      repeatable\n"
		"  -f, --family F      ipv4 or ipv6 only\n"
		"  -m, --mode M        hold, off (tcp_backlog_coalesce=0) or ctl only\n"
		"  -l, --list          list the case names and exit\n"
		"  -n, --repeat N      run the selection N times (default 1)\n"
		"  -t, --timeout MS    deadline of each case (default 10000)\n"
		"  -p, --ptest         Yocto ptest output (PASS:/FAIL:/SKIP: name)\n"
		"  -h, --help          this text\n\n"
		"Names are <family>_<case> (held socket, coalescing on),\n"
		"<family>_off_<case> (held, tcp_backlog_coalesce=0: nothing may merge)\n"
		"and <family>_ctl_<case> (control: no hold, no backlog).\n"
		"Exit status: 0 all passed (or not applicable), 1 a case failed,\n"
		"4 none failed but a case was inconclusive, 2 usage.\n\nCases:\n", prog);
	for (i = 0; i < ARRAY_SIZE(cases); i++)
		fprintf(f, "  %-12s %s\n", cases[i].name, cases[i].desc);
}

static struct item items[ARRAY_SIZE(cases) * 2 * M_COUNT];

static int build_items(struct env *e)
{
	int n = 0, fam, mode;
	size_t i;

	for (fam = 0; fam < 2; fam++)
		for (mode = 0; mode < M_COUNT; mode++)
			for (i = 0; i < ARRAY_SIZE(cases); i++) {
				items[n].tc = &cases[i];
				items[n].fam = fam;
				items[n].mode = (enum mode)mode;
				item_name(&items[n], e);
				n++;
			}
	return n;
}

static bool want_item(const struct item *it, const struct env *e,
		      char **names, int nnames, const char *fam,
		      const char *mode)
{
	int i;

	if (fam && strcmp(fam, e->fam[it->fam].name))
		return false;
	if (mode && strcmp(mode, mode_name[it->mode]))
		return false;
	if (!nnames)
		return true;
	for (i = 0; i < nnames; i++)
		if (!strcmp(names[i], it->name) || !strcmp(names[i], it->tc->name))
			return true;
	return false;
}

static void report(bool ptest, int num, const char *name,
		   const struct result *r)
{
	const char *tag = r->v == V_PASS ? "PASS" : r->v == V_FAIL ? "FAIL" : "SKIP";

	if (r->v != V_SKIP && r->v != V_NA)
		diag("%s: %s", name, r->why);
	if (ptest) {
		if (r->v == V_SKIP || r->v == V_NA)
			diag("%s: %s", name, r->why);
		printf("%s: %s\n", tag, name);
	} else if (r->v == V_SKIP || r->v == V_NA) {
		printf("ok %d %s # SKIP %s\n", num, name, r->why);
	} else {
		printf("%sok %d %s\n", r->v == V_PASS ? "" : "not ", num, name);
	}
	fflush(stdout);
}

int main(int argc, char **argv)
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
	struct env e = {
		.tun = -1, .hold.fd = -1, .next_port = 40000, .timeout_ms = 10000,
		.fam = {
			{ .name = "ipv4", .v6 = 0, .lfd = -1, .mss = 1460 },
			{ .name = "ipv6", .v6 = 1, .lfd = -1, .mss = 1440 },
		},
	};
	int pass = 0, fail = 0, skip = 0, inconclusive = 0, num = 0;
	int i, k, opt, repeat = 1, nitems, nsel = 0, nnames = 0;
	const char *fam = NULL, *mode = NULL;
	char **names = calloc((size_t)argc, sizeof(*names));
	bool list = false, ptest = false;
	bool sel[ARRAY_SIZE(items)];
	struct utsname u;
	char *end;

	nitems = build_items(&e);
	while ((opt = getopt_long(argc, argv, "c:f:m:ln:t:ph", opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			names[nnames++] = optarg;
			break;
		case 'f':
			if (strcmp(optarg, "ipv4") && strcmp(optarg, "ipv6")) {
				fprintf(stderr, "%s: --family wants ipv4 or ipv6\n", argv[0]);
				return 2;
			}
			fam = optarg;
			break;
		case 'm':
			for (k = 0; k < M_COUNT; k++)
				if (!strcmp(optarg, mode_name[k]))
					break;
			if (k == M_COUNT) {
				fprintf(stderr, "%s: --mode wants hold, off or ctl\n", argv[0]);
				return 2;
			}
			mode = optarg;
			break;
		case 'l':
			list = true;
			break;
		case 'n':
			repeat = (int)strtol(optarg, &end, 10);
			if (*end || repeat < 1 || repeat > 100000) {
				fprintf(stderr, "%s: --repeat wants 1..100000\n", argv[0]);
				return 2;
			}
			break;
		case 't':
			e.timeout_ms = (int)strtol(optarg, &end, 10);
			if (*end || e.timeout_ms < 100 || e.timeout_ms > 600000) {
				fprintf(stderr, "%s: --timeout wants 100..600000 ms\n", argv[0]);
				return 2;
			}
			break;
		case 'p':
			ptest = true;
			break;
		case 'h':
			print_help(stdout, argv[0]);
			return 0;
		default:
			print_help(stderr, argv[0]);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", argv[0], argv[optind]);
		return 2;
	}
	for (i = 0; i < nitems; i++) {
		sel[i] = want_item(&items[i], &e, names, nnames, fam, mode);
		nsel += sel[i];
	}
	for (k = 0; k < nnames; k++) {
		for (i = 0; i < nitems; i++)
			if (!strcmp(names[k], items[i].name) ||
			    !strcmp(names[k], items[i].tc->name))
				break;
		if (i == nitems) {
			fprintf(stderr, "%s: unknown case '%s' (see --list)\n", argv[0], names[k]);
			return 2;
		}
	}
	if (!nsel) {
		fprintf(stderr, "%s: the options select no case\n", argv[0]);
		return 2;
	}
	if (list) {
		for (i = 0; i < nitems; i++)
			if (sel[i])
				printf("%s\n", items[i].name);
		return 0;
	}

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!ptest)
		printf("TAP version 13\n1..%d\n", nsel * repeat);
	if (!uname(&u))
		diag("kernel %s %s %s", u.sysname, u.release, u.machine);

	signal(SIGALRM, on_alarm);
	/* Counters are per namespace: enter ours before any thread exists. */
	if (unshare(CLONE_NEWNET)) {
		printf("Bail out! unshare(CLONE_NEWNET): %s (needs root)\n", strerror(errno));
		return KSFT_FAIL;
	}
	e.has_sysctl = has_sysctl();
	if (setup_tun(&e)) {
		printf("Bail out! tun device: %s\n", strerror(errno));
		return KSFT_FAIL;
	}
	for (k = 0; k < 2; k++) {
		if (!e.fam[k].ok) {
			diag("%s cases skipped: %s", e.fam[k].name, e.fam[k].why);
			continue;
		}
		if (setup_listener(&e.fam[k])) {
			printf("Bail out! %s listening socket: %s\n", e.fam[k].name, strerror(errno));
			return KSFT_FAIL;
		}
	}
	if (uffd_open(&e.hold)) {
		printf("Bail out! userfaultfd: %s\n", strerror(errno));
		return KSFT_FAIL;
	}
	{
		struct counters c;

		if (read_counters(&c)) {
			printf("Bail out! /proc/net/netstat has no TCPBacklogCoalesce/TCPBacklogDrop/TCPHPHits\n");
			return KSFT_FAIL;
		}
	}

	for (k = 0; k < repeat; k++) {
		for (i = 0; i < nitems; i++) {
			struct result r = { V_FAIL, "" };

			if (!sel[i])
				continue;
			watchdog_case = items[i].name;
			alarm((unsigned int)(2 * e.timeout_ms / 1000 + 5));
			run_item(&e, &items[i], &r);
			alarm(0);
			report(ptest, ++num, items[i].name, &r);
			pass += r.v == V_PASS;
			fail += r.v == V_FAIL;
			skip += r.v == V_SKIP || r.v == V_NA;
			inconclusive += r.v == V_SKIP;
		}
	}
	printf("# Totals: pass:%d fail:%d xfail:0 xpass:0 skip:%d error:0\n",
	       pass, fail, skip);
	free(names);
	if (fail)
		return KSFT_FAIL;
	return inconclusive ? KSFT_SKIP : KSFT_PASS;
}
