// SPDX-License-Identifier: GPL-2.0
/*
 * The remote TCP peer of the backlog tests: see backlog_peer.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/if_tun.h>
#include <linux/userfaultfd.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backlog_peer.h"

#define SYSCTL_PATH	"/proc/sys/net/ipv4/tcp_backlog_coalesce"

/* 2001:2::/48 is the IPv6 benchmarking range (RFC 5180). */
const uint8_t peer_local6[16] = { 0x20, 0x01, 0, 0x02, [15] = 1 };
const uint8_t peer_remote6[16] = { 0x20, 0x01, 0, 0x02, [15] = 2 };
static const uint8_t peer_mac[6] = { 0x02, 0x6b, 0x67, 0x00, 0x00, 0x02 };

void diag(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

uint8_t stream_byte(uint32_t off)
{
	return (uint8_t)(off * 131u + 7u + (off >> 8));
}

void now(struct timespec *ts)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
}

static void add_ms(struct timespec *ts, int ms)
{
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

void deadline_in(struct timespec *ts, int ms)
{
	now(ts);
	add_ms(ts, ms);
}

int ms_left(const struct timespec *deadline)
{
	struct timespec t;
	long long ms;

	now(&t);
	ms = (long long)(deadline->tv_sec - t.tv_sec) * 1000 +
	     (deadline->tv_nsec - t.tv_nsec) / 1000000;
	return ms < 0 ? 0 : (int)ms;
}

double elapsed_us(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) * 1e6 +
	       (double)(b->tv_nsec - a->tv_nsec) / 1e3;
}

bool peer_retry(struct timespec *dl)
{
	if (!dl->tv_sec && !dl->tv_nsec) {
		deadline_in(dl, PEER_RETRY_MS);
		return true;
	}
	if (ms_left(dl))
		return true;
	errno = ETIMEDOUT;
	return false;
}

int peer_join(pthread_t thread, int ms)
{
	struct timespec ts;

	/* pthread_timedjoin_np() takes a CLOCK_REALTIME time. */
	clock_gettime(CLOCK_REALTIME, &ts);
	add_ms(&ts, ms);
	return pthread_timedjoin_np(thread, NULL, &ts);
}

int write_file(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, val, strlen(val));
	close(fd);
	return n == (ssize_t)strlen(val) ? 0 : -1;
}

static int if_up(int s, const char *name)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
	if (ioctl(s, SIOCGIFFLAGS, &ifr))
		return -1;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	return ioctl(s, SIOCSIFFLAGS, &ifr);
}

int peer_netns(void)
{
	int s, rc;

	if (unshare(CLONE_NEWNET))
		return -1;
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	rc = if_up(s, "lo");
	close(s);
	return rc;
}

bool has_sysctl(void)
{
	return access(SYSCTL_PATH, W_OK) == 0;
}

int set_coalesce(int on)
{
	return write_file(SYSCTL_PATH, on ? "1" : "0");
}

/* The in6_ifreq of <linux/ipv6.h>, which clashes with glibc's headers. */
struct kg_in6_ifreq {
	struct in6_addr addr;
	uint32_t prefixlen;
	int ifindex;
};

static int dev_addr6(const char *name, char *why, size_t cap)
{
	struct kg_in6_ifreq req;
	char path[96];
	int s, rc;

	/* No DAD: the address is usable at once. No solicitations. */
	snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/accept_dad", name);
	if (write_file(path, "0")) {
		snprintf(why, cap, "no IPv6 on %s (a kernel without IPv6?)", name);
		return -1;
	}
	snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/router_solicitations", name);
	write_file(path, "0");
	s = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0) {
		snprintf(why, cap, "AF_INET6 socket: %s", strerror(errno));
		return -1;
	}
	memset(&req, 0, sizeof(req));
	memcpy(&req.addr, peer_local6, 16);
	req.prefixlen = 64;
	req.ifindex = (int)if_nametoindex(name);
	rc = ioctl(s, SIOCSIFADDR, &req);
	if (rc)
		snprintf(why, cap, "IPv6 address on %s: %s", name, strerror(errno));
	close(s);
	return rc;
}

static int dev_neigh4(int s, const char *name)
{
	struct sockaddr_in *sin;
	struct arpreq arp;

	/* A permanent neighbour: the peer need not answer ARP. */
	memset(&arp, 0, sizeof(arp));
	sin = (struct sockaddr_in *)&arp.arp_pa;
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(PEER_REMOTE4);
	arp.arp_ha.sa_family = ARPHRD_ETHER;
	memcpy(arp.arp_ha.sa_data, peer_mac, 6);
	arp.arp_flags = ATF_COM | ATF_PERM;
	strncpy(arp.arp_dev, name, sizeof(arp.arp_dev) - 1);
	return ioctl(s, SIOCSARP, &arp);
}

int peer_dev_open(struct peer_dev *d, const char *name, bool tap, bool v6,
		  char *why, size_t cap)
{
	struct sockaddr_in *sin;
	struct ifreq ifr;
	const char *step;
	int s = -1;

	memset(d, 0, sizeof(*d));
	d->tap = tap;
	/* Without IPv6 on the device, no solicitations among the replies. */
	if (!v6)
		write_file("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1");
	step = "open /dev/net/tun";
	d->fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	if (d->fd < 0)
		goto err;
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = (tap ? IFF_TAP : IFF_TUN) | IFF_NO_PI;
	strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
	step = "TUNSETIFF";
	if (ioctl(d->fd, TUNSETIFF, &ifr))
		goto err;
	/* Non-blocking writes are what make tap build page-fragment skbs. */
	step = "O_NONBLOCK";
	if (fcntl(d->fd, F_SETFL, O_NONBLOCK))
		goto err;

	step = "socket";
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		goto err;
	memset(&ifr, 0, sizeof(ifr));
	strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
	step = "SIOCGIFHWADDR";
	if (tap && ioctl(s, SIOCGIFHWADDR, &ifr))
		goto err;
	memcpy(d->mac, ifr.ifr_hwaddr.sa_data, 6);
	sin = (struct sockaddr_in *)&ifr.ifr_addr;
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(PEER_LOCAL4);
	step = "SIOCSIFADDR";
	if (ioctl(s, SIOCSIFADDR, &ifr))
		goto err;
	sin->sin_addr.s_addr = htonl(0xffffff00u);
	step = "SIOCSIFNETMASK";
	if (ioctl(s, SIOCSIFNETMASK, &ifr))
		goto err;
	/* Room for every reply of a full window: none is lost on the way. */
	ifr.ifr_qlen = 16384;
	step = "SIOCSIFTXQLEN";
	if (ioctl(s, SIOCSIFTXQLEN, &ifr))
		goto err;
	if (v6 && dev_addr6(name, why, cap))
		goto out;
	d->v6 = v6;
	step = "link up";
	if (if_up(s, name))
		goto err;
	step = "neighbour entry";
	if (tap && dev_neigh4(s, name))
		goto err;
	close(s);
	return 0;
err:
	snprintf(why, cap, "%s %s: %s", tap ? "tap" : "tun", step, strerror(errno));
out:
	if (s >= 0)
		close(s);
	peer_dev_close(d);
	return -1;
}

void peer_dev_close(struct peer_dev *d)
{
	if (d->fd >= 0)
		close(d->fd);
	d->fd = -1;
}

int peer_dev_write(struct peer_dev *d, const uint8_t *pkt, size_t len)
{
	uint8_t frame[PEER_ETH_HLEN + PEER_FRAME_MAX];
	struct timespec dl = { 0, 0 };
	const uint8_t *p = pkt;
	int fd = d->fd;
	size_t n = len;
	ssize_t w;

	if (d->tap) {
		if (len > PEER_FRAME_MAX) {
			errno = EMSGSIZE;
			return -1;
		}
		memcpy(frame, d->mac, 6);
		memcpy(frame + 6, peer_mac, 6);
		pkt_put16(frame + 12, (pkt[0] >> 4) == 6 ? ETH_P_IPV6 : ETH_P_IP);
		memcpy(frame + PEER_ETH_HLEN, pkt, len);
		p = frame;
		n = len + PEER_ETH_HLEN;
	}
	for (;;) {
		w = write(fd, p, n);
		if (w == (ssize_t)n && n == len + (d->tap ? PEER_ETH_HLEN : 0))
			return 0;
		if (w >= 0) {
			errno = EIO;	/* a short write: the packet is not whole */
			return -1;
		}
		if ((errno != EAGAIN && errno != EINTR) || !peer_retry(&dl))
			return -1;
	}
}

ssize_t peer_dev_read(struct peer_dev *d, uint8_t *buf, size_t cap, int ms)
{
	uint8_t frame[PEER_ETH_HLEN + PEER_FRAME_MAX];
	struct pollfd pfd = { .fd = d->fd, .events = POLLIN };
	struct timespec dl;
	ssize_t n;

	deadline_in(&dl, ms);
	for (;;) {
		n = read(d->fd, frame, sizeof(frame));
		if (n > 0 && d->tap) {
			/* Else not IP, or too big for us: skipped. */
			if (n > PEER_ETH_HLEN && (size_t)(n - PEER_ETH_HLEN) <= cap) {
				n -= PEER_ETH_HLEN;
				memcpy(buf, frame + PEER_ETH_HLEN, (size_t)n);
				return n;
			}
		} else if (n > 0) {
			if ((size_t)n <= cap) {
				memcpy(buf, frame, (size_t)n);
				return n;
			}
		} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
			return -1;
		}
		/* After a skipped frame too: such frames may keep coming. */
		if (!ms_left(&dl))
			return 0;
		if (n <= 0 && poll(&pfd, 1, ms_left(&dl)) < 0 && errno != EINTR)
			return -1;
	}
}

int peer_listen(bool v6, uint16_t port, int rcvbuf)
{
	struct sockaddr_in6 sin6 = {
		.sin6_family = AF_INET6,
		.sin6_port = htons(port),
	};
	struct sockaddr_in sin = {
		.sin_family = AF_INET,
		.sin_port = htons(port),
		.sin_addr.s_addr = htonl(PEER_LOCAL4),
	};
	struct timespec dl;
	int one = 1, fd;

	fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/*
	 * Before listen(): the accepted socket inherits it, and the window
	 * scale of the SYN-ACK is chosen from it. FORCE: past
	 * net.core.rmem_max, we are root.
	 */
	if (rcvbuf && setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)) &&
	    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)))
		goto err;
	if (v6) {
		memcpy(&sin6.sin6_addr, peer_local6, 16);
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
		/*
		 * Even without DAD the address stays tentative until a
		 * workqueue runs after the link came up: bind() says
		 * EADDRNOTAVAIL until then.
		 */
		deadline_in(&dl, 3000);
		while (bind(fd, (struct sockaddr *)&sin6, sizeof(sin6))) {
			if (errno != EADDRNOTAVAIL || !ms_left(&dl))
				goto err;
			usleep(10000);
		}
	} else if (bind(fd, (struct sockaddr *)&sin, sizeof(sin))) {
		goto err;
	}
	if (listen(fd, 16))
		goto err;
	return fd;
err:
	close(fd);
	return -1;
}

static void conn_fill(struct peer_conn *c, struct pkt_tcp *s)
{
	s->v6 = c->v6;
	if (s->v6) {
		memcpy(s->saddr6, peer_remote6, 16);
		memcpy(s->daddr6, peer_local6, 16);
	} else {
		s->saddr = PEER_REMOTE4;
		s->daddr = PEER_LOCAL4;
	}
	s->sport = c->pport;
	s->dport = c->lport;
	s->ip_id = c->dev->ip_id++;
}

int peer_conn_send(struct peer_conn *c, struct pkt_tcp *s, bool corrupt)
{
	uint8_t buf[PEER_FRAME_MAX];
	size_t n;

	conn_fill(c, s);
	if (!s->ack && (s->flags & PKT_ACK))
		s->ack = c->ack;
	n = pkt_build(buf, sizeof(buf), s);
	if (!n) {
		errno = EMSGSIZE;
		return -1;
	}
	if (corrupt && s->len)
		buf[n - 1] ^= 0x5a;	/* the checksum no longer matches */
	return peer_dev_write(c->dev, buf, n);
}

static bool conn_ours(const struct peer_conn *c, const struct pkt_tcp *s)
{
	if (s->v6 != c->v6 || s->sport != c->lport || s->dport != c->pport)
		return false;
	if (s->v6)
		return !memcmp(s->saddr6, peer_local6, 16) &&
		       !memcmp(s->daddr6, peer_remote6, 16);
	return s->saddr == PEER_LOCAL4 && s->daddr == PEER_REMOTE4;
}

/* What the kernel's segment s on c says: ACKs move last_ack, data snd_nxt. */
static void conn_account(struct peer_conn *c, const struct pkt_tcp *s)
{
	uint32_t end;

	if ((s->flags & PKT_ACK) &&
	    (!c->acked_any || (int32_t)(s->ack - c->last_ack) > 0)) {
		c->last_ack = s->ack;
		c->acked_any = true;
	}
	end = s->seq + (uint32_t)s->len + !!(s->flags & (PKT_SYN | PKT_FIN));
	if ((int32_t)(end - c->snd_nxt) > 0)
		c->snd_nxt = end;
}

int peer_conn_recv(struct peer_conn *c, struct pkt_tcp *s, uint8_t *buf,
		   size_t cap, int ms)
{
	struct timespec dl;
	ssize_t n;

	deadline_in(&dl, ms);
	for (;;) {
		n = peer_dev_read(c->dev, buf, cap, ms_left(&dl));
		if (n <= 0)
			return (int)n;
		if (!pkt_parse(buf, (size_t)n, s) && conn_ours(c, s)) {
			conn_account(c, s);
			return 1;
		}
		/* Another flow's: however many come, the deadline holds. */
		if (!ms_left(&dl))
			return 0;
	}
}

int peer_conn_barrier(struct peer_conn *c, int ms)
{
	/* A new one each time: a late RST of an earlier barrier never matches. */
	static uint32_t seq = 0x5eed0000u;
	struct pkt_tcp syn = { .flags = PKT_SYN };
	struct peer_conn b = *c;
	struct pkt_tcp s;
	uint8_t buf[PEER_FRAME_MAX];
	struct timespec dl;
	ssize_t n;

	b.lport = PEER_BARRIER_LPORT;
	b.pport = PEER_BARRIER_PPORT;
	syn.seq = ++seq;
	syn.window = c->window;
	if (peer_conn_send(&b, &syn, false))
		return -1;
	deadline_in(&dl, ms);
	for (;;) {
		n = peer_dev_read(c->dev, buf, sizeof(buf), ms_left(&dl));
		if (n <= 0)
			return (int)n;
		if (!pkt_parse(buf, (size_t)n, &s)) {
			if (conn_ours(c, &s))
				conn_account(c, &s);
			else if (conn_ours(&b, &s) && (s.flags & PKT_RST) &&
				 (s.flags & PKT_ACK) && s.ack == seq + 1)
				return 1;
		}
		if (!ms_left(&dl))
			return 0;
	}
}

bool peer_barrier_sound(char *why, size_t cap)
{
	char mask[256];
	size_t i, n;
	FILE *f;

	/* Linux 6.2+: an RPS map for every new device. */
	f = fopen("/proc/sys/net/core/rps_default_mask", "re");
	if (!f)
		return true;
	n = fread(mask, 1, sizeof(mask) - 1, f);
	fclose(f);
	mask[n] = 0;
	for (i = 0; i < n; i++)
		if (mask[i] != '0' && mask[i] != ',' && mask[i] != '\n') {
			snprintf(why, cap,
				 "inconclusive: net.core.rps_default_mask=%.*s gives the device an RPS map: the barrier is unsound",
				 (int)strcspn(mask, "\n"), mask);
			return false;
		}
	return true;
}

void peer_conn_drain(struct peer_conn *c, int ms)
{
	uint8_t buf[PEER_FRAME_MAX];
	struct timespec dl;
	struct pkt_tcp s;
	int left;

	deadline_in(&dl, PEER_DRAIN_MS);
	do {
		left = ms_left(&dl);
	} while (left && peer_conn_recv(c, &s, buf, sizeof(buf), ms < left ? ms : left) == 1);
}

int peer_conn_open(struct peer_conn *c, struct peer_dev *d, int lfd, bool v6,
		   uint16_t lport, uint16_t pport, const uint8_t *synopt,
		   size_t optlen, int ms, char *why, size_t cap)
{
	struct pollfd pfd = { .fd = lfd, .events = POLLIN };
	struct pkt_tcp syn = { .flags = PKT_SYN, .opt = synopt, .optlen = optlen };
	struct pkt_tcp ack = { .flags = PKT_ACK };
	uint8_t buf[PEER_FRAME_MAX];
	struct timespec dl;
	struct pkt_tcp s;
	size_t i;

	c->dev = d;
	c->v6 = v6;
	c->lport = lport;
	c->pport = pport;
	c->fd = -1;
	c->acked_any = false;
	c->iss = 0x10000000u + ((uint32_t)pport << 12);
	deadline_in(&dl, ms);
	syn.seq = c->iss;
	syn.window = c->window;
	if (peer_conn_send(c, &syn, false)) {
		snprintf(why, cap, "writing the SYN: %s", strerror(errno));
		return -1;
	}
	for (;;) {
		if (peer_conn_recv(c, &s, buf, sizeof(buf), ms_left(&dl)) != 1) {
			snprintf(why, cap, "no SYN-ACK from the kernel");
			return -1;
		}
		if ((s.flags & (PKT_SYN | PKT_ACK)) == (PKT_SYN | PKT_ACK) &&
		    s.ack == c->iss + 1)
			break;
		if (!ms_left(&dl)) {
			snprintf(why, cap, "no SYN-ACK from the kernel");
			return -1;
		}
	}
	c->irs = s.seq;
	c->ack = s.seq + 1;
	c->snd_nxt = s.seq + 1;
	c->wscale = 0;
	for (i = 0; i + 2 < s.optlen && s.opt[i]; i += s.opt[i] == 1 ? 1 : s.opt[i + 1]) {
		if (s.opt[i] != 1 && s.opt[i + 1] < 2)
			break;
		if (s.opt[i] == 3 && s.opt[i + 1] == 3)
			c->wscale = s.opt[i + 2] > 14 ? 14 : s.opt[i + 2];
	}
	ack.seq = c->iss + 1;
	ack.window = c->window;
	if (peer_conn_send(c, &ack, false)) {
		snprintf(why, cap, "writing the ACK: %s", strerror(errno));
		return -1;
	}
	for (;;) {
		c->fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (c->fd >= 0)
			return 0;
		if (errno != EAGAIN || !ms_left(&dl) ||
		    poll(&pfd, 1, ms_left(&dl)) < 0) {
			snprintf(why, cap, "accept: %s", strerror(errno));
			return -1;
		}
	}
}

void peer_conn_close(struct peer_conn *c)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	if (c->fd >= 0) {
		/* RST now: nothing of this connection lingers. */
		setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		close(c->fd);
		c->fd = -1;
	}
}

const char * const nstat_names[NS_COUNT] = {
	[NS_COALESCE] = "TCPBacklogCoalesce",
	[NS_BACKLOGDROP] = "TCPBacklogDrop",
	[NS_HPHITS] = "TCPHPHits",
	[NS_SYNCHALLENGE] = "TCPSYNChallenge",
	[NS_CSUMERRORS] = "InCsumErrors",
};

/* The "<prefix>:" header and value line pairs of one /proc file. */
static int nstat_file(const char *path, const char *prefix, struct nstat *n,
		      unsigned int *found)
{
	char names[8192], values[8192];
	size_t plen = strlen(prefix);
	char *k, *v, *sk, *sv;
	FILE *f;
	int i;

	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(names, sizeof(names), f)) {
		if (!fgets(values, sizeof(values), f))
			break;
		if (strncmp(names, prefix, plen) || strncmp(values, prefix, plen))
			continue;
		k = strtok_r(names + plen, "\n ", &sk);
		v = strtok_r(values + plen, "\n ", &sv);
		for (; k && v; k = strtok_r(NULL, "\n ", &sk), v = strtok_r(NULL, "\n ", &sv))
			for (i = 0; i < NS_COUNT; i++)
				if (!strcmp(k, nstat_names[i])) {
					n->v[i] = atoll(v);
					*found |= 1u << i;
				}
	}
	fclose(f);
	return 0;
}

int nstat_read(struct nstat *n)
{
	unsigned int found = 0;

	memset(n, 0, sizeof(*n));
	if (nstat_file("/proc/net/netstat", "TcpExt:", n, &found) ||
	    nstat_file("/proc/net/snmp", "Tcp:", n, &found))
		return -1;
	return found == (1u << NS_COUNT) - 1 ? 0 : -1;
}

int uffd_open(struct uffd_hold *h)
{
	struct uffdio_api api = { .api = UFFD_API };
	int dev;

	h->page = NULL;
	h->fd = -1;
	/*
	 * UFFDIO_COPY copies whole pages: the zeros are a page of the
	 * kernel's size (64 KiB on some arm64 and ppc64), never a buffer
	 * of a size guessed here.
	 */
	h->pagesz = sysconf(_SC_PAGESIZE);
	if (h->pagesz <= 0) {
		h->zero = NULL;
		errno = EINVAL;
		return -1;
	}
	h->zero = mmap(NULL, h->pagesz, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (h->zero == MAP_FAILED) {
		h->zero = NULL;
		return -1;
	}
	h->fd = (int)syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (h->fd < 0) {
		/* Without CAP_SYS_PTRACE: the 6.1+ device node. */
		dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
		if (dev < 0)
			return -1;
		h->fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
		close(dev);
		if (h->fd < 0)
			return -1;
	}
	return ioctl(h->fd, UFFDIO_API, &api);
}

void uffd_close(struct uffd_hold *h)
{
	if (h->page)
		munmap(h->page, h->pagesz);
	h->page = NULL;
	if (h->zero)
		munmap(h->zero, h->pagesz);
	h->zero = NULL;
	if (h->fd >= 0)
		close(h->fd);
	h->fd = -1;
}

/*
 * A new mapping rather than MADV_DONTNEED on the old one: tiny kernels
 * are often built without madvise().
 */
int uffd_arm(struct uffd_hold *h)
{
	struct uffdio_register reg;

	if (h->page && munmap(h->page, h->pagesz))
		return -1;
	h->page = mmap(NULL, h->pagesz, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (h->page == MAP_FAILED) {
		h->page = NULL;
		return -1;
	}
	memset(&reg, 0, sizeof(reg));
	reg.range.start = (unsigned long)h->page;
	reg.range.len = h->pagesz;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING;
	return ioctl(h->fd, UFFDIO_REGISTER, &reg);
}

int uffd_wait(struct uffd_hold *h, int ms)
{
	struct pollfd pfd = { .fd = h->fd, .events = POLLIN };
	struct uffd_msg msg;
	struct timespec dl;
	ssize_t n;

	deadline_in(&dl, ms);
	for (;;) {
		n = read(h->fd, &msg, sizeof(msg));
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

int uffd_resolve(struct uffd_hold *h)
{
	struct uffdio_copy cp = {
		.dst = (unsigned long)h->page,
		.src = (unsigned long)h->zero,
		.len = (unsigned long)h->pagesz,
	};

	if (!h->page || !h->zero) {
		errno = EINVAL;
		return -1;
	}
	if (ioctl(h->fd, UFFDIO_COPY, &cp) && errno != EEXIST) {
		diag("UFFDIO_COPY: %s", strerror(errno));
		return -1;
	}
	return 0;
}

int uffd_join(struct uffd_hold *h, pthread_t thread, int ms)
{
	if (!peer_join(thread, ms))
		return 0;
	/* Unmapped and closed, the page fails the fault: the thread returns. */
	uffd_close(h);
	peer_join(thread, ms);
	errno = ETIMEDOUT;
	return -1;
}

size_t peer_dev_hdr(const struct peer_dev *d, uint8_t *buf, uint16_t proto)
{
	if (!d->tap)
		return 0;
	memcpy(buf, d->mac, 6);
	memcpy(buf + 6, peer_mac, 6);
	pkt_put16(buf + 12, proto);
	return PEER_ETH_HLEN;
}
