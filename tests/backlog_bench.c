// SPDX-License-Identifier: GPL-2.0
/*
 * backlog_bench: what TCP backlog coalescing buys, measured with
 * net.ipv4.tcp_backlog_coalesce on and off in the same boot, runs
 * alternating: receive goodput, and the time release_sock() takes to
 * drain a backlog of N full-sized segments.
 *
 * The program creates its own network namespace and a tap device and
 * plays the sender itself (198.18.0.2, IPv4 only): it writes Ethernet
 * frames into tap and reads the kernel's ACKs from it. tap, not tun:
 * written non-blocking, tap builds each skb around a page fragment, as
 * a NIC driver's build_skb() does, and only such skbs can be merged by
 * attaching their data as fragments (tun's kmalloc()ed skbs only by
 * copying into spare room, which full-sized segments never fit). Neither
 * goes through GRO: the receive path is tcp_add_backlog()'s.
 *
 *   bulk   the peer sends MSS-sized segments as fast as the receive
 *          window allows, a receiver thread reads them with recv();
 *          goodput is bytes over the time to the last byte read.
 *   drain  a receiver thread's recv() is held with userfaultfd (as in
 *          backlog_coalesce) while N segments are injected; the time
 *          from the release of the fault to recv()'s return is the
 *          backlog processing in release_sock(). N = 0 gives the cost
 *          of the release alone.
 *
 * Every byte that arrives is checked against what was sent: a broken
 * stream is a failed case, never a figure. Figures are printed as
 * "# kgate-measure NAME VALUE UNITS" lines (medians over the runs, the
 * on/off ratios with their range), results as KTAP:
 *   bulk_intact       every bulk byte arrived, in order
 *   bulk_coalesced    with coalescing on the backlog merged segments,
 *                     with it off never; SKIP (inconclusive) when the
 *                     backlog was never used, e.g. on a guest with one
 *                     CPU, where the reader never holds the socket while
 *                     segments arrive
 *   drain_intact      every drained byte arrived, in order
 *   drain_coalesced   the same rule for the held backlog
 * Exit 0 all passed, 1 a case failed, 4 none failed but one was
 * inconclusive, 2 bad usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "harness.h"
#include "pkt.h"

#define TAP_NAME	"kgate1"
#define LOCAL4		0xc6120001u	/* 198.18.0.1: the kernel under test */
#define PEER4		0xc6120002u	/* 198.18.0.2: played by this program */
#define LISTEN_PORT	5001
#define PEER_PORT	41000
#define PEER_WINDOW	65535
#define PEER_WSCALE	7
#define ETH_HLEN	14
#define ETH_P_IPV4	0x0800
#define FRAME_MAX	2048
#define PATTERN		65536	/* stream_byte() repeats every 64 KiB */
#define PRIME_LEN	8
#define RTO_MS		200	/* go back to the last ACK after this */
#define MAX_REPS	101
#define MAX_SIZES	8
#define STEP_MS		60000	/* bound of each transfer */

static const uint8_t peer_mac[6] = { 0x02, 0x6b, 0x67, 0x00, 0x00, 0x02 };

/* The peer's view of its one connection. Offsets are stream offsets. */
struct flow {
	int tap;
	int fd;			/* the accepted socket */
	uint8_t mac[6];		/* the tap device's, as the kernel sees it */
	uint16_t mss;
	uint32_t iss;		/* ours */
	uint32_t ack_seq;	/* the kernel's next sequence number */
	uint8_t wscale;		/* the kernel's window scale */
	uint32_t una;		/* first offset not acknowledged */
	uint32_t nxt;		/* next offset to send */
	uint32_t high;		/* highest offset sent so far */
	uint32_t wnd;		/* the kernel's window, in bytes, from una */
	uint16_t ip_id;
	int dupacks;		/* ACKs in a row that did not move una */
	uint32_t recover;	/* no dupack restart before una passes it */
	long long rexmits;	/* go-back-N restarts */
};

/* A reader thread: reads the stream from rd up to end, checking it. */
struct reader {
	pthread_t thread;
	int fd;
	uint32_t rd, end;
	int ms;
	int err;		/* 0, an errno, ETIMEDOUT, or -1 for EOF */
	uint32_t bad;		/* first wrong offset, or UINT32_MAX */
	struct timespec done;
};

/* The held 1-byte recv() of a drain. */
struct holder {
	pthread_t thread;
	int fd;
	uint8_t *buf;
	ssize_t ret;
	int err;
	struct timespec done;
};

struct opts {
	int reps;
	uint32_t bulk_bytes;
	int nsizes;
	int sizes[MAX_SIZES];
	int rcvbuf;
	bool bulk, drain;
};

/* One mode's samples: [0] coalescing on, [1] off. */
struct samples {
	int n;
	double v[MAX_REPS];
};

static uint8_t pattern[PATTERN + FRAME_MAX];
static uint32_t seg_sum[PATTERN];
static bool sysctl_present;

static void block_alarm(void)
{
	sigset_t set;

	/* A signal pending on a thread in recv() turns a fault into EFAULT. */
	sigemptyset(&set);
	sigaddset(&set, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
}

static void on_alarm(int sig)
{
	static const char msg[] = "Bail out! the benchmark hung past its deadline\n";

	(void)sig;
	if (write(STDOUT_FILENO, msg, sizeof(msg) - 1) < 0)
		_exit(KSFT_FAIL);
	_exit(KSFT_FAIL);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(const struct samples *s, double *lo, double *hi)
{
	double v[MAX_REPS];
	int n = s->n;

	memcpy(v, s->v, sizeof(double) * (size_t)n);
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	if (lo)
		*lo = v[0];
	if (hi)
		*hi = v[n - 1];
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void add(struct samples *s, double v)
{
	if (s->n < MAX_REPS)
		s->v[s->n++] = v;
}

static void figure(const char *name, double v, const char *units)
{
	printf("# kgate-measure %s %.3f %s\n", name, v, units);
	fflush(stdout);
}

/* Median, plus the range as a second and third figure. */
static void figure_spread(const char *name, const struct samples *s,
			   const char *units)
{
	char n[96];
	double lo, hi, m;

	if (!s->n)
		return;
	m = median(s, &lo, &hi);
	figure(name, m, units);
	snprintf(n, sizeof(n), "%s_min", name);
	figure(n, lo, units);
	snprintf(n, sizeof(n), "%s_max", name);
	figure(n, hi, units);
}

#define NETSTAT_MAX	8192

/* The whole of /proc/net/netstat, for a before/after diff. */
static void snap_netstat(char *buf)
{
	FILE *f = fopen("/proc/net/netstat", "re");
	size_t n = 0;

	if (f) {
		n = fread(buf, 1, NETSTAT_MAX - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
}

#define TCPEXT_MAX	192

struct tcpext {
	int n;
	char name[TCPEXT_MAX][40];
	long long val[TCPEXT_MAX];
};

/* The TcpExt names and values of a snapshot, in the kernel's order. */
static void parse_tcpext(const char *snap, struct tcpext *t)
{
	static char copy[NETSTAT_MAX];
	char *names, *values, *sn, *sv, *n, *v;

	t->n = 0;
	snprintf(copy, sizeof(copy), "%s", snap);
	names = strstr(copy, "TcpExt:");
	values = names ? strstr(names + 7, "TcpExt:") : NULL;
	if (!values)
		return;
	names[strcspn(names, "\n")] = '\0';
	values[strcspn(values, "\n")] = '\0';
	n = strtok_r(names + 7, " ", &sn);
	v = strtok_r(values + 7, " ", &sv);
	while (n && v && t->n < TCPEXT_MAX) {
		snprintf(t->name[t->n], sizeof(t->name[0]), "%s", n);
		t->val[t->n++] = atoll(v);
		n = strtok_r(NULL, " ", &sn);
		v = strtok_r(NULL, " ", &sv);
	}
}

/*
 * Name every TcpExt counter that changed between two snapshots: where
 * segments were dropped or pruned, the reason is there.
 */
static void diag_netstat(const char *what, const char *a, const char *b)
{
	static struct tcpext ta, tb;
	char out[1024] = "";
	size_t used = 0;
	int i;

	parse_tcpext(a, &ta);
	parse_tcpext(b, &tb);
	for (i = 0; i < ta.n && i < tb.n && used < sizeof(out) - 64; i++)
		if (tb.val[i] != ta.val[i])
			used += (size_t)snprintf(out + used, sizeof(out) - used, " %s%+lld",
						 tb.name[i], tb.val[i] - ta.val[i]);
	diag("%s: TcpExt changes:%s", what, used ? out : " none");
}

static int setup_tap(struct flow *f)
{
	struct sockaddr_in *sin;
	struct arpreq arp;
	struct ifreq ifr;
	int s, rc = -1;

	/* No IPv6 on the device: no solicitations among the ACKs. */
	write_file("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1");
	f->tap = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	if (f->tap < 0)
		return -1;
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
	strncpy(ifr.ifr_name, TAP_NAME, IFNAMSIZ - 1);
	if (ioctl(f->tap, TUNSETIFF, &ifr))
		return -1;
	/* Non-blocking writes are what make tap build page-fragment skbs. */
	if (fcntl(f->tap, F_SETFL, O_NONBLOCK))
		return -1;

	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	memset(&ifr, 0, sizeof(ifr));
	strncpy(ifr.ifr_name, TAP_NAME, IFNAMSIZ - 1);
	if (ioctl(s, SIOCGIFHWADDR, &ifr))
		goto out;
	memcpy(f->mac, ifr.ifr_hwaddr.sa_data, 6);
	sin = (struct sockaddr_in *)&ifr.ifr_addr;
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(LOCAL4);
	if (ioctl(s, SIOCSIFADDR, &ifr))
		goto out;
	sin->sin_addr.s_addr = htonl(0xffffff00u);
	if (ioctl(s, SIOCSIFNETMASK, &ifr))
		goto out;
	/* Room for every ACK of a full window: none is lost on the way. */
	ifr.ifr_qlen = 16384;
	if (ioctl(s, SIOCSIFTXQLEN, &ifr))
		goto out;
	if (ioctl(s, SIOCGIFFLAGS, &ifr))
		goto out;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr))
		goto out;

	/* A permanent neighbour: the peer need not answer ARP. */
	memset(&arp, 0, sizeof(arp));
	sin = (struct sockaddr_in *)&arp.arp_pa;
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(PEER4);
	arp.arp_ha.sa_family = ARPHRD_ETHER;
	memcpy(arp.arp_ha.sa_data, peer_mac, 6);
	arp.arp_flags = ATF_COM | ATF_PERM;
	strncpy(arp.arp_dev, TAP_NAME, sizeof(arp.arp_dev) - 1);
	rc = ioctl(s, SIOCSARP, &arp);
out:
	close(s);
	return rc;
}

static int setup_listener(int rcvbuf)
{
	struct sockaddr_in sin = {
		.sin_family = AF_INET,
		.sin_port = htons(LISTEN_PORT),
		.sin_addr.s_addr = htonl(LOCAL4),
	};
	int one = 1, fd;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/*
	 * Set before listen(): the accepted socket inherits it, and the
	 * window scale of the SYN-ACK is chosen from it. FORCE: past
	 * net.core.rmem_max, we are root.
	 */
	if (rcvbuf && setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)) &&
	    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)))
		return -1;
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) || listen(fd, 4))
		return -1;
	return fd;
}

/* Write one segment, in an Ethernet frame, from the peer. */
static int peer_xmit(struct flow *f, uint32_t seq, uint8_t flags,
		     const uint8_t *opt, size_t optlen, const uint8_t *data,
		     size_t len)
{
	uint8_t frame[FRAME_MAX];
	struct pkt_tcp s = {
		.saddr = PEER4, .daddr = LOCAL4,
		.sport = PEER_PORT, .dport = LISTEN_PORT,
		.seq = seq, .ack = f->ack_seq, .flags = flags,
		.window = PEER_WINDOW, .ip_id = f->ip_id++,
		.opt = opt, .optlen = optlen, .data = data, .len = len,
	};
	size_t n;

	memcpy(frame, f->mac, 6);
	memcpy(frame + 6, peer_mac, 6);
	pkt_put16(frame + 12, ETH_P_IPV4);
	n = pkt_build4(frame + ETH_HLEN, sizeof(frame) - ETH_HLEN, &s);
	if (!n)
		return -1;
	for (;;) {
		if (write(f->tap, frame, n + ETH_HLEN) == (ssize_t)(n + ETH_HLEN))
			return 0;
		if (errno != EAGAIN && errno != EINTR)
			return -1;
	}
}

/*
 * Send stream bytes [off, off + len): headers built here, the data
 * written from the pattern itself, its checksum part from the table
 * for full segments. The peer stays cheap, so that what is measured is
 * the receiving kernel, not the sender's copying and summing.
 */
static int send_data(struct flow *f, uint32_t off, uint32_t len)
{
	const uint8_t *data = pattern + off % PATTERN;
	uint8_t hdr[ETH_HLEN + PKT_IPV4_HLEN + PKT_TCP_HLEN];
	struct pkt_tcp s = {
		.saddr = PEER4, .daddr = LOCAL4,
		.sport = PEER_PORT, .dport = LISTEN_PORT,
		.seq = f->iss + 1 + off, .ack = f->ack_seq,
		.flags = PKT_ACK | PKT_PSH, .window = PEER_WINDOW,
		.ip_id = f->ip_id++, .data = data, .len = len,
	};
	struct iovec iov[2];
	size_t n;

	memcpy(hdr, f->mac, 6);
	memcpy(hdr + 6, peer_mac, 6);
	pkt_put16(hdr + 12, ETH_P_IPV4);
	n = pkt_build4_hdr(hdr + ETH_HLEN, sizeof(hdr) - ETH_HLEN, &s,
			   len == f->mss ? seg_sum[off % PATTERN] : pkt_sum(data, len));
	if (!n)
		return -1;
	iov[0].iov_base = hdr;
	iov[0].iov_len = n + ETH_HLEN;
	iov[1].iov_base = (void *)data;
	iov[1].iov_len = len;
	for (;;) {
		if (writev(f->tap, iov, 2) == (ssize_t)(n + ETH_HLEN + len))
			return 0;
		if (errno != EAGAIN && errno != EINTR)
			return -1;
	}
}

/*
 * seg_sum[p] = pkt_sum(pattern + p, mss) for every p: a sliding sum of
 * big-endian words, one pass for even and one for odd starts.
 */
static void fill_seg_sums(uint16_t mss)
{
	uint32_t p, sum;
	int par;

	for (par = 0; par < 2; par++) {
		sum = pkt_sum(pattern + par, mss);
		for (p = (uint32_t)par; p < PATTERN; p += 2) {
			seg_sum[p] = sum;
			sum -= pkt_get16(pattern + p);
			sum += pkt_get16(pattern + p + mss);
		}
	}
}

/*
 * Read the kernel's next segment to the peer within ms: 1 with *s
 * filled (an ACK also moves una and the window), 0 on timeout, -1.
 */
static int peer_recv(struct flow *f, struct pkt_tcp *s, int ms)
{
	struct pollfd pfd = { .fd = f->tap, .events = POLLIN };
	uint8_t frame[FRAME_MAX];
	struct timespec dl;
	uint32_t acked;
	ssize_t n;

	deadline_in(&dl, ms);
	for (;;) {
		n = read(f->tap, frame, sizeof(frame));
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -1;
		if (n > ETH_HLEN && pkt_get16(frame + 12) == ETH_P_IPV4 &&
		    !pkt_parse4(frame + ETH_HLEN, (size_t)n - ETH_HLEN, s) &&
		    s->sport == LISTEN_PORT && s->dport == PEER_PORT) {
			if ((s->flags & PKT_ACK) && !(s->flags & PKT_SYN)) {
				acked = s->ack - f->iss - 1;
				/* RFC 5681's duplicate: no data, same ACK, same window. */
				if (acked == f->una && f->nxt != f->una && !s->len &&
				    ((uint32_t)s->window << f->wscale) == f->wnd)
					f->dupacks++;
				else
					f->dupacks = 0;
				if ((int32_t)(acked - f->una) >= 0 &&
				    (int32_t)(acked - f->high) <= 0) {
					f->una = acked;
					if ((int32_t)(acked - f->nxt) > 0)
						f->nxt = acked;	/* after going back */
					f->wnd = (uint32_t)s->window << f->wscale;
				}
			}
			return 1;
		}
		if (n > 0)
			continue;
		if (!ms_left(&dl))
			return 0;
		if (poll(&pfd, 1, ms_left(&dl)) < 0 && errno != EINTR)
			return -1;
	}
}

/* The window scale option of a SYN-ACK, 0 if absent. */
static uint8_t find_wscale(const struct pkt_tcp *s)
{
	size_t i = 0;

	while (i < s->optlen) {
		uint8_t kind = s->opt[i];

		if (kind == 0)
			break;
		if (kind == 1) {
			i++;
			continue;
		}
		if (i + 1 >= s->optlen || s->opt[i + 1] < 2)
			break;
		if (kind == 3 && s->opt[i + 1] == 3 && i + 2 < s->optlen)
			return s->opt[i + 2] > 14 ? 14 : s->opt[i + 2];
		i += s->opt[i + 1];
	}
	return 0;
}

static int flow_open(struct flow *f, int lfd)
{
	const uint8_t syn_opt[8] = {
		2, 4, (uint8_t)(f->mss >> 8), (uint8_t)f->mss,	/* MSS */
		1, 3, 3, PEER_WSCALE,				/* NOP, WS */
	};
	struct pollfd pfd = { .fd = lfd, .events = POLLIN };
	struct timespec dl;
	struct pkt_tcp s;

	f->iss = 0x20000000u;
	deadline_in(&dl, 10000);
	if (peer_xmit(f, f->iss, PKT_SYN, syn_opt, sizeof(syn_opt), NULL, 0))
		return -1;
	for (;;) {
		if (peer_recv(f, &s, ms_left(&dl)) != 1) {
			errno = ETIMEDOUT;
			return -1;
		}
		if ((s.flags & (PKT_SYN | PKT_ACK)) == (PKT_SYN | PKT_ACK) &&
		    s.ack == f->iss + 1)
			break;
	}
	f->ack_seq = s.seq + 1;
	f->wscale = find_wscale(&s);
	f->wnd = s.window;	/* never scaled in a SYN-ACK */
	if (peer_xmit(f, f->iss + 1, PKT_ACK, NULL, 0, NULL, 0))
		return -1;
	for (;;) {
		f->fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (f->fd >= 0)
			return 0;
		if (errno != EAGAIN || !ms_left(&dl) ||
		    poll(&pfd, 1, ms_left(&dl)) < 0)
			return -1;
	}
}

/*
 * Send the stream up to offset end as fast as the window allows and
 * until all of it is acknowledged; go back to the last ACK when nothing
 * moved for RTO_MS (a dropped segment). 0, or -1 past ms.
 */
static int pump(struct flow *f, uint32_t end, int ms)
{
	struct timespec dl, moved;
	struct pkt_tcp s;
	uint32_t len, una, sent = 0;
	int rc;

	deadline_in(&dl, ms);
	now(&moved);
	while (f->una != end) {
		while (f->nxt != end && f->nxt - f->una < f->wnd) {
			len = end - f->nxt;
			if (len > f->mss)
				len = f->mss;
			if (len > f->una + f->wnd - f->nxt)
				len = f->una + f->wnd - f->nxt;
			if (send_data(f, f->nxt, len))
				return -1;
			f->nxt += len;
			if ((int32_t)(f->nxt - f->high) > 0)
				f->high = f->nxt;
			/* Take the ACKs as they come, as a sender would. */
			if (!(++sent % 8))
				while (peer_recv(f, &s, 0) == 1)
					;
		}
		una = f->una;
		rc = peer_recv(f, &s, f->nxt == end || f->nxt - f->una >= f->wnd ? 10 : 0);
		if (rc < 0)
			return -1;
		if (f->dupacks >= 3 && (int32_t)(f->una - f->recover) > 0) {
			/* Something was lost: the kernel says so at once. */
			diag("dupack restart: una %u nxt %u high %u wnd %u", f->una, f->nxt, f->high, f->wnd);
			f->recover = f->high;
			f->nxt = f->una;
			f->dupacks = 0;
			f->rexmits++;
			now(&moved);
		} else if (f->una != una) {
			now(&moved);
		} else if (!rc) {
			struct timespec t;

			now(&t);
			if (elapsed_us(&moved, &t) > RTO_MS * 1000.0) {
				diag("timeout restart: una %u nxt %u high %u wnd %u end %u", f->una, f->nxt, f->high, f->wnd, end);
				f->recover = f->high;
				f->nxt = f->una;	/* also probes a zero window */
				f->rexmits++;
				if (!f->wnd)
					f->wnd = f->mss;
				moved = t;
			}
		}
		if (!ms_left(&dl)) {
			errno = ETIMEDOUT;
			return -1;
		}
	}
	return 0;
}

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	struct pollfd pfd = { .fd = r->fd, .events = POLLIN };
	static uint8_t buf[65536];
	struct timespec dl;
	uint32_t i, k;
	ssize_t n;

	block_alarm();
	deadline_in(&dl, r->ms);
	r->err = 0;
	r->bad = UINT32_MAX;
	while (r->rd != r->end) {
		n = recv(r->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0) {
			r->err = -1;
			break;
		}
		if (n < 0) {
			if (errno != EAGAIN) {
				r->err = errno;
				break;
			}
			if (!ms_left(&dl) || poll(&pfd, 1, ms_left(&dl)) <= 0) {
				r->err = ETIMEDOUT;
				break;
			}
			continue;
		}
		for (i = 0; i < (uint32_t)n; i += k) {
			uint32_t off = r->rd + i, p = off % PATTERN;

			k = (uint32_t)n - i;
			if (k > PATTERN - p)
				k = PATTERN - p;
			if (r->bad == UINT32_MAX && memcmp(buf + i, pattern + p, k)) {
				while (buf[i] == pattern[p]) {
					i++;
					p++;
				}
				r->bad = r->rd + i;
				k = 0;
				break;
			}
		}
		r->rd += (uint32_t)n;
		if (r->bad != UINT32_MAX)
			break;
	}
	now(&r->done);
	return NULL;
}

static int reader_start(struct reader *r, struct flow *f, uint32_t from,
			uint32_t end)
{
	memset(r, 0, sizeof(*r));
	r->fd = f->fd;
	r->rd = from;
	r->end = end;
	r->ms = STEP_MS;
	return pthread_create(&r->thread, NULL, reader_main, r) ? -1 : 0;
}

static const char *reader_error(const struct reader *r, char *buf, size_t cap)
{
	if (r->bad != UINT32_MAX)
		snprintf(buf, cap, "stream corrupted at offset %u", r->bad);
	else if (r->err == -1)
		snprintf(buf, cap, "EOF at offset %u of %u", r->rd, r->end);
	else if (r->err)
		snprintf(buf, cap, "%s at offset %u of %u", strerror(r->err), r->rd, r->end);
	else
		return NULL;
	return buf;
}

/*
 * Deliver the stream up to offset end (sending what was not yet sent or
 * acknowledged) while a reader reads it from offset from. Returns 0 and
 * the seconds from the start to the last byte read, or -1 with why
 * filled.
 */
static int transfer(struct flow *f, uint32_t from, uint32_t end,
		    double *secs, char *why, size_t cap)
{
	struct timespec t0;
	struct reader r;
	int rc;

	if (reader_start(&r, f, from, end)) {
		snprintf(why, cap, "pthread_create failed");
		return -1;
	}
	now(&t0);
	rc = pump(f, end, STEP_MS);
	if (rc)
		snprintf(why, cap, "sending: %s (acknowledged %u of %u)",
			 strerror(errno), f->una, r.end);
	pthread_join(r.thread, NULL);
	if (!rc && reader_error(&r, why, cap))
		rc = -1;
	*secs = elapsed_us(&t0, &r.done) / 1e6;
	return rc;
}

static void *holder_main(void *arg)
{
	struct holder *h = arg;

	block_alarm();
	/* One byte: the backlog is then processed by release_sock(). */
	h->ret = recv(h->fd, h->buf, 1, 0);
	h->err = h->ret < 0 ? errno : 0;
	now(&h->done);
	return NULL;
}

struct drain_result {
	int segs;		/* injected */
	double us;		/* fault released to recv() returned */
	long long merged, dropped;
};

/*
 * One drain: queue PRIME_LEN bytes, hold the socket in a 1-byte recv(),
 * inject nsegs full segments (as many as the window takes), release,
 * time it, then deliver and check the rest of the stream.
 */
static int drain_once(struct flow *f, struct uffd_hold *uh, int nsegs,
		      struct drain_result *d, char *why, size_t cap)
{
	struct holder h = { .fd = f->fd };
	struct counters before, during;
	uint32_t start = f->una;
	struct timespec t0;
	double secs;
	int i, rc;

	memset(d, 0, sizeof(*d));
	if (pump(f, start + PRIME_LEN, STEP_MS)) {
		snprintf(why, cap, "priming: %s", strerror(errno));
		return -1;
	}
	if (uffd_arm(uh)) {
		snprintf(why, cap, "userfaultfd page: %s", strerror(errno));
		return -1;
	}
	h.buf = uh->page;
	if (pthread_create(&h.thread, NULL, holder_main, &h)) {
		snprintf(why, cap, "pthread_create failed");
		return -1;
	}
	rc = uffd_wait(uh, 10000);
	if (rc == 1) {
		read_counters(&before);
		for (i = 0; i < nsegs && f->nxt - f->una + f->mss <= f->wnd; i++) {
			if (send_data(f, f->nxt, f->mss))
				break;
			f->nxt += f->mss;
			f->high = f->nxt;
		}
		d->segs = i;
		read_counters(&during);
		d->merged = during.coalesce - before.coalesce;
		d->dropped = during.drop - before.drop;
	}
	now(&t0);
	uffd_resolve(uh);
	if (rc != 1)
		shutdown(f->fd, SHUT_RD);
	pthread_join(h.thread, NULL);
	if (rc != 1) {
		snprintf(why, cap, "the receiver never faulted on the userfaultfd page: the socket was not held");
		return -1;
	}
	d->us = elapsed_us(&t0, &h.done);
	if (h.ret != 1 || h.buf[0] != pattern[start % PATTERN]) {
		snprintf(why, cap, "held recv() returned %zd (%s)", h.ret,
			 h.ret < 0 ? strerror(h.err) : "wrong byte");
		return -1;
	}
	/* The rest, with whatever the backlog dropped sent again. */
	return transfer(f, start + 1, f->nxt, &secs, why, cap);
}

struct verdict {
	int v;			/* KSFT_PASS, KSFT_FAIL, KSFT_SKIP */
	char why[256];
};

static void set_verdict(struct verdict *v, int code, const char *fmt, ...)
{
	va_list ap;

	if (v->v == KSFT_FAIL || (v->v == KSFT_SKIP && code == KSFT_PASS))
		return;		/* the first failure, then the first skip */
	v->v = code;
	va_start(ap, fmt);
	vsnprintf(v->why, sizeof(v->why), fmt, ap);
	va_end(ap);
}

static int set_mode(int on)
{
	if (!sysctl_present)
		return on ? 0 : -1;
	return set_coalesce(on);
}

static const char * const onoff[2] = { "on", "off" };

/*
 * Merges must happen with coalescing on (else inconclusive) and never
 * with it off (else the sysctl is ignored: a failure).
 */
static void judge_merges(struct verdict *v, const char *what,
			 long long on_merges, long long off_merges, bool have_off)
{
	if (have_off && off_merges)
		set_verdict(v, KSFT_FAIL, "%s: %lld merges with tcp_backlog_coalesce=0",
			    what, off_merges);
	else if (!on_merges)
		set_verdict(v, KSFT_SKIP, "inconclusive: %s: no segment was merged with coalescing on (the backlog was never used)",
			    what);
}

static void run_bulk(struct flow *f, const struct opts *o,
		     struct verdict *intact, struct verdict *coal)
{
	struct samples mbps[2] = { 0 }, ratio = { 0 }, merges[2] = { 0 },
		       drops[2] = { 0 };
	long long total_merges[2] = { 0, 0 }, rexmits;
	static char snap[2][NETSTAT_MAX];
	struct counters a, b;
	char why[256], name[64];
	int rep, k, m, nmodes = sysctl_present ? 2 : 1;
	double secs, v[2];

	snap_netstat(snap[0]);
	for (rep = 0; rep < o->reps; rep++) {
		for (k = 0; k < nmodes; k++) {
			/* Alternate which goes first: drift hits both alike. */
			m = nmodes == 2 ? (k + rep) % 2 : 0;
			if (set_mode(m == 0)) {
				set_verdict(intact, KSFT_FAIL, "setting tcp_backlog_coalesce: %s",
					    strerror(errno));
				return;
			}
			read_counters(&a);
			rexmits = f->rexmits;
			if (transfer(f, f->una, f->una + o->bulk_bytes, &secs, why, sizeof(why))) {
				set_verdict(intact, KSFT_FAIL, "bulk %s, run %d: %s", onoff[m],
					    rep + 1, why);
				return;
			}
			read_counters(&b);
			v[m] = o->bulk_bytes / secs / 1e6;
			add(&mbps[m], v[m]);
			add(&merges[m], (double)(b.coalesce - a.coalesce));
			add(&drops[m], (double)(b.drop - a.drop));
			total_merges[m] += b.coalesce - a.coalesce;
			diag("bulk run %d, coalescing %s: %u bytes in %.3f s, %.2f MB/s, %lld merges, %lld backlog drops, %lld restarts",
			     rep + 1, onoff[m], o->bulk_bytes, secs, v[m],
			     b.coalesce - a.coalesce, b.drop - a.drop, f->rexmits - rexmits);
		}
		if (nmodes == 2)
			add(&ratio, v[0] / v[1]);
	}
	set_mode(1);
	snap_netstat(snap[1]);
	diag_netstat("bulk", snap[0], snap[1]);
	set_verdict(intact, KSFT_PASS, "%d runs of %u bytes, every byte in order",
		    o->reps * nmodes, o->bulk_bytes);
	for (m = 0; m < nmodes; m++) {
		snprintf(name, sizeof(name), "bulk_%s_goodput", onoff[m]);
		figure_spread(name, &mbps[m], "MB/s");
		snprintf(name, sizeof(name), "bulk_%s_merges", onoff[m]);
		figure(name, median(&merges[m], NULL, NULL), "segments");
		snprintf(name, sizeof(name), "bulk_%s_backlog_drops", onoff[m]);
		figure(name, median(&drops[m], NULL, NULL), "segments");
	}
	figure_spread("bulk_ratio", &ratio, "x");
	judge_merges(coal, "bulk", total_merges[0], total_merges[1], nmodes == 2);
	set_verdict(coal, KSFT_PASS, "merges with coalescing on: %lld, off: %lld",
		    total_merges[0], total_merges[1]);
}

static void run_drain(struct flow *f, struct uffd_hold *uh,
		      const struct opts *o, struct verdict *intact,
		      struct verdict *coal)
{
	static struct samples us[MAX_SIZES][2], ratio[MAX_SIZES];
	long long merged[MAX_SIZES][2] = { { 0 } }, dropped[MAX_SIZES][2] = { { 0 } };
	int segs[MAX_SIZES] = { 0 };
	int rep, k, m, i, nmodes = sysctl_present ? 2 : 1;
	struct drain_result d;
	char why[256], name[64];
	double v[MAX_SIZES][2];

	for (rep = 0; rep < o->reps; rep++) {
		for (k = 0; k < nmodes; k++) {
			m = nmodes == 2 ? (k + rep) % 2 : 0;
			if (set_mode(m == 0)) {
				set_verdict(intact, KSFT_FAIL, "setting tcp_backlog_coalesce: %s",
					    strerror(errno));
				return;
			}
			for (i = 0; i < o->nsizes; i++) {
				if (drain_once(f, uh, o->sizes[i], &d, why, sizeof(why))) {
					set_verdict(intact, KSFT_FAIL, "drain of %d, coalescing %s, run %d: %s",
						    o->sizes[i], onoff[m], rep + 1, why);
					return;
				}
				v[i][m] = d.us;
				add(&us[i][m], d.us);
				merged[i][m] += d.merged;
				dropped[i][m] += d.dropped;
				if (!segs[i] || d.segs < segs[i])
					segs[i] = d.segs;
				diag("drain run %d, coalescing %s: %d segments held, %lld merged, %lld dropped, released in %.1f us",
				     rep + 1, onoff[m], d.segs, d.merged, d.dropped, d.us);
			}
		}
		for (i = 0; nmodes == 2 && i < o->nsizes; i++)
			add(&ratio[i], v[i][1] / v[i][0]);
	}
	set_mode(1);
	set_verdict(intact, KSFT_PASS, "%d drains, every byte in order",
		    o->reps * nmodes * o->nsizes);
	for (i = 0; i < o->nsizes; i++) {
		for (m = 0; m < nmodes; m++) {
			snprintf(name, sizeof(name), "drain_%d_%s_time", o->sizes[i], onoff[m]);
			figure_spread(name, &us[i][m], "us");
			snprintf(name, sizeof(name), "drain_%d_%s_merges", o->sizes[i], onoff[m]);
			figure(name, (double)merged[i][m] / o->reps, "segments");
			snprintf(name, sizeof(name), "drain_%d_%s_backlog_drops", o->sizes[i], onoff[m]);
			figure(name, (double)dropped[i][m] / o->reps, "segments");
		}
		snprintf(name, sizeof(name), "drain_%d_segments", o->sizes[i]);
		figure(name, segs[i], "segments");
		if (segs[i] < o->sizes[i])
			diag("drain of %d: only %d segments fit the receive window", o->sizes[i], segs[i]);
		snprintf(name, sizeof(name), "drain_%d_ratio", o->sizes[i]);
		figure_spread(name, &ratio[i], "x");
		if (segs[i] >= 2)
			judge_merges(coal, "drain", merged[i][0], merged[i][1], nmodes == 2);
	}
	set_verdict(coal, KSFT_PASS, "merged with coalescing on, never with it off");
}

static void report(int num, const char *name, const struct verdict *v)
{
	diag("%s: %s", name, v->why);
	if (v->v == KSFT_SKIP)
		printf("ok %d %s # SKIP %s\n", num, name, v->why);
	else
		printf("%sok %d %s\n", v->v == KSFT_PASS ? "" : "not ", num, name);
	fflush(stdout);
}

static void print_help(FILE *out, const char *prog)
{
	fprintf(out,
		"Usage: %s [options]\n"
		"Receive goodput and backlog drain time with TCP backlog coalescing\n"
		"on and off (net.ipv4.tcp_backlog_coalesce), runs alternating.\n"
		"Needs root (a network namespace, tap and userfaultfd); it runs in a\n"
		"namespace of its own and touches nothing else. IPv4 only.\n\n"
		"  -r, --reps N         runs per mode (default 5)\n"
		"  -b, --bulk-bytes N   bytes per bulk run, K and M suffixes (default 1M)\n"
		"  -d, --drain N,...    segments held per drain (default 0,100,1000);\n"
		"                       0 times the release alone. Capped by the window\n"
		"  -s, --rcvbuf N       SO_RCVBUF of the receiver (default 4M; 0: the\n"
		"                       kernel's autotuning)\n"
		"      --no-bulk        skip the bulk runs\n"
		"      --no-drain       skip the drain runs\n"
		"  -h, --help           this text\n\n"
		"Figures: '# kgate-measure NAME VALUE UNITS' lines, medians with _min and\n"
		"_max; the ratios are on/off goodput and off/on drain time, per pair of\n"
		"runs. Without the sysctl (a kernel without the kgate patch) only the\n"
		"'on' figures are measured.\n"
		"Cases: bulk_intact, bulk_coalesced, drain_intact, drain_coalesced.\n"
		"Exit status: 0 all passed, 1 a case failed, 4 none failed but one was\n"
		"inconclusive, 2 usage.\n", prog);
}

static long parse_size(const char *s, long max)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (end == s || v < 0)
		return -1;
	if (*end == 'K' || *end == 'k')
		v *= 1024, end++;
	else if (*end == 'M' || *end == 'm')
		v *= 1024 * 1024, end++;
	return *end || v > max ? -1 : v;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lopts[] = {
		{ "reps", required_argument, NULL, 'r' },
		{ "bulk-bytes", required_argument, NULL, 'b' },
		{ "drain", required_argument, NULL, 'd' },
		{ "rcvbuf", required_argument, NULL, 's' },
		{ "no-bulk", no_argument, NULL, 'B' },
		{ "no-drain", no_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char *tok, *save, *end;
	long v;
	int opt;

	while ((opt = getopt_long(argc, argv, "r:b:d:s:h", lopts, NULL)) != -1) {
		switch (opt) {
		case 'r':
			o->reps = (int)strtol(optarg, &end, 10);
			if (*end || o->reps < 1 || o->reps > MAX_REPS) {
				fprintf(stderr, "%s: --reps wants 1..%d\n", argv[0], MAX_REPS);
				return -1;
			}
			break;
		case 'b':
			v = parse_size(optarg, 1L << 30);
			if (v < 1) {
				fprintf(stderr, "%s: --bulk-bytes wants 1..1G\n", argv[0]);
				return -1;
			}
			o->bulk_bytes = (uint32_t)v;
			break;
		case 'd':
			o->nsizes = 0;
			for (tok = strtok_r(optarg, ",", &save); tok;
			     tok = strtok_r(NULL, ",", &save)) {
				v = strtol(tok, &end, 10);
				if (*end || v < 0 || v > 100000 || o->nsizes == MAX_SIZES) {
					fprintf(stderr, "%s: --drain wants up to %d counts of 0..100000\n",
						argv[0], MAX_SIZES);
					return -1;
				}
				o->sizes[o->nsizes++] = (int)v;
			}
			if (!o->nsizes) {
				fprintf(stderr, "%s: --drain wants a count\n", argv[0]);
				return -1;
			}
			break;
		case 's':
			v = parse_size(optarg, 1L << 30);
			if (v < 0) {
				fprintf(stderr, "%s: --rcvbuf wants 0..1G\n", argv[0]);
				return -1;
			}
			o->rcvbuf = (int)v;
			break;
		case 'B':
			o->bulk = false;
			break;
		case 'D':
			o->drain = false;
			break;
		case 'h':
			print_help(stdout, argv[0]);
			exit(0);
		default:
			print_help(stderr, argv[0]);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", argv[0], argv[optind]);
		return -1;
	}
	if (!o->bulk && !o->drain) {
		fprintf(stderr, "%s: --no-bulk and --no-drain leave nothing to do\n", argv[0]);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = {
		.reps = 5, .bulk_bytes = 1024 * 1024, .nsizes = 3,
		.sizes = { 0, 100, 1000 }, .rcvbuf = 4 * 1024 * 1024,
		.bulk = true, .drain = true,
	};
	struct verdict v[4] = { { KSFT_PASS, "" } };
	static const char * const names[4] = {
		"bulk_intact", "bulk_coalesced", "drain_intact", "drain_coalesced",
	};
	struct flow f = { .tap = -1, .fd = -1, .mss = 1460 };
	struct uffd_hold uh = { .fd = -1 };
	int i, lfd, fail = 0, skip = 0;
	struct utsname u;
	double secs;
	char why[256];

	if (parse_opts(argc, argv, &o))
		return 2;
	for (i = 0; i < (int)sizeof(pattern); i++)
		pattern[i] = stream_byte((uint32_t)i);
	fill_seg_sums(f.mss);

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("TAP version 13\n1..4\n");
	if (!uname(&u))
		diag("kernel %s %s %s, %ld CPUs online", u.sysname, u.release, u.machine,
		     sysconf(_SC_NPROCESSORS_ONLN));
	signal(SIGALRM, on_alarm);
	alarm(600);
	/* Counters are per namespace: enter ours before any thread exists. */
	if (unshare(CLONE_NEWNET)) {
		printf("Bail out! unshare(CLONE_NEWNET): %s (needs root)\n", strerror(errno));
		return KSFT_FAIL;
	}
	sysctl_present = has_sysctl();
	if (setup_tap(&f)) {
		printf("Bail out! tap device: %s\n", strerror(errno));
		return KSFT_FAIL;
	}
	lfd = setup_listener(o.rcvbuf);
	if (lfd < 0) {
		printf("Bail out! listening socket: %s\n", strerror(errno));
		return KSFT_FAIL;
	}
	if (uffd_open(&uh)) {
		printf("Bail out! userfaultfd: %s\n", strerror(errno));
		return KSFT_FAIL;
	}
	{
		struct counters c;

		if (read_counters(&c)) {
			printf("Bail out! /proc/net/netstat has no TCPBacklogCoalesce/TCPBacklogDrop\n");
			return KSFT_FAIL;
		}
	}
	if (flow_open(&f, lfd)) {
		printf("Bail out! no connection over %s: %s\n", TAP_NAME, strerror(errno));
		return KSFT_FAIL;
	}
	/* Open the window: slow start and receive buffer tuning. */
	if (transfer(&f, 0, o.bulk_bytes, &secs, why, sizeof(why))) {
		printf("Bail out! warm-up transfer: %s\n", why);
		return KSFT_FAIL;
	}
	diag("warm-up: %u bytes in %.3f s; window %u bytes (scale %u), MSS %u, receive buffer %d",
	     o.bulk_bytes, secs, f.wnd, f.wscale, f.mss, o.rcvbuf);

	if (o.bulk)
		run_bulk(&f, &o, &v[0], &v[1]);
	else
		set_verdict(&v[0], KSFT_SKIP, "--no-bulk"), set_verdict(&v[1], KSFT_SKIP, "--no-bulk");
	if (o.drain && v[0].v != KSFT_FAIL)
		run_drain(&f, &uh, &o, &v[2], &v[3]);
	else
		set_verdict(&v[2], KSFT_SKIP, o.drain ? "not run after a bulk failure" : "--no-drain"),
		set_verdict(&v[3], KSFT_SKIP, o.drain ? "not run after a bulk failure" : "--no-drain");
	diag("go-back-N restarts of the peer: %lld", f.rexmits);
	alarm(0);
	for (i = 0; i < 4; i++) {
		report(i + 1, names[i], &v[i]);
		fail += v[i].v == KSFT_FAIL;
		skip += v[i].v == KSFT_SKIP;
	}
	printf("# Totals: pass:%d fail:%d xfail:0 xpass:0 skip:%d error:0\n",
	       4 - fail - skip, fail, skip);
	if (fail)
		return KSFT_FAIL;
	return skip ? KSFT_SKIP : KSFT_PASS;
}
