// SPDX-License-Identifier: GPL-2.0
/*
 * Random segment sequences through tcp_add_backlog(), judged two ways.
 *
 * Each sequence (2 to 16 segments from a seeded generator: contiguous,
 * gapped, overlapping and repeated sequence numbers, every flag, options
 * alike and not, another DS field, bad checksums, ACKs and windows that
 * move both ways while the kernel has data in flight) is written while
 * the receiving socket is held (see backlog_coalesce.c), so that every
 * segment goes through tcp_add_backlog(), twice, each time on a new
 * connection:
 *
 *  - with merging on, and with net.ipv4.tcp_backlog_coalesce=0 (or,
 *    on a kernel without that sysctl, without the hold: no backlog at
 *    all). Merging is an optimisation: what the application reads
 *    (bytes, EOF, a reset), the state, what the kernel acknowledges, its
 *    send window and unacknowledged data, the segments it queued out
 *    of order, the challenge ACKs and checksum errors it counts, and
 *    whether the last data read carries the receive timestamp of a
 *    segment written late must be the same both times. Not
 *    compared: the receive MSS the kernel infers (a merged skb is one
 *    sample where its parts were two) and when the kernel sends ACKs.
 *  - against a model of the merge rules: TCPBacklogCoalesce, read after
 *    each segment written, says which segment was merged into the
 *    backlog's tail; the model says which may be (fz_may_merge()). A
 *    merge the model forbids is a failure; with merging off, any merge;
 *    over tap (variant ipv4_tap: page-fragment heads the merge steals),
 *    on kgate's kernels, also a merge the model allows that did not
 *    happen.
 *
 * A failing sequence is made smaller before it is reported (segments
 * dropped, fields made plain, as long as it still fails) and printed
 * as lines a replay reads back ('# fuzz: seg ...').
 *
 * The generator stays inside what a TCP peer may send, where merging
 * must not change what happens. A merged skb carries the newest ACK of
 * its parts, so every ACK is one the kernel accepts: none of data it
 * never sent (that drops the whole merged skb, where unmerged only its
 * part would go), none older than what it had acknowledged to it
 * allows (RFC 5961; that drops a part alone, where merged it would be
 * taken). No data after its FIN (merged into the FIN's skb, it would
 * reach the application; alone, it is dropped). Old data only with an
 * ACK and window that change nothing: whether the kernel looks at old
 * data at all depends on when it last sent an ACK, which merging
 * moves.
 *
 * And a burst far beyond the backlog's limit, held, merging on and
 * off: part of it must be dropped, and what is read must be the stream
 * up to what the kernel acknowledges.
 *
 * The regressions case plays the sequences that once failed, shrunk,
 * from the replay files of a folder: each must be judged and pass.
 *
 * Cases: fuzz.{ipv4,ipv6,ipv4_tap}.{random,regressions,burst}. A sequence whose socket
 * was not held, or whose writes or counters failed, is not judged;
 * when more than half were not, the case is skipped as inconclusive.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../kselftest_harness.h"
#include "backlog_peer.h"
#include "backlog_pkt.h"

#define FZ_DEV		"blf0"
#define FZ_LPORT	5002
#define FZ_PPORT	41000	/* the first connection's; one more each */
#define FZ_PPORTS	20000
#define FZ_WINDOW	64000
#define FZ_PRIME	8	/* queued before the hold; 1 byte is read */
#define FZ_KDATA	200	/* the kernel's data in flight, when it has some */
#define FZ_SEGS		16
#define FZ_LEN		1000	/* the longest payload (below both MSS) */
#define FZ_OPT		40
#define FZ_ACK_OLD	-1	/* ack=-1: one below the kernel's first byte (replays) */
#define FZ_SETTLE_MS	2000
#define FZ_RELEASE_MS	5000
#define FZ_SHRINK_RUNS	60
#define FZ_LATE_MS	20

/* The defaults of the selftest; kgate's wrapper sets them from its options. */
static unsigned long long fz_seed = 1;
static unsigned int fz_count = 64;
static unsigned int fz_max_segs = FZ_SEGS;
static unsigned int fz_max_len = 400;
static const char *fz_replay;	/* a file of sequences to play instead */
static unsigned int fz_budget;	/* seconds random may take at most (0: no limit) */
/* The regressions case plays every *.seq file of this folder. */
static const char *fz_regressions = "/usr/share/kgate/fuzz-regressions";

struct fz_seg {
	unsigned int off;	/* sequence offset from the stream's start */
	unsigned int len;
	unsigned int flags;	/* PKT_* */
	unsigned int tos;
	unsigned int window;
	unsigned int urg;	/* urgent pointer, with PKT_URG */
	int ack;		/* FZ_ACK_OLD, or bytes of the kernel's data acked */
	bool bad_csum;
	unsigned int optlen;
	uint8_t opt[FZ_OPT];
};

struct fz_seq {
	bool kdata;		/* the kernel has FZ_KDATA bytes unacknowledged */
	bool late;		/* the last segment is written FZ_LATE_MS after the rest */
	/* A burst instead of s[]: burst contiguous ACK segments of burst_len bytes. */
	unsigned int burst, burst_len;
	unsigned int n;
	struct fz_seg s[FZ_SEGS];
};

/* What one play of a sequence showed; two plays must agree on all of it. */
struct fz_outcome {
	unsigned int got;	/* bytes the application read after the prime */
	long bad;		/* first offset read with a wrong byte, -1 */
	int end;		/* 0: nothing more, -1: EOF, else errno */
	int state;		/* tcpi_state */
	unsigned long long bytes_received;
	unsigned int snd_wnd;
	unsigned int unacked;
	unsigned int ooopack;	/* segments queued out of order */
	long long acked;	/* what the kernel acknowledged, from the stream start */
	bool rst;		/* the probe was answered with a reset */
	/*
	 * With q->late: whether the receive timestamp of the last data read
	 * is that of the late segment or later (-1: no timestamp).
	 */
	int stamp_late;
	long long challenges;	/* TCPSYNChallenge */
	long long csum_errors;	/* InCsumErrors */
	/* the model's part: not compared between plays */
	long long merged[FZ_SEGS];	/* TCPBacklogCoalesce after segment i */
	long long drops;		/* TCPBacklogDrop while held */
	long long burst_merged;		/* TCPBacklogCoalesce over a burst */
};

enum fz_mode { FZ_ON, FZ_OFF, FZ_UNHELD };

enum fz_verdict { FZ_PASS, FZ_FAIL, FZ_NA };

struct fz {
	struct peer_dev dev;
	struct uffd_hold hold;
	int lfd;
	bool v6;
	bool sysctl;
	unsigned int pport;
	char na[160];
};

/* splitmix64: the same numbers on every architecture. */
static unsigned long long fz_next(unsigned long long *state)
{
	unsigned long long z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* A number in [0, n). */
static unsigned int fz_below(unsigned long long *st, unsigned int n)
{
	return n ? (unsigned int)(fz_next(st) % n) : 0;
}

static bool fz_chance(unsigned long long *st, unsigned int percent)
{
	return fz_below(st, 100) < percent;
}

/* Options of one of a few shapes; the values are few so that pairs match. */
static void fz_gen_opts(unsigned long long *st, struct fz_seg *g)
{
	unsigned int kind = fz_below(st, 100);

	g->optlen = 0;
	if (kind < 55)
		return;
	if (kind < 85) {
		/* NOP, NOP, timestamps (not negotiated: ignored by TCP) */
		const uint8_t ts[12] = { 1, 1, 8, 10, 0, 0, 0, 100 + fz_below(st, 2),
					 0, 0, 0, fz_below(st, 2) };

		memcpy(g->opt, ts, sizeof(ts));
		g->optlen = sizeof(ts);
	} else if (kind < 93) {
		memset(g->opt, 1, 4);	/* four NOPs */
		g->optlen = 4;
	} else {
		/* an experimental option (RFC 6994), 4 or 8 bytes */
		g->optlen = fz_chance(st, 50) ? 4 : 8;
		memset(g->opt, 1, g->optlen);
		g->opt[0] = 254;
		g->opt[1] = g->optlen;
		g->opt[2] = 0x4b;
		g->opt[3] = fz_below(st, 2);
	}
}

/*
 * Make g the data that follows p in sequence, with p's DS field,
 * options, ACK and window: a segment the rules let merge into p, when p
 * is itself one that can be a tail (its end is cur, a good checksum, an
 * ACK without SYN, RST, URG or FIN).
 */
static void fz_gen_follow(unsigned long long *st, const struct fz_seg *p, struct fz_seg *g,
			  unsigned int cur)
{
	if (p->off + p->len != cur || p->bad_csum || !(p->flags & PKT_ACK) ||
	    p->flags & (PKT_SYN | PKT_RST | PKT_URG | PKT_FIN))
		return;
	*g = *p;
	g->off = cur;
	g->len = 1 + fz_below(st, fz_max_len);
	g->flags = PKT_ACK | (p->flags & (PKT_ECE | PKT_CWR)) | (fz_chance(st, 30) ? PKT_PSH : 0);
}

/*
 * The sequence of seed: its segments in the order written. Offsets
 * start after the prime; a FIN ends what may follow in sequence space.
 */
static void fz_generate(unsigned long long seed, struct fz_seq *q)
{
	static const unsigned int tos[] = { 0x10, 0x02, 0x01, 0x04 };
	static const unsigned int win[] = { 60000, 50000, 65535 };
	static const int acks[] = { 0, 100, FZ_KDATA };
	unsigned long long st = seed;
	unsigned int i, cur = FZ_PRIME, fin = 0;
	bool fin_sent = false;

	struct fz_seg base;

	/*
	 * A forward sequence only moves on (next, or past a hole) and has
	 * no empty segments: its send window can be compared (see
	 * fz_window_sound()).
	 */
	bool forward;

	memset(q, 0, sizeof(*q));
	q->kdata = fz_chance(&st, 50);
	q->late = fz_chance(&st, 25);
	forward = fz_chance(&st, 40);
	/* What most segments of this sequence share: so that pairs merge. */
	fz_gen_opts(&st, &base);
	base.tos = fz_chance(&st, 85) ? 0 : tos[fz_below(&st, 4)];
	/* An ECN peer: ECE or CWR on most of its segments, so that pairs share it. */
	base.flags = (fz_chance(&st, 15) ? PKT_ECE : 0) | (fz_chance(&st, 10) ? PKT_CWR : 0);
	q->n = 2 + fz_below(&st, fz_max_segs - 1);
	for (i = 0; i < q->n; i++) {
		struct fz_seg *g = &q->s[i];
		/* length: none, short, up to the maximum */
		unsigned int kind = fz_below(&st, 100);

		g->len = kind < 10 && !forward ? 0 : kind < 50 ? 1 + fz_below(&st, 75) :
			 76 + fz_below(&st, fz_max_len > 76 ? fz_max_len - 75 : 1);
		/* where: next, past a hole, overlapping, again */
		kind = fz_below(&st, 100);
		if (kind < 70 || i == 0 || (forward && kind < 85))
			g->off = cur;
		else if (kind < 80 || forward)
			g->off = cur + 1 + fz_below(&st, 50);
		else if (kind < 90)
			g->off = cur - fz_below(&st, cur - FZ_PRIME + 1);
		else
			g->off = q->s[i - 1].off;
		g->flags = (fz_chance(&st, 92) ? PKT_ACK : 0) |
			   (fz_chance(&st, 30) ? PKT_PSH : 0) |
			   (fz_chance(&st, 10) ? PKT_FIN : 0) |
			   (fz_chance(&st, 4) ? PKT_RST : 0) |
			   (fz_chance(&st, 5) ? PKT_URG : 0) |
			   (fz_chance(&st, 3) ? PKT_SYN : 0) |
			   (fz_chance(&st, 6) ? PKT_ECE : 0) |
			   (fz_chance(&st, 6) ? PKT_CWR : 0) |
			   (fz_chance(&st, 90) ? base.flags : 0);
		if (g->flags & PKT_URG)
			g->urg = g->len ? 1 + fz_below(&st, g->len) : 1;
		g->tos = fz_chance(&st, 90) ? base.tos : tos[fz_below(&st, 4)];
		g->window = fz_chance(&st, 70) ? FZ_WINDOW : win[fz_below(&st, 3)];
		g->ack = q->kdata && fz_chance(&st, 50) ? acks[fz_below(&st, 3)] : 0;
		g->bad_csum = g->len && fz_chance(&st, 5);
		if (fz_chance(&st, 80)) {
			g->optlen = base.optlen;
			memcpy(g->opt, base.opt, base.optlen);
		} else {
			fz_gen_opts(&st, g);
		}
		/*
		 * A late last segment is mostly one that may merge into the
		 * segment before it, so that the merge's timestamp shows.
		 */
		if (q->late && i && i == q->n - 1 && fz_chance(&st, 70))
			fz_gen_follow(&st, &q->s[i - 1], g, cur);
		/*
		 * One FIN, and nothing in sequence space beyond it: what would
		 * go there is an empty segment right after it (an ACK), which
		 * may merge into the FIN's skb.
		 */
		if (fin_sent)
			g->flags &= ~PKT_FIN;
		if (fin_sent && g->off + g->len > fin) {
			g->off = fin + 1;
			g->len = 0;
			g->flags &= ~(PKT_SYN | PKT_URG);
		}
		g->bad_csum &= g->len > 0;	/* a checksum covers bytes to spoil */
		/*
		 * A segment wholly below what was sent may be old data, which
		 * the kernel looks at or drops by where it last sent a window
		 * (rcv_wup): that follows its own ACKs, which merging may
		 * move. Its ACK and window change nothing either way.
		 */
		if (g->off + g->len <= cur && (g->len || g->off < cur)) {
			g->ack = 0;
			g->window = win[1];
		}
		if (g->flags & PKT_FIN && !(g->flags & (PKT_RST | PKT_SYN)) && !g->bad_csum) {
			fin_sent = true;
			fin = g->off + g->len;
		}
		if (g->off + g->len + !!(g->flags & PKT_FIN) > cur &&
		    !(g->flags & (PKT_SYN | PKT_RST)) && !g->bad_csum)
			cur = g->off + g->len + (g->flags & PKT_FIN && g->off + g->len == fin);
	}
}

/*
 * The merge rules of tcp_add_backlog(), one per line, for skb after
 * tail in the backlog: what may be merged.
 */
static bool fz_may_merge(const struct fz_seg *tail, const struct fz_seg *skb)
{
	unsigned int both = tail->flags & skb->flags, any = tail->flags | skb->flags;
	unsigned int tail_end = tail->off + tail->len + !!(tail->flags & PKT_FIN);

	if (skb->bad_csum)
		return false;			/* dropped before (tcp_checksum_complete()) */
	if (tail_end != skb->off)
		return false;			/* not next in sequence */
	if (tail->tos != skb->tos)
		return false;			/* another DS field */
	if (any & (PKT_SYN | PKT_RST | PKT_URG))
		return false;			/* SYN, RST, URG on either */
	if (!(both & PKT_ACK))
		return false;			/* ACK on both */
	if ((tail->flags ^ skb->flags) & (PKT_ECE | PKT_CWR))
		return false;			/* ECE, CWR alike */
	if (tail->optlen != skb->optlen || memcmp(tail->opt, skb->opt, tail->optlen))
		return false;			/* the same header length and options */
	return true;
}

static const char *fz_flag_names(unsigned int f, char *buf)
{
	static const char names[] = "FSRPAUEC";
	int i, n = 0;

	for (i = 0; i < 8; i++)
		if (f & (1u << i))
			buf[n++] = names[i];
	if (!n)
		buf[n++] = '.';
	buf[n] = 0;
	return buf;
}

/* One segment as a line a replay reads back. */
static void fz_print_seg(FILE *out, const char *pre, const struct fz_seg *g)
{
	char fl[9];
	unsigned int i;

	fprintf(out, "%sseg off=%u len=%u flags=%s tos=%u win=%u urg=%u ack=%d csum=%s opt=",
		pre, g->off, g->len, fz_flag_names(g->flags, fl), g->tos, g->window,
		g->urg, g->ack, g->bad_csum ? "bad" : "ok");
	for (i = 0; i < g->optlen; i++)
		fprintf(out, "%02x", g->opt[i]);
	fprintf(out, "%s\n", g->optlen ? "" : "-");
}

static void fz_print(FILE *out, const char *pre, const struct fz_seq *q)
{
	unsigned int i;

	fprintf(out, "%sseq kdata=%d late=%d\n", pre, q->kdata, q->late);
	for (i = 0; i < q->n; i++)
		fz_print_seg(out, pre, &q->s[i]);
	fprintf(out, "%send\n", pre);
	fflush(out);
}

static int fz_parse_flags(const char *s, unsigned int *f)
{
	static const char names[] = "FSRPAUEC";
	const char *p;

	*f = 0;
	if (!strcmp(s, "."))
		return 0;
	for (; *s; s++) {
		p = strchr(names, *s);
		if (!p)
			return -1;
		*f |= 1u << (p - names);
	}
	return 0;
}

/* One "seg ..." line (after the word seg): 0, or -1 if malformed. */
static int fz_parse_seg(const char *line, struct fz_seg *g)
{
	char fl[16], csum[8], opt[2 * FZ_OPT + 2];
	unsigned int i, byte;

	memset(g, 0, sizeof(*g));
	if (sscanf(line, " off=%u len=%u flags=%15s tos=%u win=%u urg=%u ack=%d csum=%7s opt=%81s",
		   &g->off, &g->len, fl, &g->tos, &g->window, &g->urg, &g->ack, csum, opt) != 9)
		return -1;
	if (fz_parse_flags(fl, &g->flags) || g->len > FZ_LEN || g->tos > 255 ||
	    !g->window || g->window > 65535 || g->urg > 65535 ||
	    g->ack < FZ_ACK_OLD || g->ack > FZ_KDATA)
		return -1;
	if (strcmp(csum, "ok") && strcmp(csum, "bad"))
		return -1;
	g->bad_csum = !strcmp(csum, "bad");
	if (g->bad_csum && !g->len)
		return -1;	/* no payload to spoil the checksum of */
	if (strcmp(opt, "-")) {
		if (strlen(opt) % 8 || strlen(opt) / 2 > FZ_OPT)
			return -1;	/* options come in 4-byte words */
		for (i = 0; i < strlen(opt) / 2; i++) {
			if (sscanf(opt + 2 * i, "%2x", &byte) != 1)
				return -1;
			g->opt[i] = byte;
		}
		g->optlen = strlen(opt) / 2;
	}
	return 0;
}

/*
 * The sequences of a replay file: "seq kdata=0|1 [late=0|1]", "seg ..." lines,
 * "end"; a leading "# fuzz: " (as printed) is allowed, other lines
 * are skipped. Returns how many were read into q (up to max), -1 on a
 * malformed line (said on stderr).
 */
static int fz_read_replay(const char *path, struct fz_seq *q, int max)
{
	char line[512];
	int n = 0, lineno = 0, kd, late;
	bool in = false;
	FILE *f = fopen(path, "re");

	if (!f) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		char *p = line;

		lineno++;
		if (!strncmp(p, "# fuzz: ", 8))
			p += 8;
		p[strcspn(p, "\n")] = 0;
		late = 0;
		if (sscanf(p, "seq kdata=%d late=%d", &kd, &late) >= 1 && !in && n < max &&
		    (kd == 0 || kd == 1) && (late == 0 || late == 1)) {
			memset(&q[n], 0, sizeof(q[n]));
			q[n].kdata = kd;
			q[n].late = late;
			in = true;
		} else if (in && !strncmp(p, "seg ", 4)) {
			if (q[n].n == FZ_SEGS || fz_parse_seg(p + 3, &q[n].s[q[n].n]))
				goto bad;
			q[n].n++;
		} else if (in && !strcmp(p, "end")) {
			if (q[n].n < 1)
				goto bad;
			in = false;
			n++;
		} else if (in || !strncmp(p, "seq", 3) || !strncmp(p, "seg", 3)) {
			goto bad;
		}
	}
	fclose(f);
	if (in || !n) {
		fprintf(stderr, "%s: %s\n", path, in ? "a sequence without its end line" :
			"no sequence (seq kdata=0|1, seg ..., end)");
		return -1;
	}
	return n;
bad:
	fclose(f);
	fprintf(stderr, "%s:%d: not a sequence line: %s\n", path, lineno, line);
	return -1;
}

struct fz_receiver {
	pthread_t thread;
	int fd;
	uint8_t *buf;
	ssize_t ret;
};

static void *fz_receiver_main(void *arg)
{
	struct fz_receiver *rx = arg;
	sigset_t set;

	sigfillset(&set);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	rx->ret = recv(rx->fd, rx->buf, 1, 0);
	return NULL;
}

static int fz_send(struct peer_conn *c, const struct fz_seg *g, bool kdata)
{
	uint8_t data[FZ_LEN];
	struct pkt_tcp s = {
		.seq = c->iss + 1 + g->off, .flags = g->flags, .window = g->window,
		.urg_ptr = g->urg, .tos = g->tos, .opt = g->opt, .optlen = g->optlen,
		.data = data, .len = g->len,
	};
	unsigned int i;

	if (g->ack == FZ_ACK_OLD)
		s.ack = c->irs;
	else
		s.ack = c->irs + 1 + (kdata ? g->ack : 0);
	for (i = 0; i < g->len; i++)
		data[i] = stream_byte(g->off + i);
	return peer_conn_send(c, &s, g->bad_csum);
}

static bool fz_readable(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	return poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN);
}

/*
 * Read what is there now, from stream offset *rd on; *ts is the receive
 * timestamp of the last data read (zero if none came with it).
 */
static void fz_read(int fd, unsigned int *rd, struct fz_outcome *o, struct timespec *ts)
{
	char cbuf[CMSG_SPACE(sizeof(struct timespec)) * 2];
	uint8_t buf[4096];
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;
	ssize_t n, i;

	for (;;) {
		msg.msg_control = cbuf;
		msg.msg_controllen = sizeof(cbuf);
		n = recvmsg(fd, &msg, MSG_DONTWAIT);
		if (n == 0) {
			o->end = -1;
			return;
		}
		if (n < 0) {
			o->end = errno == EAGAIN ? 0 : errno;
			return;
		}
		for (i = 0; i < n; i++)
			if (o->bad < 0 && buf[i] != stream_byte(*rd + i))
				o->bad = *rd + i;
		*rd += n;
		o->got += n;
		memset(ts, 0, sizeof(*ts));
		for (cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm))
			if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_TIMESTAMPNS)
				memcpy(ts, CMSG_DATA(cm), sizeof(*ts));
	}
}

/*
 * Play q once on a new connection: FZ_NA (with why) when the play
 * could not show anything (no hold, a failed write or counter read),
 * FZ_FAIL when the kernel broke what every play needs, else FZ_PASS
 * with o filled.
 */
static enum fz_verdict fz_play(struct fz *f, const struct fz_seq *q, enum fz_mode mode,
			       struct fz_outcome *o, char *why, size_t cap)
{
	const uint16_t mss = f->v6 ? 1440 : 1460;
	const uint8_t mss_opt[4] = { 2, 4, mss >> 8, mss & 0xff };
	const struct fz_seg prime = { .off = 0, .len = FZ_PRIME, .flags = PKT_ACK | PKT_PSH,
				      .window = FZ_WINDOW };
	static struct fz_receiver rx;
	struct nstat before, during, after, n;
	enum fz_verdict v = FZ_NA;
	struct peer_conn c = { .window = FZ_WINDOW };
	uint8_t buf[PEER_FRAME_MAX], kd[FZ_KDATA];
	struct timespec late = { 0, 0 }, ts;
	int one = 1;
	struct tcp_info ti;
	socklen_t tlen = sizeof(ti);
	unsigned int i, rd = 1;
	bool held = false;
	struct pkt_tcp s;
	int rc;

	memset(o, 0, sizeof(*o));
	o->bad = -1;
	memset(&rx, 0, sizeof(rx));
	if (f->sysctl && set_coalesce(mode != FZ_OFF)) {
		snprintf(why, cap, "setting tcp_backlog_coalesce: %s", strerror(errno));
		return FZ_FAIL;
	}
	f->pport = f->pport + 1 < FZ_PPORT + FZ_PPORTS ? f->pport + 1 : FZ_PPORT;
	if (peer_conn_open(&c, &f->dev, f->lfd, f->v6, FZ_LPORT, f->pport, mss_opt,
			   sizeof(mss_opt), FZ_SETTLE_MS, why, cap))
		return FZ_FAIL;
	setsockopt(c.fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one));
	if (q->kdata) {
		memset(kd, 0x6b, sizeof(kd));
		if (send(c.fd, kd, sizeof(kd), 0) != (ssize_t)sizeof(kd)) {
			snprintf(why, cap, "send() of the kernel's data: %s", strerror(errno));
			v = FZ_FAIL;
			goto out;
		}
		while (c.snd_nxt != c.irs + 1 + FZ_KDATA &&
		       peer_conn_recv(&c, &s, buf, sizeof(buf), FZ_SETTLE_MS) == 1)
			;
		if (c.snd_nxt != c.irs + 1 + FZ_KDATA) {
			snprintf(why, cap, "the kernel's data never came out of tun");
			v = FZ_FAIL;
			goto out;
		}
	}
	if (fz_send(&c, &prime, q->kdata)) {
		snprintf(why, cap, "writing to tun: %s", strerror(errno));
		goto out;
	}
	if (!fz_readable(c.fd) && peer_conn_barrier(&c, FZ_SETTLE_MS) != 1) {
		snprintf(why, cap, "the kernel did not answer the barrier");
		goto out;
	}
	if (!fz_readable(c.fd)) {
		snprintf(why, cap, "%d in-order bytes never became readable", FZ_PRIME);
		v = FZ_FAIL;
		goto out;
	}
	if (mode != FZ_UNHELD) {
		if (uffd_arm(&f->hold)) {
			snprintf(why, cap, "userfaultfd page: %s", strerror(errno));
			v = FZ_FAIL;
			goto out;
		}
		rx.fd = c.fd;
		rx.buf = f->hold.page;
		if (pthread_create(&rx.thread, NULL, fz_receiver_main, &rx)) {
			snprintf(why, cap, "pthread_create failed");
			v = FZ_FAIL;
			goto out;
		}
		held = uffd_wait(&f->hold, FZ_SETTLE_MS) == 1;
	}
	rc = nstat_read(&before);
	n = before;
	for (i = 0; i < q->burst && (held || mode == FZ_UNHELD) && !rc; i++) {
		const struct fz_seg g = { .off = FZ_PRIME + i * q->burst_len, .len = q->burst_len,
					  .flags = PKT_ACK, .window = FZ_WINDOW };

		rc = fz_send(&c, &g, false) ? -2 : 0;
	}
	for (i = 0; i < q->n && (held || mode == FZ_UNHELD) && !rc; i++) {
		if (q->late && i == q->n - 1) {
			usleep(FZ_LATE_MS * 1000);
			clock_gettime(CLOCK_REALTIME, &late);
		}
		rc = fz_send(&c, &q->s[i], q->kdata) ? -2 : nstat_read(&n);
		o->merged[i] = n.v[NS_COALESCE] - before.v[NS_COALESCE];
	}
	if (q->burst && !rc) {
		rc = nstat_read(&n);
		o->burst_merged = n.v[NS_COALESCE] - before.v[NS_COALESCE];
	}
	during = n;
	if (mode != FZ_UNHELD) {
		if (uffd_resolve(&f->hold))
			uffd_close(&f->hold);
		if (!held)
			shutdown(c.fd, SHUT_RD);
		if (uffd_join(&f->hold, rx.thread, FZ_RELEASE_MS)) {
			snprintf(why, cap, "the held recv() did not return within %d ms",
				 FZ_RELEASE_MS);
			v = FZ_FAIL;
			goto out;
		}
		if (!held) {
			snprintf(why, cap, "the socket was not held");
			goto out;
		}
		if (rx.ret != 1 || f->hold.page[0] != stream_byte(0)) {
			snprintf(why, cap, "the held recv() returned %zd", rx.ret);
			v = FZ_FAIL;
			goto out;
		}
	} else if (fz_readable(c.fd) && recv(c.fd, buf, 1, 0) != 1) {
		snprintf(why, cap, "reading the prime's first byte: %s", strerror(errno));
		goto out;
	}
	if (rc) {
		snprintf(why, cap, rc == -2 ? "writing to tun: %s" : "a counter read failed%.0s",
			 strerror(errno));
		goto out;
	}
	o->drops = during.v[NS_BACKLOGDROP] - before.v[NS_BACKLOGDROP];
	/* Everything written processed, the stream read, the kernel asked. */
	if (peer_conn_barrier(&c, FZ_SETTLE_MS) != 1) {
		snprintf(why, cap, "the kernel did not answer the barrier");
		goto out;
	}
	fz_read(c.fd, &rd, o, &ts);
	o->stamp_late = !q->late || (!ts.tv_sec && !ts.tv_nsec) ? -1 :
			ts.tv_sec > late.tv_sec ||
			(ts.tv_sec == late.tv_sec && ts.tv_nsec >= late.tv_nsec);
	if (getsockopt(c.fd, IPPROTO_TCP, TCP_INFO, &ti, &tlen) || nstat_read(&after)) {
		snprintf(why, cap, "TCP_INFO or a counter: %s", strerror(errno));
		goto out;
	}
	o->state = ti.tcpi_state;
	o->bytes_received = ti.tcpi_bytes_received;
	o->snd_wnd = ti.tcpi_snd_wnd;
	o->unacked = ti.tcpi_unacked;
	o->ooopack = ti.tcpi_rcv_ooopack;
	o->challenges = after.v[NS_SYNCHALLENGE] - before.v[NS_SYNCHALLENGE];
	o->csum_errors = after.v[NS_CSUMERRORS] - before.v[NS_CSUMERRORS];
	/*
	 * The probe: the prime's first byte again. Old data is answered at
	 * once with an ACK of rcv_nxt (a reset once the connection is gone).
	 */
	peer_conn_drain(&c, 0);
	c.last_ack = c.irs;	/* what the probe's answer says, alone */
	{
		const struct fz_seg probe = { .off = 0, .len = 1, .flags = PKT_ACK,
					      .window = FZ_WINDOW, .ack = FZ_ACK_OLD };

		if (fz_send(&c, &probe, false)) {
			snprintf(why, cap, "writing to tun: %s", strerror(errno));
			goto out;
		}
	}
	while ((rc = peer_conn_recv(&c, &s, buf, sizeof(buf), FZ_SETTLE_MS)) == 1) {
		if (s.flags & PKT_RST) {
			o->rst = true;
			break;
		}
		if ((s.flags & PKT_ACK) && !s.len)
			break;
	}
	if (rc != 1) {
		snprintf(why, cap, "the probe was not answered");
		goto out;
	}
	o->acked = o->rst ? -1 : (long long)(s.ack - c.iss - 1);
	v = FZ_PASS;
out:
	peer_conn_close(&c);
	return v;
}

/*
 * Whether the send window is the same after q however it is merged:
 * not when a segment starts below what came before it. The kernel
 * takes a window from a segment whose sequence number is after that of
 * the one it last took a window from (snd_wl1); a merged skb has its
 * first part's, so an old segment between the parts' starts updates
 * the window only when they were merged.
 */
static bool fz_window_sound(const struct fz_seq *q)
{
	unsigned int i, cur = FZ_PRIME, start = 0;

	for (i = 0; i < q->n; i++) {
		const struct fz_seg *g = &q->s[i];

		/*
		 * Nor after a segment with nothing in sequence space at the
		 * same number: unmerged, the second may only widen the window
		 * (same snd_wl1); merged, its window is taken.
		 */
		if (g->off < cur || (i && g->off == start))
			return false;
		if (!(g->flags & (PKT_SYN | PKT_RST)) && !g->bad_csum) {
			cur = g->off + g->len + !!(g->flags & PKT_FIN);
			start = g->off;
		}
	}
	return true;
}

/*
 * Whether the out-of-order packet count is the same however q is
 * merged: not when an empty segment may be merged into one before it.
 * A merged skb counts as its parts (gso_segs) when queued out of order;
 * unmerged, an empty segment is never queued.
 */
static bool fz_ooo_sound(const struct fz_seq *q)
{
	unsigned int i;

	for (i = 1; i < q->n; i++)
		if (!q->s[i].len && !(q->s[i].flags & PKT_FIN))
			return false;
	return true;
}

/*
 * Whether the late segment's timestamp must show the same way however q
 * is merged: not when it has no payload. Merged into the data before
 * it, an empty segment gives that data its own (later) timestamp.
 */
static bool fz_stamp_sound(const struct fz_seq *q)
{
	return q->late && q->n && q->s[q->n - 1].len;
}

/* Where two plays differ: false, with what, if they do. */
static bool fz_same(const struct fz_seq *q, const struct fz_outcome *a,
		    const struct fz_outcome *b, char *why, size_t cap)
{
/* A field that differs, said in why (an expression: no flow control). */
#define FZ_DIFF(field, fmt)						\
	(a->field != b->field &&					\
	 snprintf(why, cap, #field " " fmt " merging on, " fmt " in the other play", \
		  a->field, b->field) >= 0)
	return !(FZ_DIFF(got, "%u") || FZ_DIFF(bad, "%ld") || FZ_DIFF(end, "%d") ||
		 FZ_DIFF(state, "%d") || FZ_DIFF(bytes_received, "%llu") ||
		 FZ_DIFF(acked, "%lld") || FZ_DIFF(rst, "%d") ||
		 (fz_window_sound(q) && FZ_DIFF(snd_wnd, "%u")) ||
		 FZ_DIFF(unacked, "%u") || (fz_ooo_sound(q) && FZ_DIFF(ooopack, "%u")) ||
		 FZ_DIFF(challenges, "%lld") ||
		 (fz_stamp_sound(q) && a->stamp_late >= 0 && b->stamp_late >= 0 &&
		  FZ_DIFF(stamp_late, "%d")) ||
		 FZ_DIFF(csum_errors, "%lld"));
#undef FZ_DIFF
}

/*
 * The model against the counters of a play: which segment merged into
 * the backlog's tail. The tail is the last segment that entered the
 * backlog (bad checksums are dropped before the merge is tried).
 */
static bool fz_model(const struct fz_seq *q, const struct fz_outcome *o, enum fz_mode mode,
		     bool must, char *why, size_t cap)
{
	const struct fz_seg *tail = NULL;
	long long prev = 0;
	unsigned int i;

	for (i = 0; i < q->n; i++) {
		long long d = o->merged[i] - prev;

		prev = o->merged[i];
		if (d < 0 || d > 1) {
			snprintf(why, cap, "TCPBacklogCoalesce %+lld for segment %u alone", d, i);
			return false;
		}
		if (d && mode != FZ_ON) {
			snprintf(why, cap, "segment %u merged with merging %s", i,
				 mode == FZ_OFF ? "off" : "impossible (no hold)");
			return false;
		}
		if (d && (!tail || !fz_may_merge(tail, &q->s[i]))) {
			snprintf(why, cap, "segment %u merged into segment %d: the rules forbid it",
				 i, tail ? (int)(tail - q->s) : -1);
			return false;
		}
		if (!d && must && tail && fz_may_merge(tail, &q->s[i])) {
			snprintf(why, cap, "segment %u not merged into segment %d: the rules allow it",
				 i, (int)(tail - q->s));
			return false;
		}
		if (!q->s[i].bad_csum)
			tail = &q->s[i];
	}
	return true;
}

FIXTURE(fuzz)
{
	struct fz f;
};

FIXTURE_VARIANT(fuzz)
{
	bool v6;
	bool tap;
};

FIXTURE_VARIANT_ADD(fuzz, ipv4) { .v6 = false };
FIXTURE_VARIANT_ADD(fuzz, ipv6) { .v6 = true };
/*
 * Over tap, written non-blocking, each segment is an skb whose head is
 * a page fragment: the merge steals it (fragstolen, a truesize delta
 * charged to the backlog) where over tun it can only copy into the
 * tail's spare room.
 */
FIXTURE_VARIANT_ADD(fuzz, ipv4_tap) { .v6 = false, .tap = true };

FIXTURE_SETUP(fuzz)
{
	struct fz *f = &self->f;
	char why[160];
	int one = 1;

	f->dev.fd = -1;
	f->lfd = -1;
	f->hold.fd = -1;
	f->v6 = variant->v6;
	f->pport = FZ_PPORT;
	ASSERT_EQ(0, peer_netns())
		TH_LOG("unshare(CLONE_NEWNET): %s (needs root)", strerror(errno));
	ASSERT_EQ(0, write_file("/proc/sys/net/ipv4/tcp_rmem", "4096 131072 6291456"));
	ASSERT_EQ(0, write_file("/proc/sys/net/ipv4/tcp_wmem", "4096 16384 4194304"));
	if (!peer_barrier_sound(f->na, sizeof(f->na)))
		return;
	f->sysctl = has_sysctl();
	if (peer_dev_open(&f->dev, FZ_DEV, variant->tap, variant->v6, why, sizeof(why))) {
		if (variant->v6 && strstr(why, "no IPv6")) {
			snprintf(f->na, sizeof(f->na), "%s", why);
			return;
		}
		ASSERT_TRUE(false) TH_LOG("%s", why);
	}
	f->lfd = peer_listen(variant->v6, FZ_LPORT, 0);
	ASSERT_LE(0, f->lfd) TH_LOG("listening socket: %s", strerror(errno));
	/*
	 * Receive timestamps from the listener on, for as long as the test
	 * runs: the kernel switches stamping on in a work item, so sockets
	 * that come and go would see it off at times.
	 */
	ASSERT_EQ(0, setsockopt(f->lfd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one)));
	usleep(20000);
	ASSERT_EQ(0, uffd_open(&f->hold)) TH_LOG("userfaultfd: %s", strerror(errno));
}

FIXTURE_TEARDOWN(fuzz)
{
	struct fz *f = &self->f;

	uffd_close(&f->hold);
	if (f->lfd >= 0)
		close(f->lfd);
	peer_dev_close(&f->dev);
}

/*
 * Both plays of q, both oracles: FZ_PASS, FZ_NA (a play showed nothing)
 * or FZ_FAIL with why.
 */
static enum fz_verdict fz_judge(struct fz *f, const struct fz_seq *q,
				long long *merges, char *why, size_t cap)
{
	enum fz_mode other = f->sysctl ? FZ_OFF : FZ_UNHELD;
	struct fz_outcome on, off;
	enum fz_verdict v;
	char sub[256];

	v = fz_play(f, q, FZ_ON, &on, sub, sizeof(sub));
	if (v != FZ_PASS) {
		snprintf(why, cap, "merging on: %s", sub);
		return v;
	}
	/*
	 * Over tap every merge the rules allow must happen: the merge steals
	 * the segment's page-fragment head, and a sequence's 15 merges at
	 * most fit in a tail's fragments. Only on kgate's kernels (with the
	 * sysctl), whose rules the model states: Linux 6.18 also refuses
	 * to merge into a tail that carries a FIN.
	 */
	if (!fz_model(q, &on, FZ_ON, f->dev.tap && f->sysctl, sub, sizeof(sub))) {
		snprintf(why, cap, "model: %s", sub);
		return FZ_FAIL;
	}
	*merges = on.merged[q->n - 1];
	v = fz_play(f, q, other, &off, sub, sizeof(sub));
	if (v != FZ_PASS) {
		snprintf(why, cap, "%s: %s", other == FZ_OFF ? "merging off" : "no hold", sub);
		return v;
	}
	if (!fz_model(q, &off, other, false, sub, sizeof(sub))) {
		snprintf(why, cap, "model: %s", sub);
		return FZ_FAIL;
	}
	if (on.drops || off.drops) {
		snprintf(why, cap, "the backlog dropped segments");
		return FZ_NA;
	}
	if (!fz_same(q, &on, &off, sub, sizeof(sub))) {
		snprintf(why, cap, "differential: %s", sub);
		return FZ_FAIL;
	}
	return FZ_PASS;
}

/* A plainer copy of segment i, or false when there is none. */
static bool fz_simpler(struct fz_seg *g, unsigned int step)
{
	switch (step) {
	case 0:
		if (!g->optlen)
			return false;
		g->optlen = 0;
		return true;
	case 1:
		if (!g->tos)
			return false;
		g->tos = 0;
		return true;
	case 2:
		if (g->window == FZ_WINDOW)
			return false;
		g->window = FZ_WINDOW;
		return true;
	case 3:
		if (!g->ack)
			return false;
		g->ack = 0;
		return true;
	case 4:
		if (!(g->flags & PKT_PSH))
			return false;
		g->flags &= ~PKT_PSH;
		return true;
	case 5:
		if (g->len <= 1 || g->urg >= g->len)
			return false;
		g->len = g->len > 8 ? g->len / 2 : 1;
		return g->urg <= g->len;
	}
	return false;
}

/*
 * Make a failing sequence smaller while it still fails (up to
 * FZ_SHRINK_RUNS judgements): drop segments, then make fields plain.
 * Sequence offsets are kept: a dropped segment leaves a hole.
 */
static void fz_shrink(struct fz *f, struct fz_seq *q, char *why, size_t cap)
{
	unsigned int runs = 0, i, j, step;
	long long merges;
	struct fz_seq t;
	char sub[320];
	bool progress = true;

	while (progress && runs < FZ_SHRINK_RUNS) {
		progress = false;
		for (i = 0; i < q->n && q->n > 1 && runs < FZ_SHRINK_RUNS; i++) {
			t = *q;
			for (j = i; j + 1 < t.n; j++)
				t.s[j] = t.s[j + 1];
			t.n--;
			runs++;
			if (fz_judge(f, &t, &merges, sub, sizeof(sub)) == FZ_FAIL) {
				*q = t;
				snprintf(why, cap, "%s", sub);
				progress = true;
				i--;
			}
		}
		for (i = 0; i < q->n && runs < FZ_SHRINK_RUNS; i++)
			for (step = 0; step < 6 && runs < FZ_SHRINK_RUNS; step++) {
				t = *q;
				if (!fz_simpler(&t.s[i], step))
					continue;
				runs++;
				if (fz_judge(f, &t, &merges, sub, sizeof(sub)) == FZ_FAIL) {
					*q = t;
					snprintf(why, cap, "%s", sub);
					progress = true;
				}
			}
		if (q->kdata && runs < FZ_SHRINK_RUNS) {
			t = *q;
			t.kdata = false;
			runs++;
			if (fz_judge(f, &t, &merges, sub, sizeof(sub)) == FZ_FAIL) {
				*q = t;
				snprintf(why, cap, "%s", sub);
				progress = true;
			}
		}
	}
}

TEST_F_TIMEOUT(fuzz, random, 900)
{
	static struct fz_seq seqs[64];
	struct fz *f = &self->f;
	unsigned int i, n, na = 0, failed = 0, merging = 0;
	long long merges = 0, total = 0;
	struct timespec start, now;
	char why[320];
	struct fz_seq q;
	int got;

	if (f->na[0])
		SKIP(return, "%s", f->na);
	n = fz_count;
	if (fz_replay) {
		got = fz_read_replay(fz_replay, seqs, ARRAY_SIZE(seqs));
		ASSERT_LT(0, got) TH_LOG("replay file %s unusable", fz_replay);
		n = got;
	}
	if (!f->sysctl)
		diag("no net.ipv4.tcp_backlog_coalesce: each sequence is played held and unheld");
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (i = 0; i < n; i++) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (fz_budget && i && now.tv_sec - start.tv_sec >= (time_t)fz_budget) {
			diag("time budget of %u s spent after %u of %u sequences", fz_budget, i, n);
			n = i;
			break;
		}
		if (fz_replay)
			q = seqs[i];
		else
			fz_generate(fz_seed + i, &q);
		merges = 0;
		switch (fz_judge(f, &q, &merges, why, sizeof(why))) {
		case FZ_PASS:
			total += merges;
			merging += merges > 0;
			break;
		case FZ_NA:
			na++;
			diag("sequence %u (seed %llu) not judged: %s", i, fz_seed + i, why);
			break;
		case FZ_FAIL:
			failed++;
			diag("sequence %u (seed %llu) FAILED: %s", i, fz_seed + i, why);
			fz_print(stdout, "# fuzz: ", &q);
			fz_shrink(f, &q, why, sizeof(why));
			diag("made smaller, it still fails: %s", why);
			fz_print(stdout, "# fuzz: ", &q);
			break;
		}
		if (failed)
			break;
	}
	diag("%u sequences from seed %llu: %u judged, %u not, %u failed",
	     i + (i < n), fz_seed, i + (i < n) - na - failed, na, failed);
	diag("merging on: %lld segments merged, in %u of the judged sequences", total, merging);
	ASSERT_EQ(0U, failed);
	if (na * 2 > n)
		SKIP(return, "inconclusive: %u of %u sequences could not be judged", na, n);
	/* Agreement where nothing merged says nothing about merging. */
	if (!merging)
		SKIP(return, "inconclusive: no segment was merged in any sequence");
}

static int fz_seq_file(const struct dirent *d)
{
	size_t n = strlen(d->d_name);

	return n > 4 && d->d_name[0] != '.' && !strcmp(d->d_name + n - 4, ".seq");
}

/*
 * The sequences that once failed (each a minimal replay file, named
 * for what it caught), played in every run: every one must be judged
 * and pass.
 */
TEST_F_TIMEOUT(fuzz, regressions, 600)
{
	static struct fz_seq seqs[64];
	struct fz *f = &self->f;
	unsigned int seqn = 0, failed = 0, na = 0;
	struct dirent **files;
	char path[512], why[320];
	long long merges;
	int nfiles, i, j, got;

	if (f->na[0])
		SKIP(return, "%s", f->na);
	nfiles = scandir(fz_regressions, &files, fz_seq_file, alphasort);
	ASSERT_LE(0, nfiles) TH_LOG("regression folder %s: %s", fz_regressions, strerror(errno));
	for (i = 0; i < nfiles; i++) {
		snprintf(path, sizeof(path), "%s/%s", fz_regressions, files[i]->d_name);
		got = fz_read_replay(path, seqs, ARRAY_SIZE(seqs));
		EXPECT_LT(0, got) TH_LOG("regression file %s unusable", path);
		for (j = 0; j < got; j++, seqn++) {
			switch (fz_judge(f, &seqs[j], &merges, why, sizeof(why))) {
			case FZ_PASS:
				break;
			case FZ_NA:
				na++;
				diag("%s, sequence %d: not judged: %s", files[i]->d_name, j, why);
				break;
			case FZ_FAIL:
				failed++;
				diag("%s, sequence %d FAILED: %s", files[i]->d_name, j, why);
				fz_print(stdout, "# fuzz: ", &seqs[j]);
				break;
			}
		}
		free(files[i]);
	}
	if (nfiles > 0)
		free(files);
	diag("%u regression sequences in %d files of %s: %u failed, %u not judged",
	     seqn, nfiles, fz_regressions, failed, na);
	ASSERT_LT(0U, seqn) TH_LOG("no regression sequence in %s", fz_regressions);
	ASSERT_EQ(0U, failed);
	/* Not seen is not passed: every regression must be judged. */
	if (na)
		SKIP(return, "inconclusive: %u of %u regression sequences could not be judged",
		     na, seqn);
}

/*
 * A held burst far beyond the backlog's limit (sk_rcvbuf twice, half of
 * sk_sndbuf and 64 KB: 336 KB here), merging on and, with the sysctl,
 * off: whatever merged, the limit must drop part of it
 * (TCPBacklogDrop), and what the application reads must be the stream
 * exactly up to where the kernel acknowledges.
 */
TEST_F_TIMEOUT(fuzz, burst, 300)
{
	struct fz *f = &self->f;
	unsigned long long st = fz_seed;
	struct fz_outcome o;
	struct fz_seq q;
	enum fz_verdict v;
	char why[320];
	int mode;

	if (f->na[0])
		SKIP(return, "%s", f->na);
	memset(&q, 0, sizeof(q));
	q.burst = 4000 + fz_below(&st, 1000);
	q.burst_len = 80 + fz_below(&st, 80);
	for (mode = FZ_ON; mode <= (f->sysctl ? FZ_OFF : FZ_ON); mode++) {
		const char *m = mode == FZ_ON ? "merging on" : "merging off";

		v = fz_play(f, &q, mode, &o, why, sizeof(why));
		if (v == FZ_NA)
			SKIP(return, "inconclusive: %s: %s", m, why);
		ASSERT_TRUE(v == FZ_PASS) TH_LOG("%s: %s", m, why);
		diag("%s: %u segments of %u bytes held: TCPBacklogCoalesce %+lld, TCPBacklogDrop %+lld, %u bytes read",
		     m, q.burst, q.burst_len, o.burst_merged, o.drops, o.got);
		if (mode == FZ_OFF)
			EXPECT_EQ(0, o.burst_merged) TH_LOG("merging off: %lld merges", o.burst_merged);
		EXPECT_LT(0, o.drops)
			TH_LOG("%s: not one of %u held segments dropped: the backlog's limit was not kept",
			       m, q.burst);
		EXPECT_EQ(-1, o.bad) TH_LOG("%s: stream corrupted at offset %ld", m, o.bad);
		EXPECT_EQ(o.acked, (long long)o.got + 1)
			TH_LOG("%s: read %u bytes after the first, the kernel acknowledged to %lld",
			       m, o.got, o.acked);
	}
}

TEST_HARNESS_MAIN
