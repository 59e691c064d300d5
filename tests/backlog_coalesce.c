// SPDX-License-Identifier: GPL-2.0
/*
 * backlog_coalesce: deterministic test of TCP backlog coalescing
 * (tcp_add_backlog()) against the Linux 5.0 regression where a FIN
 * merged into an earlier segment was lost.
 *
 * The program creates its own network namespace and a tun device, and
 * plays the remote TCP peer itself: it writes crafted IPv4/TCP segments
 * into tun and reads the kernel's replies from it. To put segments into
 * the socket backlog, a receiver thread calls recv() into a page
 * registered with userfaultfd: the kernel faults while copying with the
 * socket owned, so the thread sleeps holding the socket lock. The
 * userfaultfd event tells the exact moment; the segments are injected
 * then (they go through tcp_add_backlog()), the fault is resolved, and
 * release_sock() processes the backlog.
 *
 * Whether the kernel merged is read from TCPBacklogCoalesce in the
 * namespace's /proc/net/netstat while the socket is still held. A case
 * whose precondition did not happen reports SKIP (inconclusive), never
 * pass.
 *
 * Output: KTAP (kselftest); exit 0 when every case passed, 1 when one
 * failed, 4 when none failed but one was inconclusive.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/if_tun.h>
#include <linux/userfaultfd.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "pkt.h"

#define TUN_NAME	"kgate0"
#define LOCAL_ADDR	0xc6120001u	/* 198.18.0.1: the kernel under test */
#define PEER_ADDR	0xc6120002u	/* 198.18.0.2: played by this program */
#define LISTEN_PORT	5001
#define PEER_WINDOW	65535
#define PEER_MSS	1460
#define PRIME_LEN	8	/* queued before the hold; 1 byte is read */
#define SEG_A_LEN	300	/* first backlog segment */
#define SEG_B_LEN	100	/* fits A's spare room: it can be merged */
#define STREAM_MAX	4096
#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))
/* What the kernel already processed shows up at once after release. */
#define SETTLE_MS	2000

#define KSFT_PASS	0
#define KSFT_FAIL	1
#define KSFT_SKIP	4

enum verdict { V_PASS, V_FAIL, V_SKIP };

struct env {
	int tun;
	int lfd;
	int uffd;
	uint8_t *page;
	long pagesz;
	uint16_t next_port;
	uint16_t ip_id;
	int timeout_ms;
	bool verbose;
};

struct conn {
	int fd;
	uint16_t pport;		/* the peer's (our) port */
	uint32_t iss;		/* the peer's initial sequence number */
	uint32_t snd_nxt;	/* the peer's next sequence number */
	uint32_t rcv_nxt;	/* the kernel's next sequence number */
	uint32_t last_ack;	/* highest ACK the kernel sent */
	bool acked_any;
	uint32_t sent;		/* stream bytes sent so far */
	struct timespec deadline;
};

struct counters {
	long long coalesce;
	long long drop;
	long long hphits;
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
	char why[256];
};

struct testcase {
	const char *name;
	const char *desc;
	enum verdict (*run)(struct env *e, struct result *r);
};

static void diag(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

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

static uint8_t stream_byte(uint32_t off)
{
	return (uint8_t)(off * 131u + 7u + (off >> 8));
}

static void now(struct timespec *ts)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
}

static void deadline_in(struct timespec *ts, int ms)
{
	now(ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

static int ms_left(const struct timespec *deadline)
{
	struct timespec t;
	long long ms;

	now(&t);
	ms = (long long)(deadline->tv_sec - t.tv_sec) * 1000 +
	     (deadline->tv_nsec - t.tv_nsec) / 1000000;
	return ms < 0 ? 0 : (int)ms;
}

static int settle_ms(const struct conn *c)
{
	int left = ms_left(&c->deadline);

	return left < SETTLE_MS ? left : SETTLE_MS;
}

static int write_file(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, val, strlen(val));
	close(fd);
	return n == (ssize_t)strlen(val) ? 0 : -1;
}

/* TcpExt counters of this thread's network namespace. */
static int read_counters(struct counters *c)
{
	char names[8192], values[8192];
	char *n, *v, *sn, *sv;
	FILE *f;
	int found = 0;

	f = fopen("/proc/net/netstat", "re");
	if (!f)
		return -1;
	while (fgets(names, sizeof(names), f)) {
		if (!fgets(values, sizeof(values), f))
			break;
		if (strncmp(names, "TcpExt:", 7))
			continue;
		n = strtok_r(names + 7, "\n ", &sn);
		v = strtok_r(values + 7, "\n ", &sv);
		while (n && v) {
			if (!strcmp(n, "TCPBacklogCoalesce")) {
				c->coalesce = atoll(v);
				found |= 1;
			} else if (!strcmp(n, "TCPBacklogDrop")) {
				c->drop = atoll(v);
				found |= 2;
			} else if (!strcmp(n, "TCPHPHits")) {
				c->hphits = atoll(v);
				found |= 4;
			}
			n = strtok_r(NULL, "\n ", &sn);
			v = strtok_r(NULL, "\n ", &sv);
		}
	}
	fclose(f);
	return found == 7 ? 0 : -1;
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
	/* No IPv6 chatter (router solicitations) on the wire we read. */
	write_file("/proc/sys/net/ipv6/conf/" TUN_NAME "/disable_ipv6", "1");

	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	memset(&ifr, 0, sizeof(ifr));
	strncpy(ifr.ifr_name, TUN_NAME, IFNAMSIZ - 1);
	sin = (struct sockaddr_in *)&ifr.ifr_addr;
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(LOCAL_ADDR);
	if (ioctl(s, SIOCSIFADDR, &ifr))
		goto err;
	sin->sin_addr.s_addr = htonl(0xffffff00u);
	if (ioctl(s, SIOCSIFNETMASK, &ifr))
		goto err;
	if (ioctl(s, SIOCGIFFLAGS, &ifr))
		goto err;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr))
		goto err;
	close(s);
	return 0;
err:
	close(s);
	return -1;
}

static int setup_listener(struct env *e)
{
	struct sockaddr_in sin = {
		.sin_family = AF_INET,
		.sin_port = htons(LISTEN_PORT),
		.sin_addr.s_addr = htonl(LOCAL_ADDR),
	};
	int one = 1;

	e->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (e->lfd < 0)
		return -1;
	setsockopt(e->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(e->lfd, (struct sockaddr *)&sin, sizeof(sin)))
		return -1;
	return listen(e->lfd, 16);
}

/*
 * Map a fresh, never touched page and register it, so that the next
 * copy into it faults. (A new mapping rather than MADV_DONTNEED: tiny
 * kernels are often built without madvise().)
 */
static int arm_page(struct env *e)
{
	struct uffdio_register reg;

	if (e->page && munmap(e->page, e->pagesz))
		return -1;
	e->page = mmap(NULL, e->pagesz, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (e->page == MAP_FAILED) {
		e->page = NULL;
		return -1;
	}
	memset(&reg, 0, sizeof(reg));
	reg.range.start = (unsigned long)e->page;
	reg.range.len = e->pagesz;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING;
	return ioctl(e->uffd, UFFDIO_REGISTER, &reg);
}

static int setup_uffd(struct env *e)
{
	struct uffdio_api api = { .api = UFFD_API };
	int dev;

	e->uffd = (int)syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (e->uffd < 0) {
		/* Without CAP_SYS_PTRACE: the 6.1+ device node. */
		dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
		if (dev < 0)
			return -1;
		e->uffd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
		close(dev);
		if (e->uffd < 0)
			return -1;
	}
	if (ioctl(e->uffd, UFFDIO_API, &api))
		return -1;
	e->pagesz = sysconf(_SC_PAGESIZE);
	return 0;
}

/* Write one segment from the peer to the kernel. */
static int peer_send(struct env *e, struct conn *c, uint8_t flags,
		     const uint8_t *data, size_t len, const uint8_t *opt,
		     size_t optlen)
{
	uint8_t buf[2048];
	struct pkt_tcp s = {
		.saddr = PEER_ADDR, .daddr = LOCAL_ADDR,
		.sport = c->pport, .dport = LISTEN_PORT,
		.seq = c->snd_nxt, .ack = c->rcv_nxt,
		.flags = flags, .window = PEER_WINDOW,
		.ip_id = e->ip_id++,
		.opt = opt, .optlen = optlen,
		.data = data, .len = len,
	};
	size_t n = pkt_build4(buf, sizeof(buf), &s);

	if (!n || write(e->tun, buf, n) != (ssize_t)n)
		return -1;
	c->snd_nxt += (uint32_t)len + !!(flags & PKT_SYN) + !!(flags & PKT_FIN);
	return 0;
}

/* Send the next len bytes of the test stream. */
static int peer_send_stream(struct env *e, struct conn *c, uint8_t flags,
			    size_t len)
{
	uint8_t data[STREAM_MAX];
	size_t i;

	if (len > sizeof(data))
		return -1;
	for (i = 0; i < len; i++)
		data[i] = stream_byte(c->sent + (uint32_t)i);
	c->sent += (uint32_t)len;
	return peer_send(e, c, flags, data, len, NULL, 0);
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
	ssize_t n;

	deadline_in(&dl, ms);
	for (;;) {
		n = read(e->tun, buf, cap);
		if (n < 0 && errno != EAGAIN)
			return -1;
		if (n > 0) {
			if (pkt_parse4(buf, (size_t)n, s) ||
			    s->saddr != LOCAL_ADDR || s->daddr != PEER_ADDR ||
			    s->sport != LISTEN_PORT || s->dport != c->pport)
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

static int conn_open(struct env *e, struct conn *c, struct result *r)
{
	static const uint8_t mss_opt[4] = { 2, 4, PEER_MSS >> 8, PEER_MSS & 0xff };
	struct pollfd pfd = { .fd = e->lfd, .events = POLLIN };
	struct sockaddr_in sin;
	socklen_t slen = sizeof(sin);
	uint8_t buf[2048];
	struct pkt_tcp s;
	int rc;

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	deadline_in(&c->deadline, e->timeout_ms);
	c->pport = e->next_port++;
	c->iss = 0x10000000u + ((uint32_t)c->pport << 12);
	c->snd_nxt = c->iss;

	/* Only MSS offered: no timestamps, no window scaling, no SACK. */
	if (peer_send(e, c, PKT_SYN, NULL, 0, mss_opt, sizeof(mss_opt)))
		return set_result(r, V_FAIL, "writing SYN to tun: %s", strerror(errno));
	for (;;) {
		rc = peer_recv(e, c, &s, buf, sizeof(buf), ms_left(&c->deadline));
		if (rc <= 0)
			return set_result(r, V_FAIL, "no SYN-ACK from the kernel");
		if ((s.flags & (PKT_SYN | PKT_ACK)) == (PKT_SYN | PKT_ACK) &&
		    s.ack == c->snd_nxt)
			break;
	}
	c->rcv_nxt = s.seq + 1;
	if (peer_send(e, c, PKT_ACK, NULL, 0, NULL, 0))
		return set_result(r, V_FAIL, "writing ACK to tun: %s", strerror(errno));
	for (;;) {
		c->fd = accept4(e->lfd, (struct sockaddr *)&sin, &slen, SOCK_CLOEXEC);
		if (c->fd >= 0)
			break;
		if (errno != EAGAIN || !ms_left(&c->deadline) ||
		    poll(&pfd, 1, ms_left(&c->deadline)) < 0)
			return set_result(r, V_FAIL, "accept: %s", strerror(errno));
	}
	if (ntohs(sin.sin_port) != c->pport)
		return set_result(r, V_FAIL, "accepted port %u, expected %u",
				  ntohs(sin.sin_port), c->pport);
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

static void *receiver_main(void *arg)
{
	struct receiver *rx = arg;

	/* One byte: the backlog is then processed by release_sock(). */
	rx->ret = recv(rx->fd, rx->buf, 1, 0);
	rx->err = rx->ret < 0 ? errno : 0;
	return NULL;
}

/* Wait for the receiver to fault on the registered page. */
static int wait_fault(struct env *e, int ms)
{
	struct pollfd pfd = { .fd = e->uffd, .events = POLLIN };
	struct uffd_msg msg;
	struct timespec dl;
	ssize_t n;

	deadline_in(&dl, ms);
	for (;;) {
		n = read(e->uffd, &msg, sizeof(msg));
		if (n == sizeof(msg) && msg.event == UFFD_EVENT_PAGEFAULT)
			return 1;
		if (n < 0 && errno != EAGAIN)
			return -1;
		if (!ms_left(&dl))
			return 0;
		if (poll(&pfd, 1, ms_left(&dl)) < 0 && errno != EINTR)
			return -1;
	}
}

/* Map a zero page at the registered address: wakes the faulting thread. */
static void resolve_fault(struct env *e)
{
	static uint8_t zero[65536];
	struct uffdio_copy cp = {
		.dst = (unsigned long)e->page,
		.src = (unsigned long)zero,
		.len = (unsigned long)e->pagesz,
	};

	if (ioctl(e->uffd, UFFDIO_COPY, &cp) && errno != EEXIST)
		diag("UFFDIO_COPY: %s", strerror(errno));
}

static int join_receiver(struct receiver *rx, int ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000 + 1;
	return pthread_timedjoin_np(rx->thread, NULL, &ts);
}

/* What happened while the socket was held. */
struct held {
	struct counters before, during, after;
	bool held;		/* the receiver faulted with the socket owned */
	uint8_t first;		/* the byte the faulting recv() returned */
	ssize_t rx_ret;
	int rx_err;
};

struct seg {
	uint8_t flags;
	size_t len;
};

/*
 * Queue PRIME_LEN stream bytes, hold the socket in a 1-byte recv(),
 * inject segs while it is held, then release it. Returns V_PASS when
 * the sequence ran (h says what happened), V_FAIL/V_SKIP with r set.
 */
static enum verdict run_held(struct env *e, struct conn *c,
			     const struct seg *segs, int nsegs,
			     struct held *h, struct result *r)
{
	struct receiver rx = { .fd = c->fd };
	int i, rc;

	memset(h, 0, sizeof(*h));
	if (arm_page(e))
		return set_result(r, V_FAIL, "userfaultfd page: %s", strerror(errno));
	rx.buf = e->page;
	if (peer_send_stream(e, c, PKT_ACK | PKT_PSH, PRIME_LEN))
		return set_result(r, V_FAIL, "writing to tun: %s", strerror(errno));
	peer_drain(e, c, 0);
	if (pthread_create(&rx.thread, NULL, receiver_main, &rx))
		return set_result(r, V_FAIL, "pthread_create failed");

	rc = wait_fault(e, ms_left(&c->deadline));
	h->held = rc == 1;
	if (h->held) {
		read_counters(&h->before);
		for (i = 0; i < nsegs; i++) {
			if (peer_send_stream(e, c, segs[i].flags, segs[i].len))
				diag("writing segment %d to tun: %s", i, strerror(errno));
		}
		read_counters(&h->during);
	}
	resolve_fault(e);
	if (!h->held)
		shutdown(c->fd, SHUT_RD);	/* wake a receiver that never faulted */
	if (join_receiver(&rx, ms_left(&c->deadline))) {
		printf("Bail out! receiver thread stuck in recv()\n");
		exit(KSFT_FAIL);
	}
	read_counters(&h->after);
	h->rx_ret = rx.ret;
	h->rx_err = rx.err;
	h->first = e->page[0];
	if (!h->held)
		return set_result(r, V_SKIP,
				  "receiver never faulted on the userfaultfd page: socket not held, backlog not exercised");
	if (rx.ret != 1 || h->first != stream_byte(0))
		return set_result(r, V_FAIL, "held recv() returned %zd (%s), byte 0x%02x, expected 1 byte 0x%02x",
				  rx.ret, rx.ret < 0 ? strerror(rx.err) : "ok",
				  h->first, stream_byte(0));
	return V_PASS;
}

/*
 * Read the rest of the stream (from offset 1) until total bytes, EOF,
 * error or the deadline. Returns bytes read; *err is 0, -1 for EOF,
 * an errno, or ETIMEDOUT.
 */
static size_t read_stream(struct conn *c, size_t want, int ms, int *err,
			  size_t *bad_at)
{
	struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
	uint8_t buf[STREAM_MAX];
	struct timespec dl;
	size_t got = 0, i;
	ssize_t n;

	*err = 0;
	*bad_at = (size_t)-1;
	deadline_in(&dl, ms);
	while (got < want || want == (size_t)-1) {
		if (poll(&pfd, 1, ms_left(&dl)) <= 0) {
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
			if (*bad_at == (size_t)-1 &&
			    buf[i] != stream_byte((uint32_t)(1 + got + i)))
				*bad_at = 1 + got + i;
		got += (size_t)n;
	}
	return got;
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

	return st > 0 && st < (int)ARRAY_SIZE(names) ?
	       names[st] : "?";
}

static void held_diag(const struct held *h)
{
	diag("backlog: TCPBacklogCoalesce %+lld, TCPBacklogDrop %+lld while held; TCPHPHits %+lld on release",
	     h->during.coalesce - h->before.coalesce,
	     h->during.drop - h->before.drop,
	     h->after.hphits - h->during.hphits);
}

/* Open a connection and run segs through the held socket. */
static bool held_start(struct env *e, struct conn *c, const struct seg *segs,
		       int nsegs, struct held *h, struct result *r)
{
	if (conn_open(e, c, r) != V_PASS ||
	    run_held(e, c, segs, nsegs, h, r) != V_PASS)
		return false;
	held_diag(h);
	return true;
}

static long long held_merged(const struct held *h)
{
	return h->during.coalesce - h->before.coalesce;
}

/* Fail r unless exactly want bytes of the stream arrived intact. */
static bool stream_failed(struct result *r, size_t got, size_t want, int err,
			  size_t bad)
{
	if (bad != (size_t)-1) {
		set_result(r, V_FAIL, "stream corrupted at byte %zu", bad);
		return true;
	}
	if (got != want) {
		set_result(r, V_FAIL, "received %zu of %zu bytes (%s)", got, want,
			   err == -1 ? "EOF" : strerror(err));
		return true;
	}
	return false;
}

/* data then data: must merge; every byte arrives in order. */
static enum verdict case_data_data(struct env *e, struct result *r)
{
	const struct seg segs[] = {
		{ PKT_ACK | PKT_PSH, SEG_A_LEN },
		{ PKT_ACK | PKT_PSH, SEG_B_LEN },
	};
	size_t want = PRIME_LEN - 1 + SEG_A_LEN + SEG_B_LEN, got, bad;
	struct conn c;
	struct held h;
	long long merged;
	int err;

	if (!held_start(e, &c, segs, 2, &h, r))
		goto out;
	merged = held_merged(&h);
	got = read_stream(&c, want, ms_left(&c.deadline), &err, &bad);
	if (stream_failed(r, got, want, err, bad))
		goto out;
	if (h.during.drop != h.before.drop)
		set_result(r, V_FAIL, "backlog dropped %lld segments",
			   h.during.drop - h.before.drop);
	else if (merged < 1)
		set_result(r, V_SKIP, "inconclusive: TCPBacklogCoalesce +%lld, expected a merge: the coalescing path was not exercised",
			   merged);
	else
		set_result(r, V_PASS, "merged %lld, %zu bytes in order", merged, got);
out:
	conn_close(e, &c);
	return r->v;
}

/* data then data|FIN: EOF, CLOSE_WAIT, and the FIN acknowledged. */
static enum verdict case_data_fin(struct env *e, struct result *r)
{
	const struct seg segs[] = {
		{ PKT_ACK | PKT_PSH, SEG_A_LEN },
		{ PKT_ACK | PKT_PSH | PKT_FIN, SEG_B_LEN },
	};
	size_t want = PRIME_LEN - 1 + SEG_A_LEN + SEG_B_LEN, got, bad;
	int err, eof_err, st, one = 1;
	uint8_t buf[2048];
	struct pkt_tcp s;
	struct conn c;
	struct held h;
	long long merged;
	bool fin_acked;

	if (!held_start(e, &c, segs, 2, &h, r))
		goto out;
	merged = held_merged(&h);
	got = read_stream(&c, want, ms_left(&c.deadline), &err, &bad);
	if (stream_failed(r, got, want, err, bad))
		goto out;
	/* All data is in; EOF must follow at once. */
	read_stream(&c, (size_t)-1, settle_ms(&c), &eof_err, &bad);
	setsockopt(c.fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
	st = tcp_state(c.fd);
	fin_acked = c.acked_any && c.last_ack == c.snd_nxt;
	while (!fin_acked && peer_recv(e, &c, &s, buf, sizeof(buf),
				       ms_left(&c.deadline)) == 1)
		fin_acked = c.last_ack == c.snd_nxt;
	diag("after FIN: read %s, state %s, kernel ACK iss+%u, FIN+1 is iss+%u",
	     eof_err == -1 ? "EOF" : strerror(eof_err), state_name(st),
	     c.last_ack - c.iss, c.snd_nxt - c.iss);
	if (eof_err != -1)
		set_result(r, V_FAIL, "no EOF after the merged FIN (read: %s, state %s): FIN lost",
			   strerror(eof_err), state_name(st));
	else if (st != 8)
		set_result(r, V_FAIL, "state %s after EOF, expected CLOSE_WAIT", state_name(st));
	else if (!fin_acked)
		set_result(r, V_FAIL, "the kernel never acknowledged the FIN");
	else if (merged < 1)
		set_result(r, V_SKIP, "inconclusive: TCPBacklogCoalesce +%lld: FIN not merged, the coalescing path was not exercised",
			   merged);
	else
		set_result(r, V_PASS, "FIN merged, EOF seen, CLOSE_WAIT, FIN acknowledged");
out:
	conn_close(e, &c);
	return r->v;
}

/* data then RST at the next sequence: not merged; connection reset. */
static enum verdict case_data_rst(struct env *e, struct result *r)
{
	const struct seg segs[] = {
		{ PKT_ACK | PKT_PSH, SEG_A_LEN },
		{ PKT_ACK | PKT_RST, 0 },
	};
	size_t want = PRIME_LEN - 1 + SEG_A_LEN, got, bad;
	struct conn c;
	struct held h;
	long long merged;
	int err, st;

	if (!held_start(e, &c, segs, 2, &h, r))
		goto out;
	merged = held_merged(&h);
	/* Data queued before the RST may still be read; then the error. */
	got = read_stream(&c, (size_t)-1, settle_ms(&c), &err, &bad);
	st = tcp_state(c.fd);
	diag("after RST: %zu bytes then %s, state %s", got,
	     err == -1 ? "EOF" : strerror(err), state_name(st));
	if (bad != (size_t)-1)
		set_result(r, V_FAIL, "stream corrupted at byte %zu", bad);
	else if (got > want)
		set_result(r, V_FAIL, "received %zu bytes, more than the %zu sent", got, want);
	else if (merged > 0)
		set_result(r, V_FAIL, "the RST was merged into the backlog tail (TCPBacklogCoalesce +%lld)%s",
			   merged, err == ECONNRESET ? "" : " and the connection was not reset");
	else if (err != ECONNRESET)
		set_result(r, V_FAIL, "connection not reset: read ended with %s, state %s",
			   err == -1 ? "EOF" : strerror(err), state_name(st));
	else if (h.during.drop != h.before.drop)
		set_result(r, V_SKIP, "inconclusive: the backlog dropped %lld segments",
			   h.during.drop - h.before.drop);
	else
		set_result(r, V_PASS, "RST kept apart, connection reset");
out:
	conn_close(e, &c);
	return r->v;
}

static const struct testcase cases[] = {
	{ "data_data", "data then data: merged, every byte in order", case_data_data },
	{ "data_fin", "data then data|FIN: EOF, CLOSE_WAIT, FIN acknowledged", case_data_fin },
	{ "data_rst", "data then RST: not merged, connection reset", case_data_rst },
};

#define NCASES ((int)ARRAY_SIZE(cases))

static void print_help(FILE *f, const char *prog)
{
	int i;

	fprintf(f,
		"Usage: %s [options]\n"
		"Deterministic TCP backlog coalescing test (tcp_add_backlog()).\n"
		"Needs root (a network namespace, tun and userfaultfd); the\n"
		"test runs in a namespace of its own and touches nothing else.\n\n"
		"  -c, --case NAME    run only this case (repeatable)\n"
		"  -l, --list         list the cases and exit\n"
		"  -n, --repeat N     run the selected cases N times (default 1)\n"
		"  -t, --timeout MS   deadline of each case (default 10000)\n"
		"  -h, --help         this text\n\n"
		"Output is KTAP. Exit status: 0 all passed, 1 a case failed,\n"
		"4 none failed but a case was inconclusive (SKIP), 2 usage.\n\n"
		"Cases:\n", prog);
	for (i = 0; i < NCASES; i++)
		fprintf(f, "  %-12s %s\n", cases[i].name, cases[i].desc);
}

static void print_sysctl(void)
{
	char buf[16] = "";
	int fd = open("/proc/sys/net/ipv4/tcp_backlog_coalesce", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0) {
		diag("net.ipv4.tcp_backlog_coalesce: absent (a kernel without the kgate patch)");
		return;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	diag("net.ipv4.tcp_backlog_coalesce: %s", buf);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "case", required_argument, NULL, 'c' },
		{ "list", no_argument, NULL, 'l' },
		{ "repeat", required_argument, NULL, 'n' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct env e = { .tun = -1, .lfd = -1, .uffd = -1, .next_port = 40000,
			 .timeout_ms = 10000 };
	bool selected[NCASES] = { false };
	int i, n, opt, repeat = 1, nsel = 0, num = 0;
	int pass = 0, fail = 0, skip = 0;
	struct utsname u;
	char *end;

	while ((opt = getopt_long(argc, argv, "c:ln:t:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			for (i = 0; i < NCASES; i++)
				if (!strcmp(optarg, cases[i].name))
					break;
			if (i == NCASES) {
				fprintf(stderr, "%s: unknown case '%s' (see --list)\n", argv[0], optarg);
				return 2;
			}
			selected[i] = true;
			break;
		case 'l':
			for (i = 0; i < NCASES; i++)
				printf("%s\n", cases[i].name);
			return 0;
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
	for (i = 0; i < NCASES; i++)
		nsel += selected[i];
	if (!nsel)
		for (i = 0; i < NCASES; i++, nsel++)
			selected[i] = true;

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("TAP version 13\n");
	printf("1..%d\n", nsel * repeat);
	if (!uname(&u))
		diag("kernel %s %s %s", u.sysname, u.release, u.machine);

	/* Counters are per namespace: enter ours before any thread exists. */
	if (unshare(CLONE_NEWNET)) {
		printf("Bail out! unshare(CLONE_NEWNET): %s (needs root)\n", strerror(errno));
		return KSFT_FAIL;
	}
	print_sysctl();
	if (setup_tun(&e)) {
		printf("Bail out! tun device: %s\n", strerror(errno));
		return KSFT_FAIL;
	}
	if (setup_listener(&e)) {
		printf("Bail out! listening socket: %s\n", strerror(errno));
		return KSFT_FAIL;
	}
	if (setup_uffd(&e)) {
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

	for (n = 0; n < repeat; n++) {
		for (i = 0; i < NCASES; i++) {
			struct result r = { V_FAIL, "" };

			if (!selected[i])
				continue;
			num++;
			cases[i].run(&e, &r);
			switch (r.v) {
			case V_PASS:
				pass++;
				diag("%s: %s", cases[i].name, r.why);
				printf("ok %d %s\n", num, cases[i].name);
				break;
			case V_SKIP:
				skip++;
				printf("ok %d %s # SKIP %s\n", num, cases[i].name, r.why);
				break;
			default:
				fail++;
				diag("%s: %s", cases[i].name, r.why);
				printf("not ok %d %s\n", num, cases[i].name);
				break;
			}
		}
	}
	printf("# Totals: pass:%d fail:%d xfail:0 xpass:0 skip:%d error:0\n",
	       pass, fail, skip);
	if (fail)
		return KSFT_FAIL;
	return skip ? KSFT_SKIP : KSFT_PASS;
}
