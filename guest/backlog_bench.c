// SPDX-License-Identifier: GPL-2.0
/*
 * What TCP backlog coalescing buys, measured with
 * net.ipv4.tcp_backlog_coalesce on and off in the same boot, runs
 * alternating (on/off, then off/on) so that drift hits both alike:
 * receive goodput, and the time release_sock() takes to drain a backlog
 * of N full-sized segments.
 *
 * Each test creates its own network namespace and a tap device and
 * plays the sender itself through the peer module (backlog_peer.h; 198.18.0.2,
 * IPv4 only): it writes Ethernet frames into tap and reads the kernel's
 * ACKs from it. tap, not tun: written non-blocking, tap builds each skb
 * around a page fragment, as a NIC driver's build_skb() does, and only
 * such skbs can be merged by attaching their data as fragments (tun's
 * kmalloc()ed skbs only by copying into spare room, which full-sized
 * segments never fit). Neither goes through GRO: the receive path is
 * tcp_add_backlog()'s. The peer offers MSS 1460 and window scaling,
 * sends headers it builds plus payload straight from the test pattern
 * with writev() (checksums precomputed), reads the kernel's ACKs as it
 * sends, never past the right edge of the latest (its ACK plus its
 * window), and goes back to the last ACK on three duplicate ACKs or a
 * 200 ms silence; a silence is explained in the log (what the receiver
 * has, the last ACKs, the counters that moved). A warm-up transfer
 * opens the window first.
 *
 * Tests:
 *   bench.bulk   receiver-bound goodput, as on a receiver without GRO
 *                whose softirq floods a socket faster than its owner
 *                drains it. RPS on tap's queue steers each segment to
 *                CPU 1, whose softirq runs TCP's receive path there;
 *                the reader thread is pinned to CPU 1, the sender to
 *                CPU 0 (without this, write() into tap runs the whole
 *                receive path on the sender's CPU). The peer sends
 *                MSS-sized segments as fast as the window and --flight
 *                (512 segments, under netdev_max_backlog) allow, the
 *                reader reads them with recv(); goodput is bytes over
 *                the time to the last byte read. Per mode: the
 *                reader's CPU busy and its CPU time per MB, the
 *                sender's CPU idle (/proc/stat), merges, backlog and
 *                input queue drops. TcpExt counters that changed during
 *                the runs are printed.
 *   bench.drain  a receiver thread's recv() is held with userfaultfd
 *                (as in backlog_coalesce) while N segments are
 *                injected; the time from the release of the fault to
 *                recv()'s return is the backlog processing in
 *                release_sock(). N = 0 gives the cost of the release
 *                alone.
 * Each fails on a broken stream (every byte that arrives is checked
 * against what was sent: a broken stream is a failure, never a figure)
 * or on a merge with coalescing off, and is skipped as "inconclusive:
 * ..." when nothing merged with it on, when the socket was not held, a
 * write into tap was not whole or a counter could not be read. bench.bulk
 * is also inconclusive on one CPU (nothing to steer to), and unless
 * the runs without coalescing were receiver-bound: the reader's CPU
 * busy at least 90 % of them and the sender's idle at least 5 %. Without the sysctl (a
 * kernel without the kgate patch) only the 'on' half runs.
 *
 * Figures are printed as "# kgate-measure NAME VALUE UNITS" lines:
 * medians over the runs with _min, _max, _q1 and _q3 (quartiles), the
 * on/off goodput and off/on drain time ratios per pair of runs with
 * their spread, and how many pairs (bulk_pairs).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "../kselftest_harness.h"
#include "backlog_peer.h"
#include "backlog_pkt.h"

#define DEV_NAME	"kgate1"
#define LISTEN_PORT	5001
#define PEER_PORT	41000
#define PEER_WINDOW	65535
#define PEER_WSCALE	7
#define MSS		1460
#define PATTERN		65536	/* stream_byte() repeats every 64 KiB */
#define PRIME_LEN	8
#define RTO_MS		200	/* go back to the last ACK after this */
#define ACK_LOG		8	/* ACKs kept to explain a stall */
#define HOLD_MS		10000	/* for the receiver to fault */
#define CONNECT_MS	10000
#define STEP_MS		60000	/* bound of each transfer */
#define JOIN_MS		10000	/* for a thread to return once it need not wait */
#define MAX_REPS	101
#define MAX_SIZES	8
/* The harness's deadlines, in seconds: a bulk test is 2 x reps + 1 transfers. */
#define BULK_TIMEOUT	180
#define DRAIN_TIMEOUT	120
/*
 * A bulk test stops taking pairs this long before its deadline, and
 * when the next pair may not fit at twice the slowest transfer's time:
 * a machine too busy to measure is inconclusive, not a failed kernel.
 */
#define BULK_MARGIN	20

struct bench_opts {
	int reps;		/* runs per mode */
	uint32_t bulk_bytes;	/* per bulk run, and the warm-up */
	int nsizes;
	int sizes[MAX_SIZES];	/* segments held per drain */
	int rcvbuf;		/* SO_RCVBUF of the receiver, 0: autotuning */
	bool bulk, drain;	/* false: the test is skipped */
	int bulk_budget;	/* seconds a bulk test may take pairs for */
	int flight;		/* segments the sender keeps unacknowledged at most */
	int read_size;		/* bytes the reader asks recv() for */
};

/* The defaults; backlog_bench_main.c sets them from its command line. */
static struct bench_opts bench_opts = {
	.reps = 5, .bulk_bytes = 1024 * 1024, .nsizes = 3,
	.sizes = { 0, 100, 1000 }, .rcvbuf = 4 * 1024 * 1024,
	.bulk = true, .drain = true, .bulk_budget = BULK_TIMEOUT - BULK_MARGIN,
	.flight = 512, .read_size = 65536,
};

enum verdict { V_PASS, V_FAIL, V_SKIP };

struct result {
	enum verdict v;
	char why[320];
};

/* One mode's samples: [0] coalescing on, [1] off. */
struct samples {
	int n;
	double v[MAX_REPS];
};

static uint8_t pattern[PATTERN + PEER_FRAME_MAX];
static uint32_t seg_sum[PATTERN];
static const char * const onoff[2] = { "on", "off" };

/* A test's device, connection and the peer's sender state. */
struct flow {
	struct peer_dev dev;
	struct peer_conn c;
	struct uffd_hold hold;
	int lfd;
	bool sysctl;		/* net.ipv4.tcp_backlog_coalesce exists */
	/* The sender's state. Offsets are stream offsets. */
	uint32_t una;		/* first offset not acknowledged */
	uint32_t nxt;		/* next offset to send */
	uint32_t high;		/* highest offset sent so far */
	uint32_t wnd;		/* the kernel's window, in bytes, from una */
	int dupacks;		/* ACKs in a row that did not move una */
	uint32_t recover;	/* una at the last restart: none again until it moves */
	long long rexmits;	/* go-back-N restarts */
	long long timeouts;	/* of them, after RTO_MS without progress */
	uint32_t acks[ACK_LOG][3];	/* the last ACKs: offset, window, nxt then */
	unsigned int nacks;	/* ACKs seen, the last ACK_LOG in acks */
	int werr;		/* why a write into tap was not whole, or 0 */
	char na[160];		/* why the test cannot run here */
	struct timespec started;	/* when the test began (its deadline's start) */
	double slowest;		/* seconds of the slowest transfer so far */
	int rcpu, scpu;		/* the reader's and the sender's CPU, or -1 */
};

/* A CPU's time from /proc/stat, in USER_HZ ticks. */
struct cpu_time {
	unsigned long long busy, idle, softirq;
};

FIXTURE(bench)
{
	struct flow f;
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

struct drain_result {
	int segs;		/* injected */
	double us;		/* fault released to recv() returned */
	long long merged, dropped;
};

/*
 * Record a verdict: the first failure, else the first skip, else the
 * last pass. A skip's reason starts with "inconclusive: ".
 */
static void set_result(struct result *r, enum verdict v, const char *fmt, ...)
{
	size_t n = 0;
	va_list ap;

	if (r->v == V_FAIL || (r->v == V_SKIP && v != V_FAIL))
		return;
	r->v = v;
	if (v == V_SKIP)
		n = (size_t)snprintf(r->why, sizeof(r->why), "inconclusive: ");
	va_start(ap, fmt);
	vsnprintf(r->why + n, sizeof(r->why) - n, fmt, ap);
	va_end(ap);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The q-quantile (0..1) of the sorted v[0..n-1], interpolated. */
static double quantile(const double *v, int n, double q)
{
	double x = q * (n - 1);
	int i = (int)x;

	return i + 1 < n ? v[i] + (x - i) * (v[i + 1] - v[i]) : v[n - 1];
}

/*
 * The median of s, and its range (lo, hi) and interquartile range (q1,
 * q3) where asked for.
 */
static double median4(const struct samples *s, double *lo, double *hi,
		      double *q1, double *q3)
{
	double v[MAX_REPS];
	int n = s->n;

	memcpy(v, s->v, sizeof(double) * (size_t)n);
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	if (lo)
		*lo = v[0];
	if (hi)
		*hi = v[n - 1];
	if (q1)
		*q1 = quantile(v, n, 0.25);
	if (q3)
		*q3 = quantile(v, n, 0.75);
	return quantile(v, n, 0.5);
}

static double median(const struct samples *s, double *lo, double *hi)
{
	return median4(s, lo, hi, NULL, NULL);
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

/* Median, then the range and the interquartile range as four figures. */
static void figure_spread(const char *name, const struct samples *s,
			  const char *units)
{
	static const char * const suffix[4] = { "min", "max", "q1", "q3" };
	double q[4], m;
	char n[96];
	int i;

	if (!s->n)
		return;
	m = median4(s, &q[0], &q[1], &q[2], &q[3]);
	figure(name, m, units);
	for (i = 0; i < 4; i++) {
		snprintf(n, sizeof(n), "%s_%s", name, suffix[i]);
		figure(n, q[i], units);
	}
}

#define NETSTAT_MAX	16384

/* /proc/net/netstat and /proc/net/snmp, for a before/after diff. */
static void snap_netstat(char *buf)
{
	static const char * const files[] = { "/proc/net/netstat", "/proc/net/snmp" };
	size_t n = 0;
	unsigned int i;
	FILE *f;

	for (i = 0; i < ARRAY_SIZE(files); i++) {
		f = fopen(files[i], "re");
		if (!f)
			continue;
		n += fread(buf + n, 1, NETSTAT_MAX - 1 - n, f);
		fclose(f);
	}
	buf[n] = '\0';
}

#define MIB_MAX	192

struct mib {
	int n;
	char name[MIB_MAX][40];
	long long val[MIB_MAX];
};

/*
 * The names and values of one group of a snapshot ("TcpExt", "Tcp",
 * ...), in the kernel's order: a line of names, then one of values.
 */
static void parse_mib(const char *snap, const char *group, struct mib *t)
{
	static char copy[NETSTAT_MAX];
	char *names, *values, *sn, *sv, *n, *v, key[24];
	size_t klen;

	t->n = 0;
	klen = (size_t)snprintf(key, sizeof(key), "\n%s: ", group);
	snprintf(copy, sizeof(copy), "\n%s", snap);
	names = strstr(copy, key);
	values = names ? strstr(names + klen, key) : NULL;
	if (!values)
		return;
	names += klen;
	values += klen;
	names[strcspn(names, "\n")] = '\0';
	values[strcspn(values, "\n")] = '\0';
	n = strtok_r(names, " ", &sn);
	v = strtok_r(values, " ", &sv);
	while (n && v && t->n < MIB_MAX) {
		snprintf(t->name[t->n], sizeof(t->name[0]), "%s", n);
		t->val[t->n++] = atoll(v);
		n = strtok_r(NULL, " ", &sn);
		v = strtok_r(NULL, " ", &sv);
	}
}

/*
 * Name every counter of a group that changed between two snapshots:
 * where segments were dropped or pruned, the reason is there.
 */
static void diag_mib(const char *what, const char *group, const char *a, const char *b)
{
	static struct mib ta, tb;
	char out[1024] = "";
	size_t used = 0;
	int i;

	parse_mib(a, group, &ta);
	parse_mib(b, group, &tb);
	for (i = 0; i < ta.n && i < tb.n && used < sizeof(out) - 64; i++)
		if (tb.val[i] != ta.val[i])
			used += (size_t)snprintf(out + used, sizeof(out) - used, " %s%+lld",
						 tb.name[i], tb.val[i] - ta.val[i]);
	diag("%s: %s changes:%s", what, group, used ? out : " none");
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
 * Send stream bytes [off, off + len): headers built here, the data
 * written from the pattern itself, its checksum part from the table
 * for full segments. The peer stays cheap, so that what is measured is
 * the receiving kernel, not the sender's copying and summing. A write
 * that is not whole leaves its errno in werr.
 */
static int send_data(struct flow *f, uint32_t off, uint32_t len)
{
	const uint8_t *data = pattern + off % PATTERN;
	uint8_t hdr[PEER_ETH_HLEN + PKT_IPV4_HLEN + PKT_TCP_HLEN];
	struct pkt_tcp s = {
		.saddr = PEER_REMOTE4, .daddr = PEER_LOCAL4,
		.sport = PEER_PORT, .dport = LISTEN_PORT,
		.seq = f->c.iss + 1 + off, .ack = f->c.ack,
		.flags = PKT_ACK | PKT_PSH, .window = PEER_WINDOW,
		.ip_id = f->dev.ip_id++, .data = data, .len = len,
	};
	struct timespec dl = { 0, 0 };
	struct iovec iov[2];
	size_t eth, n;
	ssize_t w;

	eth = peer_dev_hdr(&f->dev, hdr, ETH_P_IP);
	n = pkt_build4_hdr(hdr + eth, sizeof(hdr) - eth, &s,
			   len == MSS ? seg_sum[off % PATTERN] : pkt_sum(data, len));
	if (!n) {
		f->werr = EMSGSIZE;
		return -1;
	}
	iov[0].iov_base = hdr;
	iov[0].iov_len = eth + n;
	iov[1].iov_base = (void *)data;
	iov[1].iov_len = len;
	for (;;) {
		w = writev(f->dev.fd, iov, 2);
		if (w == (ssize_t)(eth + n + len))
			return 0;
		if (w >= 0) {
			f->werr = EIO;	/* short: the segment is not whole */
			return -1;
		}
		if ((errno != EAGAIN && errno != EINTR) || !peer_retry(&dl)) {
			f->werr = errno;	/* ETIMEDOUT: tap kept refusing it */
			return -1;
		}
	}
}

/*
 * Read the kernel's next segment to the peer within ms: 1 with *s
 * filled (an ACK also moves una and the window), 0 on timeout, -1.
 */
static int flow_recv(struct flow *f, struct pkt_tcp *s, int ms)
{
	uint8_t buf[PEER_FRAME_MAX];
	uint32_t acked;
	int rc;

	rc = peer_conn_recv(&f->c, s, buf, sizeof(buf), ms);
	if (rc != 1)
		return rc;
	if ((s->flags & PKT_ACK) && !(s->flags & PKT_SYN)) {
		acked = s->ack - f->c.iss - 1;
		f->acks[f->nacks % ACK_LOG][0] = acked;
		f->acks[f->nacks % ACK_LOG][1] = (uint32_t)s->window << f->c.wscale;
		f->acks[f->nacks++ % ACK_LOG][2] = f->nxt;
		/* RFC 5681's duplicate: no data, same ACK, same window. */
		if (acked == f->una && f->nxt != f->una && !s->len &&
		    ((uint32_t)s->window << f->c.wscale) == f->wnd)
			f->dupacks++;
		else
			f->dupacks = 0;
		if ((int32_t)(acked - f->una) >= 0 &&
		    (int32_t)(acked - f->high) <= 0) {
			f->una = acked;
			if ((int32_t)(acked - f->nxt) > 0)
				f->nxt = acked;	/* after going back */
			f->wnd = (uint32_t)s->window << f->c.wscale;
		}
	}
	return 1;
}

/*
 * From /proc/net/softnet_stat: *drops, the segments dropped because a
 * CPU's input queue (where RPS puts them) was full, summed over the
 * CPUs (its 2nd column); *qlen, the packets waiting in cpu's input
 * queue (its 12th; -1 if cpu is not listed). 0, or -1 if unreadable.
 */
static int softnet_read(int cpu, long long *drops, int *qlen)
{
	unsigned int v[13];
	char line[256];
	FILE *fp;
	int n;

	*drops = 0;
	*qlen = -1;
	fp = fopen("/proc/net/softnet_stat", "re");
	if (!fp)
		return -1;
	while (fgets(line, sizeof(line), fp)) {
		n = sscanf(line, "%x %x %x %x %x %x %x %x %x %x %x %x %x",
			   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7],
			   &v[8], &v[9], &v[10], &v[11], &v[12]);
		if (n >= 2)
			*drops += v[1];
		if (n == 13 && (int)v[12] == cpu)
			*qlen = (int)v[11];
	}
	fclose(fp);
	return 0;
}

/* The packets tap dropped on their way to the peer (/proc/net/dev), or -1. */
static long long tap_tx_drops(void)
{
	unsigned long long v[12];
	long long drops = -1;
	char line[512], *p;
	FILE *fp;

	fp = fopen("/proc/net/dev", "re");
	if (!fp)
		return -1;
	while (fgets(line, sizeof(line), fp)) {
		p = strstr(line, DEV_NAME ":");
		if (!p)
			continue;
		if (sscanf(p + strlen(DEV_NAME ":"),
			   "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu",
			   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7],
			   &v[8], &v[9], &v[10], &v[11]) == 12)
			drops = (long long)v[11];
	}
	fclose(fp);
	return drops;
}

/*
 * Where a stream stalled: what the receiving socket and its CPU hold,
 * and the counters that moved since snap (the transfer's start).
 */
static void diag_stall(const struct flow *f, const char *snap)
{
	static const char * const groups[] = { "Ip", "IpExt", "Tcp", "TcpExt" };
	static char now_snap[NETSTAT_MAX];
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	long long qdrops;
	unsigned int i;
	int inq = -1, qlen;

	softnet_read(f->rcpu, &qdrops, &qlen);
	memset(&ti, 0, sizeof(ti));	/* all 0 if unread */
	getsockopt(f->c.fd, IPPROTO_TCP, TCP_INFO, &ti, &len);
	if (ioctl(f->c.fd, FIONREAD, &inq))
		inq = -1;
	diag("stalled: the receiver has the stream up to %llu (una %u, nxt %u), its last data %u ms ago, %d bytes unread, ato %u us; CPU %d input queue %d packets; tap's drops toward the peer %lld",
	     (unsigned long long)ti.tcpi_bytes_received, f->una, f->nxt,
	     ti.tcpi_last_data_recv, inq, ti.tcpi_ato, f->rcpu,
	     qlen, tap_tx_drops());
	for (i = f->nacks > ACK_LOG ? f->nacks - ACK_LOG : 0; i < f->nacks; i++)
		diag("stalled: ACK %u: %u window %u (right edge %u), sent up to %u", i,
		     f->acks[i % ACK_LOG][0], f->acks[i % ACK_LOG][1],
		     f->acks[i % ACK_LOG][0] + f->acks[i % ACK_LOG][1], f->acks[i % ACK_LOG][2]);
	snap_netstat(now_snap);
	for (i = 0; i < ARRAY_SIZE(groups); i++)
		diag_mib("stalled", groups[i], snap, now_snap);
}

/* What the peer may have unacknowledged: the window, at most --flight segments. */
static uint32_t send_window(const struct flow *f)
{
	uint32_t cap = (uint32_t)bench_opts.flight * MSS;

	return f->wnd < cap ? f->wnd : cap;
}

/*
 * Send the stream up to offset end as fast as the window (and
 * --flight) allows and until all of it is acknowledged; go back to the
 * last ACK on three duplicate ACKs or when nothing moved for RTO_MS (a
 * dropped segment). After going back, the segments still in flight beyond
 * the hole bring more duplicates of the same ACK: no second restart until
 * una moves. A partial ACK (una moved, but not past what was sent before)
 * followed by three duplicates is another hole, as in NewReno (RFC 6582):
 * waiting for RTO_MS there would stall a run for far longer than it takes.
 * since: the counters (snap_netstat()) before the caller's clock
 * started, for a stall's diagnosis.
 * 0, or -1 past ms or when a write was not whole (werr).
 */
static int pump(struct flow *f, uint32_t end, int ms, const char *since)
{
	struct timespec dl, moved, t;
	uint32_t len, una, wnd, sent = 0;
	struct pkt_tcp s;
	int rc;

	deadline_in(&dl, ms);
	now(&moved);
	while (f->una != end) {
		/*
		 * At most the window, and at most flight segments, from
		 * the latest ACK read while sending: an ACK that moves una
		 * with a smaller window (its reader fell behind) keeps the
		 * right edge where it was; the new una with the old window
		 * would be past it, the kernel drops what lands there.
		 */
		while (f->nxt != end && f->nxt - f->una < (wnd = send_window(f))) {
			len = end - f->nxt;
			if (len > MSS)
				len = MSS;
			if (len > f->una + wnd - f->nxt)
				len = f->una + wnd - f->nxt;
			if (send_data(f, f->nxt, len))
				return -1;
			f->nxt += len;
			if ((int32_t)(f->nxt - f->high) > 0)
				f->high = f->nxt;
			/*
			 * Take the ACKs as they come, as a sender would; the
			 * deadline is checked then, not at every segment.
			 */
			if (!(++sent % 8)) {
				while (flow_recv(f, &s, 0) == 1 && ms_left(&dl))
					;
				if (!ms_left(&dl))
					break;
			}
		}
		una = f->una;
		rc = flow_recv(f, &s, f->nxt == end || f->nxt - f->una >= send_window(f) ? 10 : 0);
		if (rc < 0)
			return -1;
		if (f->dupacks >= 3 && (int32_t)(f->una - f->recover) > 0) {
			/* Something was lost: the kernel says so at once. */
			diag("dupack restart: una %u nxt %u high %u wnd %u",
			     f->una, f->nxt, f->high, f->wnd);
			f->recover = f->una;
			f->nxt = f->una;
			f->dupacks = 0;
			f->rexmits++;
			now(&moved);
		} else if (f->una != una) {
			now(&moved);
		} else if (!rc) {
			now(&t);
			if (elapsed_us(&moved, &t) > RTO_MS * 1000.0) {
				diag("timeout restart: una %u nxt %u high %u wnd %u end %u",
				     f->una, f->nxt, f->high, f->wnd, end);
				diag_stall(f, since);
				f->recover = f->una;
				f->nxt = f->una;	/* also probes a zero window */
				f->rexmits++;
				f->timeouts++;
				if (!f->wnd)
					f->wnd = MSS;
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

static void block_signals(void)
{
	sigset_t set;

	/* A signal pending on a thread in recv() turns a fault into EFAULT. */
	sigfillset(&set);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
}

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	struct pollfd pfd = { .fd = r->fd, .events = POLLIN };
	static uint8_t buf[65536];
	struct timespec dl;
	uint32_t i, k;
	ssize_t n;

	block_signals();
	deadline_in(&dl, r->ms);
	r->err = 0;
	r->bad = UINT32_MAX;
	while (r->rd != r->end) {
		n = recv(r->fd, buf, (size_t)bench_opts.read_size, MSG_DONTWAIT);
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
		/* However fast the bytes come: the deadline holds. */
		if (r->rd != r->end && !ms_left(&dl)) {
			r->err = ETIMEDOUT;
			break;
		}
	}
	now(&r->done);
	return NULL;
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
 * acknowledged) while a reader reads it from offset from. V_PASS and the
 * seconds from the start to the last byte read; V_FAIL when the stream
 * broke; V_SKIP when a write into tap was not whole. why says what.
 */
static enum verdict transfer(struct flow *f, uint32_t from,
			     uint32_t end, double *secs, char *why, size_t cap)
{
	/* Static: a reader that could not be joined may write it later. */
	static struct reader r;
	static char snap[NETSTAT_MAX];
	struct timespec t0;
	pthread_attr_t attr;
	cpu_set_t set;
	int rc, err;

	memset(&r, 0, sizeof(r));
	r.fd = f->c.fd;
	r.rd = from;
	r.end = end;
	r.ms = STEP_MS;
	snap_netstat(snap);	/* not in the time measured */
	pthread_attr_init(&attr);
	if (f->rcpu >= 0) {
		CPU_ZERO(&set);
		CPU_SET(f->rcpu, &set);
		pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
	}
	rc = pthread_create(&r.thread, &attr, reader_main, &r);
	pthread_attr_destroy(&attr);
	if (rc) {
		snprintf(why, cap, "pthread_create: %s", strerror(rc));
		return V_FAIL;
	}
	now(&t0);
	f->werr = 0;
	rc = pump(f, end, STEP_MS, snap);
	err = errno;
	if (rc)
		shutdown(f->c.fd, SHUT_RD);	/* what the reader waits for won't come */
	/* The reader gives up r.ms after its start: this is past that. */
	if (peer_join(r.thread, r.ms + JOIN_MS)) {
		shutdown(f->c.fd, SHUT_RD);
		peer_join(r.thread, JOIN_MS);
		snprintf(why, cap, "the reader did not return within %d ms of its deadline",
			 JOIN_MS);
		return V_FAIL;
	}
	*secs = elapsed_us(&t0, &r.done) / 1e6;
	/* A broken stream first: it may be why the sending stalled. */
	if ((r.bad != UINT32_MAX || !rc) && reader_error(&r, why, cap))
		return V_FAIL;
	if (rc && f->werr) {
		snprintf(why, cap, "writing to tap: %s", strerror(f->werr));
		return V_SKIP;
	}
	if (rc) {
		snprintf(why, cap, "sending: %s (acknowledged %u of %u)", strerror(err),
			 f->una, end);
		return V_FAIL;
	}
	return V_PASS;
}

static void *holder_main(void *arg)
{
	struct holder *h = arg;

	block_signals();
	/* One byte: the backlog is then processed by release_sock(). */
	h->ret = recv(h->fd, h->buf, 1, 0);
	h->err = h->ret < 0 ? errno : 0;
	now(&h->done);
	return NULL;
}

/*
 * One drain: queue PRIME_LEN bytes, hold the socket in a 1-byte recv(),
 * inject nsegs full segments (as many as the window takes), release,
 * time it, then deliver and check the rest of the stream.
 */
static enum verdict drain_once(struct flow *f, int nsegs,
			       struct drain_result *d, char *why, size_t cap)
{
	/* Static: a holder that could not be joined may write it later. */
	static struct holder h;
	static char snap[NETSTAT_MAX];
	struct nstat before, during;
	uint32_t start = f->una;
	struct timespec t0;
	int i, rc, rel, bad = 0;
	double secs;

	memset(&h, 0, sizeof(h));
	h.fd = f->c.fd;
	memset(d, 0, sizeof(*d));
	f->werr = 0;
	snap_netstat(snap);
	if (pump(f, start + PRIME_LEN, STEP_MS, snap)) {
		if (f->werr) {
			snprintf(why, cap, "priming: writing to tap: %s", strerror(f->werr));
			return V_SKIP;
		}
		snprintf(why, cap, "priming: %s", strerror(errno));
		return V_FAIL;
	}
	if (uffd_arm(&f->hold)) {
		snprintf(why, cap, "userfaultfd page: %s", strerror(errno));
		return V_FAIL;
	}
	h.buf = f->hold.page;
	if (pthread_create(&h.thread, NULL, holder_main, &h)) {
		snprintf(why, cap, "pthread_create failed");
		return V_FAIL;
	}
	rc = uffd_wait(&f->hold, HOLD_MS);
	if (rc == 1) {
		bad |= nstat_read(&before);
		for (i = 0; i < nsegs && f->nxt - f->una + MSS <= f->wnd; i++) {
			if (send_data(f, f->nxt, MSS))
				break;
			f->nxt += MSS;
			f->high = f->nxt;
		}
		d->segs = i;
		bad |= nstat_read(&during);
		d->merged = during.v[NS_COALESCE] - before.v[NS_COALESCE];
		d->dropped = during.v[NS_BACKLOGDROP] - before.v[NS_BACKLOGDROP];
	}
	now(&t0);
	rel = uffd_resolve(&f->hold) ? errno : 0;
	if (rel)
		uffd_close(&f->hold);	/* its fault fails: the receiver returns */
	if (rc != 1)
		shutdown(f->c.fd, SHUT_RD);	/* wake a receiver that never faulted */
	if (uffd_join(&f->hold, h.thread, JOIN_MS)) {
		snprintf(why, cap, "the held recv() did not return within %d ms of its release",
			 JOIN_MS);
		return V_FAIL;
	}
	if (rc != 1) {
		snprintf(why, cap,
			 "the receiver never faulted on the userfaultfd page: the socket was not held");
		return V_SKIP;
	}
	if (rel) {
		snprintf(why, cap, "releasing the held recv(): UFFDIO_COPY: %s", strerror(rel));
		return V_FAIL;
	}
	if (f->werr) {
		snprintf(why, cap, "writing to tap while held: %s", strerror(f->werr));
		return V_SKIP;
	}
	if (bad) {
		snprintf(why, cap, "a counter read failed");
		return V_SKIP;
	}
	d->us = elapsed_us(&t0, &h.done);
	if (h.ret != 1 || h.buf[0] != pattern[start % PATTERN]) {
		snprintf(why, cap, "held recv() returned %zd (%s)", h.ret,
			 h.ret < 0 ? strerror(h.err) : "wrong byte");
		return V_FAIL;
	}
	/* The rest, with whatever the backlog dropped sent again. */
	return transfer(f, start + 1, f->nxt, &secs, why, cap);
}

static int set_mode(struct flow *f, int on)
{
	if (!f->sysctl)
		return on ? 0 : -1;
	return set_coalesce(on);
}

/*
 * Merges must happen with coalescing on (else inconclusive) and never
 * with it off (else the sysctl is ignored: a failure).
 */
static void judge_merges(struct result *r, const char *what,
			 long long on_merges, long long off_merges, bool have_off)
{
	if (have_off && off_merges)
		set_result(r, V_FAIL, "%s: %lld merges with tcp_backlog_coalesce=0",
			   what, off_merges);
	else if (!on_merges)
		set_result(r, V_SKIP,
			   "%s: no segment was merged with coalescing on (the backlog was never used)",
			   what);
}

/* CPU cpu's busy, idle and softirq time from /proc/stat: 0, or -1. */
static int cpu_time_read(int cpu, struct cpu_time *t)
{
	unsigned long long v[8];
	char line[256], name[16];
	FILE *fp;
	int rc = -1;

	fp = fopen("/proc/stat", "re");
	if (!fp)
		return -1;
	snprintf(name, sizeof(name), "cpu%d ", cpu);
	while (fgets(line, sizeof(line), fp)) {
		if (strncmp(line, name, strlen(name)))
			continue;
		/* user nice system idle iowait irq softirq steal */
		if (sscanf(line + strlen(name), "%llu %llu %llu %llu %llu %llu %llu %llu",
			   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) == 8) {
			t->idle = v[3] + v[4];
			t->busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
			t->softirq = v[6];
			rc = 0;
		}
		break;
	}
	fclose(fp);
	return rc;
}

/*
 * Make the receive path run on the reader's CPU, not the sender's:
 * RPS on kgate1's receive queue steers every segment written into tap
 * to the backlog of CPU 1, whose softirq runs TCP's receive path there
 * (tcp_v4_rcv() and tcp_add_backlog() when the reader holds the
 * socket); the reader is pinned to CPU 1 and the sender (this thread)
 * to CPU 0 (the first two CPUs the process may use, in fact). Without it, write() into tap runs the whole receive
 * softirq on the sender's CPU, and the receiver is rarely the
 * bottleneck. The queue's rps_cpus is only in a sysfs mounted from the
 * test's network namespace: a new mount namespace gets one on /sys.
 * 0, or -1 with why.
 */
static int steer(struct flow *f, char *why, size_t cap)
{
	int cpu, cpus[2], n = 0;
	char path[128], mask[16];
	cpu_set_t set;

	/* The first two CPUs this process may run on: sender, reader. */
	if (sched_getaffinity(0, sizeof(set), &set)) {
		snprintf(why, cap, "sched_getaffinity: %s", strerror(errno));
		return -1;
	}
	for (cpu = 0; cpu < CPU_SETSIZE && n < 2; cpu++)
		if (CPU_ISSET(cpu, &set))
			cpus[n++] = cpu;
	if (n < 2) {
		snprintf(why, cap, "one CPU: the receive path cannot be steered away from the sender");
		return -1;
	}
	if (cpus[1] >= 32) {
		snprintf(why, cap, "the reader's CPU %d is past the 32 an rps_cpus word holds",
			 cpus[1]);
		return -1;
	}
	if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	    mount("sysfs", "/sys", "sysfs", 0, NULL)) {
		snprintf(why, cap, "a sysfs of the test's namespace: %s", strerror(errno));
		return -1;
	}
	snprintf(path, sizeof(path), "/sys/class/net/%s/queues/rx-0/rps_cpus", DEV_NAME);
	snprintf(mask, sizeof(mask), "%x", 1u << cpus[1]);
	if (write_file(path, mask)) {
		snprintf(why, cap, "%s rx-0 rps_cpus: %s (a kernel without CONFIG_RPS?)",
			 DEV_NAME, strerror(errno));
		return -1;
	}
	CPU_ZERO(&set);
	CPU_SET(cpus[0], &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		snprintf(why, cap, "pinning the sender to CPU %d: %s", cpus[0], strerror(errno));
		return -1;
	}
	f->scpu = cpus[0];
	f->rcpu = cpus[1];
	diag("RPS steers %s's segments to CPU %d, the reader's; the sender runs on CPU %d",
	     DEV_NAME, f->rcpu, f->scpu);
	return 0;
}

/* Open the window: slow start and receive buffer tuning. */
static bool warm_up(struct flow *f, struct result *r)
{
	enum verdict v;
	char why[256];
	double secs;

	v = transfer(f, 0, bench_opts.bulk_bytes, &secs, why, sizeof(why));
	if (v != V_PASS) {
		set_result(r, v, "warm-up transfer: %s", why);
		return false;
	}
	diag("warm-up: %u bytes in %.3f s; window %u bytes (scale %u), MSS %u, receive buffer %d",
	     bench_opts.bulk_bytes, secs, f->wnd, f->c.wscale, MSS, bench_opts.rcvbuf);
	f->slowest = secs;
	return true;
}

/* Whether n more transfers fit before the bulk test's deadline. */
static bool bulk_time_for(const struct flow *f, int n)
{
	struct timespec t;

	now(&t);
	return elapsed_us(&f->started, &t) / 1e6 + 2 * n * f->slowest <
	       bench_opts.bulk_budget;
}

/*
 * Per mode ([0] on, [1] off): what each bulk run measured, and the CPU
 * time of all of them (ticks of USER_HZ, summed: one run's share of a
 * tick-counted CPU is too coarse on its own).
 */
struct bulk_samples {
	struct samples mbps, merges, drops, qdrops;
	struct cpu_time rcv, snd;	/* the reader's and the sender's CPU */
	double mb;			/* megabytes moved */
};

static void cpu_time_add(struct cpu_time *sum, const struct cpu_time *a,
			 const struct cpu_time *b)
{
	sum->busy += b->busy - a->busy;
	sum->idle += b->idle - a->idle;
	sum->softirq += b->softirq - a->softirq;
}

/* A CPU's busy (or idle) share of t, in %; -1 without ticks. */
static double cpu_pct(const struct cpu_time *t, bool busy)
{
	if (!(t->busy + t->idle))
		return -1;
	return 100.0 * (double)(busy ? t->busy : t->idle) / (double)(t->busy + t->idle);
}

/*
 * One bulk run: bulk_bytes more of the stream, and what the receiver's
 * and sender's CPUs did meanwhile. V_PASS with *mbps, or the verdict
 * with r set.
 */
static enum verdict bulk_run(struct flow *f, struct result *r, int m, int rep,
			     struct bulk_samples *b, double *mbps)
{
	const struct bench_opts *o = &bench_opts;
	struct cpu_time ra, rb, sa, sb, rt = { 0 }, st = { 0 };
	long long rexmits, timeouts, merged, dropped, qa, qb;
	struct nstat na, nb;
	char why[256];
	enum verdict vd;
	double secs;
	int qlen;

	if (nstat_read(&na) || (f->rcpu >= 0 && (cpu_time_read(f->rcpu, &ra) ||
						 cpu_time_read(f->scpu, &sa)))) {
		set_result(r, V_SKIP, "a counter read failed");
		return V_SKIP;
	}
	rexmits = f->rexmits;
	timeouts = f->timeouts;
	if (softnet_read(f->rcpu, &qa, &qlen))
		qa = -1;
	vd = transfer(f, f->una, f->una + o->bulk_bytes, &secs, why, sizeof(why));
	if (vd != V_PASS) {
		set_result(r, vd, "bulk %s, run %d: %s", onoff[m], rep + 1, why);
		return vd;
	}
	if (softnet_read(f->rcpu, &qb, &qlen))
		qb = -1;
	if (qa < 0 || qb < 0 || nstat_read(&nb) ||
	    (f->rcpu >= 0 && (cpu_time_read(f->rcpu, &rb) || cpu_time_read(f->scpu, &sb)))) {
		set_result(r, V_SKIP, "a counter read failed");
		return V_SKIP;
	}
	merged = nb.v[NS_COALESCE] - na.v[NS_COALESCE];
	dropped = nb.v[NS_BACKLOGDROP] - na.v[NS_BACKLOGDROP];
	if (secs > f->slowest)
		f->slowest = secs;
	*mbps = o->bulk_bytes / 1e6 / secs;
	add(&b->mbps, *mbps);
	add(&b->merges, (double)merged);
	add(&b->drops, (double)dropped);
	add(&b->qdrops, (double)(qb - qa));
	b->mb += o->bulk_bytes / 1e6;
	if (f->rcpu >= 0) {
		cpu_time_add(&rt, &ra, &rb);
		cpu_time_add(&st, &sa, &sb);
		cpu_time_add(&b->rcv, &ra, &rb);
		cpu_time_add(&b->snd, &sa, &sb);
	}
	diag("bulk run %d, coalescing %s: %u bytes in %.3f s, %.2f MB/s, %lld merges, %lld backlog drops, %lld input queue drops, %lld restarts (%lld after a timeout); receiver CPU busy %.0f%%, sender CPU idle %.0f%%",
	     rep + 1, onoff[m], o->bulk_bytes, secs, *mbps, merged, dropped, qb - qa,
	     f->rexmits - rexmits, f->timeouts - timeouts, cpu_pct(&rt, true), cpu_pct(&st, false));
	return V_PASS;
}

static void bulk_figures(int m, const struct bulk_samples *b, bool steered)
{
	const struct cpu_time *rc = &b->rcv;
	char name[64];

	snprintf(name, sizeof(name), "bulk_%s_goodput", onoff[m]);
	figure_spread(name, &b->mbps, "MB/s");
	snprintf(name, sizeof(name), "bulk_%s_merges", onoff[m]);
	figure(name, median(&b->merges, NULL, NULL), "segments");
	snprintf(name, sizeof(name), "bulk_%s_backlog_drops", onoff[m]);
	figure(name, median(&b->drops, NULL, NULL), "segments");
	snprintf(name, sizeof(name), "bulk_%s_queue_drops", onoff[m]);
	figure(name, median(&b->qdrops, NULL, NULL), "segments");
	if (!steered || !(rc->busy + rc->idle))
		return;
	snprintf(name, sizeof(name), "bulk_%s_receiver_busy", onoff[m]);
	figure(name, cpu_pct(rc, true), "%");
	snprintf(name, sizeof(name), "bulk_%s_receiver_softirq", onoff[m]);
	figure(name, 100.0 * (double)rc->softirq / (double)(rc->busy + rc->idle), "%");
	snprintf(name, sizeof(name), "bulk_%s_receiver_cpu", onoff[m]);
	figure(name, (double)rc->busy * 1000.0 / (double)sysconf(_SC_CLK_TCK) / b->mb, "ms/MB");
	snprintf(name, sizeof(name), "bulk_%s_sender_idle", onoff[m]);
	figure(name, cpu_pct(&b->snd, false), "%");
}

/*
 * Receiver-bound, with coalescing off: the reader's CPU busy at least
 * RECEIVER_BUSY % of the runs, and the sender's idle at least
 * SENDER_SPARE % (it waited for the window: it could have sent more).
 */
#define RECEIVER_BUSY	90
#define SENDER_SPARE	5

static void run_bulk(struct flow *f, struct result *r)
{
	const struct bench_opts *o = &bench_opts;
	static struct bulk_samples b[2];
	struct samples ratio = { 0 };
	static char snap[2][NETSTAT_MAX];
	int rep, k, m, nmodes = f->sysctl ? 2 : 1;
	long long total_merges[2] = { 0, 0 };
	double v[2], busy, spare;

	memset(b, 0, sizeof(b));
	snap_netstat(snap[0]);
	for (rep = 0; rep < o->reps && bulk_time_for(f, nmodes); rep++) {
		for (k = 0; k < nmodes; k++) {
			/* Alternate which goes first: drift hits both alike. */
			m = nmodes == 2 ? (k + rep) % 2 : 0;
			if (set_mode(f, m == 0)) {
				set_result(r, V_FAIL, "setting tcp_backlog_coalesce: %s",
					   strerror(errno));
				return;
			}
			if (bulk_run(f, r, m, rep, &b[m], &v[m]) != V_PASS)
				return;
			total_merges[m] += (long long)b[m].merges.v[b[m].merges.n - 1];
		}
		if (nmodes == 2)
			add(&ratio, v[0] / v[1]);
	}
	set_mode(f, 1);
	snap_netstat(snap[1]);
	diag_mib("bulk", "TcpExt", snap[0], snap[1]);
	for (m = 0; m < nmodes && rep; m++)
		bulk_figures(m, &b[m], f->rcpu >= 0);
	figure_spread("bulk_ratio", &ratio, "x");
	if (ratio.n)
		figure("bulk_pairs", ratio.n, "pairs");
	if (rep < o->reps)
		set_result(r, V_SKIP,
			   "too slow to measure here: %d of %d runs per mode within %d s (slowest transfer %.1f s)",
			   rep, o->reps, o->bulk_budget, f->slowest);
	judge_merges(r, "bulk", total_merges[0], total_merges[1], nmodes == 2);
	/* Receiver-bound: judged on the runs without coalescing's help. */
	busy = cpu_pct(&b[nmodes - 1].rcv, true);
	spare = cpu_pct(&b[nmodes - 1].snd, false);
	if (busy < RECEIVER_BUSY)
		set_result(r, V_SKIP,
			   "bulk: the receiver's CPU was busy %.1f%% of the runs with coalescing %s (under %d%%): not receiver-bound",
			   busy, onoff[nmodes - 1], RECEIVER_BUSY);
	if (spare < SENDER_SPARE)
		set_result(r, V_SKIP,
			   "bulk: the sender's CPU was idle %.1f%% of the runs with coalescing %s (under %d%%): the sender may be the bottleneck",
			   spare, onoff[nmodes - 1], SENDER_SPARE);
	set_result(r, V_PASS, "%d runs of %u bytes, every byte in order; merges with coalescing on: %lld, off: %lld",
		   rep * nmodes, o->bulk_bytes, total_merges[0], total_merges[1]);
}

static void run_drain(struct flow *f, struct result *r)
{
	static struct samples us[MAX_SIZES][2], ratio[MAX_SIZES];
	long long merged[MAX_SIZES][2] = { { 0 } }, dropped[MAX_SIZES][2] = { { 0 } };
	int rep, k, m, i, nmodes = f->sysctl ? 2 : 1;
	const struct bench_opts *o = &bench_opts;
	int segs[MAX_SIZES] = { 0 };
	struct drain_result d;
	char why[256], name[64];
	double v[MAX_SIZES][2];
	enum verdict vd;

	for (rep = 0; rep < o->reps; rep++) {
		for (k = 0; k < nmodes; k++) {
			m = nmodes == 2 ? (k + rep) % 2 : 0;
			if (set_mode(f, m == 0)) {
				set_result(r, V_FAIL, "setting tcp_backlog_coalesce: %s",
					   strerror(errno));
				return;
			}
			for (i = 0; i < o->nsizes; i++) {
				vd = drain_once(f, o->sizes[i], &d, why, sizeof(why));
				if (vd != V_PASS) {
					set_result(r, vd, "drain of %d, coalescing %s, run %d: %s",
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
	set_mode(f, 1);
	for (i = 0; i < o->nsizes; i++) {
		for (m = 0; m < nmodes; m++) {
			snprintf(name, sizeof(name), "drain_%d_%s_time", o->sizes[i], onoff[m]);
			figure_spread(name, &us[i][m], "us");
			snprintf(name, sizeof(name), "drain_%d_%s_merges", o->sizes[i], onoff[m]);
			figure(name, (double)merged[i][m] / o->reps, "segments");
			snprintf(name, sizeof(name), "drain_%d_%s_backlog_drops", o->sizes[i],
				 onoff[m]);
			figure(name, (double)dropped[i][m] / o->reps, "segments");
		}
		snprintf(name, sizeof(name), "drain_%d_segments", o->sizes[i]);
		figure(name, segs[i], "segments");
		if (segs[i] < o->sizes[i])
			diag("drain of %d: only %d segments fit the receive window",
			     o->sizes[i], segs[i]);
		snprintf(name, sizeof(name), "drain_%d_ratio", o->sizes[i]);
		figure_spread(name, &ratio[i], "x");
		if (segs[i] >= 2)
			judge_merges(r, "drain", merged[i][0], merged[i][1], nmodes == 2);
	}
	set_result(r, V_PASS, "%d drains, every byte in order; merged with coalescing on, never with it off",
		   o->reps * nmodes * o->nsizes);
}

FIXTURE_SETUP(bench)
{
	const uint8_t syn_opt[8] = {
		2, 4, MSS >> 8, MSS & 0xff,	/* MSS */
		1, 3, 3, PEER_WSCALE,		/* NOP, window scale */
	};
	struct flow *f = &self->f;
	struct utsname u;
	struct nstat n;
	char why[160];
	int i;

	f->dev.fd = -1;
	f->rcpu = -1;
	f->scpu = -1;
	f->lfd = -1;
	f->c.fd = -1;
	f->hold.fd = -1;
	for (i = 0; i < (int)sizeof(pattern); i++)
		pattern[i] = stream_byte((uint32_t)i);
	fill_seg_sums(MSS);
	if (!uname(&u))
		diag("kernel %s %s %s, %ld CPUs online", u.sysname, u.release, u.machine,
		     sysconf(_SC_NPROCESSORS_ONLN));
	/* Counters are per namespace: enter ours before any thread exists. */
	ASSERT_EQ(0, peer_netns())
		TH_LOG("unshare(CLONE_NEWNET): %s (needs root)", strerror(errno));
	f->sysctl = has_sysctl();
	if (!f->sysctl)
		diag("net.ipv4.tcp_backlog_coalesce: absent (a kernel without the kgate patch): only the 'on' half runs");
	ASSERT_EQ(0, peer_dev_open(&f->dev, DEV_NAME, true, false, why, sizeof(why)))
		TH_LOG("%s", why);
	f->lfd = peer_listen(false, LISTEN_PORT, bench_opts.rcvbuf);
	ASSERT_LE(0, f->lfd) TH_LOG("listening socket: %s", strerror(errno));
	ASSERT_EQ(0, uffd_open(&f->hold)) TH_LOG("userfaultfd: %s", strerror(errno));
	if (nstat_read(&n)) {
		snprintf(f->na, sizeof(f->na),
			 "inconclusive: the namespace's TCP counters could not be read");
		return;
	}
	f->c.window = PEER_WINDOW;
	ASSERT_EQ(0, peer_conn_open(&f->c, &f->dev, f->lfd, false, LISTEN_PORT,
				    PEER_PORT, syn_opt, sizeof(syn_opt), CONNECT_MS, why,
				    sizeof(why)))
		TH_LOG("no connection over %s: %s", DEV_NAME, why);
	/* One segment in flight until the first ACK tells the window. */
	f->wnd = MSS;
}

FIXTURE_TEARDOWN(bench)
{
	struct flow *f = &self->f;

	peer_conn_close(&f->c);
	uffd_close(&f->hold);
	if (f->lfd >= 0)
		close(f->lfd);
	peer_dev_close(&f->dev);
}

static void conclude(struct __test_metadata *_metadata,
		     struct flow *f, const struct result *r)
{
	diag("go-back-N restarts of the peer: %lld (%lld after a timeout)",
	     f->rexmits, f->timeouts);
	switch (r->v) {
	case V_PASS:
		diag("%s", r->why);
		break;
	case V_FAIL:
		diag("FAIL: %s", r->why);
		_metadata->passed = 0;
		break;
	case V_SKIP:
		SKIP(return, "%s", r->why);
	}
}

/* Receiver-bound goodput, on against off; every byte in order. */
TEST_F_TIMEOUT(bench, bulk, BULK_TIMEOUT)
{
	struct flow *f = &self->f;
	struct result r = { V_PASS, "" };
	char why[160];

	if (f->na[0])
		SKIP(return, "%s", f->na);
	if (!bench_opts.bulk)
		SKIP(return, "--no-bulk");
	if (steer(f, why, sizeof(why)))
		SKIP(return, "inconclusive: %s", why);
	now(&f->started);
	if (warm_up(f, &r))
		run_bulk(f, &r);
	conclude(_metadata, f, &r);
}

/* Backlog drain time, on against off; every byte in order. */
TEST_F_TIMEOUT(bench, drain, DRAIN_TIMEOUT)
{
	struct flow *f = &self->f;
	struct result r = { V_PASS, "" };

	if (f->na[0])
		SKIP(return, "%s", f->na);
	if (!bench_opts.drain)
		SKIP(return, "--no-drain");
	if (warm_up(f, &r))
		run_drain(f, &r);
	conclude(_metadata, f, &r);
}

TEST_HARNESS_MAIN
