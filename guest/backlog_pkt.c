// SPDX-License-Identifier: GPL-2.0
/*
 * Minimal IPv4/TCP segment crafting and parsing for the backlog tests.
 */
#include <stdio.h>
#include <string.h>

#include "backlog_pkt.h"

void pkt_put16(uint8_t *p, uint16_t v)
{
	p[0] = v >> 8;
	p[1] = v;
}

void pkt_put32(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

uint16_t pkt_get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

uint32_t pkt_get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

uint32_t pkt_sum(const uint8_t *buf, size_t len)
{
	uint32_t sum = 0;
	size_t i;

	for (i = 0; i + 1 < len; i += 2)
		sum += pkt_get16(buf + i);
	if (len & 1)
		sum += (uint32_t)buf[len - 1] << 8;
	return sum;
}

uint16_t pkt_csum(const uint8_t *buf, size_t len, uint32_t sum)
{
	sum += pkt_sum(buf, len);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

uint32_t pkt_pseudo4(uint32_t saddr, uint32_t daddr, uint8_t proto,
		     uint16_t len)
{
	return (saddr >> 16) + (saddr & 0xffff) +
	       (daddr >> 16) + (daddr & 0xffff) + proto + len;
}

/*
 * Write the TCP header, options and (unless data_sum is given) data at
 * th; checksum from sum, plus data_sum for data that is not copied.
 */
static void put_tcp(uint8_t *th, const struct pkt_tcp *s, uint32_t sum,
		    const uint32_t *data_sum)
{
	size_t thlen = PKT_TCP_HLEN + s->optlen;

	memset(th, 0, thlen);
	pkt_put16(th + 0, s->sport);
	pkt_put16(th + 2, s->dport);
	pkt_put32(th + 4, s->seq);
	pkt_put32(th + 8, s->ack);
	th[12] = (uint8_t)((thlen / 4) << 4);
	th[13] = s->flags;
	pkt_put16(th + 14, s->window);
	pkt_put16(th + 18, s->urg_ptr);
	if (s->optlen)
		memcpy(th + PKT_TCP_HLEN, s->opt, s->optlen);
	if (data_sum) {
		pkt_put16(th + 16, pkt_csum(th, thlen, sum + *data_sum));
		return;
	}
	if (s->len)
		memcpy(th + thlen, s->data, s->len);
	pkt_put16(th + 16, pkt_csum(th, thlen + s->len, sum));
}

/* Read the TCP header at th (len bytes of segment) into s. */
static int get_tcp(const uint8_t *th, size_t len, struct pkt_tcp *s)
{
	size_t thlen;

	if (len < PKT_TCP_HLEN)
		return -1;
	thlen = (size_t)(th[12] >> 4) * 4;
	if (thlen < PKT_TCP_HLEN || thlen > len)
		return -1;
	s->sport = pkt_get16(th);
	s->dport = pkt_get16(th + 2);
	s->seq = pkt_get32(th + 4);
	s->ack = pkt_get32(th + 8);
	s->flags = th[13];
	s->window = pkt_get16(th + 14);
	s->urg_ptr = pkt_get16(th + 18);
	s->opt = th + PKT_TCP_HLEN;
	s->optlen = thlen - PKT_TCP_HLEN;
	s->data = th + thlen;
	s->len = len - thlen;
	return 0;
}

static size_t build4(uint8_t *buf, size_t cap, const struct pkt_tcp *s,
		     const uint32_t *data_sum)
{
	size_t thlen = PKT_TCP_HLEN + s->optlen;
	size_t tot = PKT_IPV4_HLEN + thlen + s->len;
	uint8_t *ip = buf, *th = buf + PKT_IPV4_HLEN;

	if (s->optlen % 4 || s->optlen > PKT_MAX_OPT || tot > 0xffff ||
	    (data_sum ? tot - s->len : tot) > cap)
		return 0;

	memset(buf, 0, PKT_IPV4_HLEN);
	ip[0] = 0x45;			/* version 4, IHL 5 */
	ip[1] = s->tos;
	pkt_put16(ip + 2, (uint16_t)tot);
	pkt_put16(ip + 4, s->ip_id);
	pkt_put16(ip + 6, 0x4000);	/* DF */
	ip[8] = s->ttl ? s->ttl : 64;
	ip[9] = 6;			/* TCP */
	pkt_put32(ip + 12, s->saddr);
	pkt_put32(ip + 16, s->daddr);
	pkt_put16(ip + 10, pkt_csum(ip, PKT_IPV4_HLEN, 0));
	put_tcp(th, s, pkt_pseudo4(s->saddr, s->daddr, 6,
				   (uint16_t)(thlen + s->len)), data_sum);
	return data_sum ? tot - s->len : tot;
}

size_t pkt_build4(uint8_t *buf, size_t cap, const struct pkt_tcp *s)
{
	return build4(buf, cap, s, NULL);
}

size_t pkt_build4_hdr(uint8_t *buf, size_t cap, const struct pkt_tcp *s,
		      uint32_t data_sum)
{
	return build4(buf, cap, s, &data_sum);
}

uint32_t pkt_pseudo6(const uint8_t *saddr, const uint8_t *daddr,
		     uint8_t proto, uint32_t len)
{
	uint32_t sum = (len >> 16) + (len & 0xffff) + proto;
	int i;

	for (i = 0; i < 16; i += 2)
		sum += pkt_get16(saddr + i) + pkt_get16(daddr + i);
	return sum;
}

size_t pkt_build6(uint8_t *buf, size_t cap, const struct pkt_tcp *s)
{
	size_t thlen = PKT_TCP_HLEN + s->optlen;
	size_t plen = thlen + s->len;
	uint8_t *ip = buf, *th = buf + PKT_IPV6_HLEN;

	if (s->optlen % 4 || s->optlen > PKT_MAX_OPT ||
	    PKT_IPV6_HLEN + plen > cap || plen > 0xffff)
		return 0;

	memset(buf, 0, PKT_IPV6_HLEN);
	ip[0] = (uint8_t)(0x60 | s->tos >> 4);	/* version 6, class */
	ip[1] = (uint8_t)(s->tos << 4);
	pkt_put16(ip + 4, (uint16_t)plen);
	ip[6] = 6;				/* next header: TCP */
	ip[7] = s->ttl ? s->ttl : 64;
	memcpy(ip + 8, s->saddr6, 16);
	memcpy(ip + 24, s->daddr6, 16);
	put_tcp(th, s, pkt_pseudo6(s->saddr6, s->daddr6, 6, (uint32_t)plen), NULL);
	return PKT_IPV6_HLEN + plen;
}

size_t pkt_build(uint8_t *buf, size_t cap, const struct pkt_tcp *s)
{
	return s->v6 ? pkt_build6(buf, cap, s) : pkt_build4(buf, cap, s);
}

int pkt_parse4(const uint8_t *buf, size_t len, struct pkt_tcp *s)
{
	size_t ihl, tot;

	if (len < PKT_IPV4_HLEN || buf[0] >> 4 != 4)
		return -1;
	ihl = (size_t)(buf[0] & 0x0f) * 4;
	tot = pkt_get16(buf + 2);
	if (ihl < PKT_IPV4_HLEN || tot > len || tot < ihl + PKT_TCP_HLEN ||
	    buf[9] != 6 || pkt_csum(buf, ihl, 0) != 0)
		return -1;
	if (pkt_get16(buf + 6) & 0x3fff)	/* fragments: not ours */
		return -1;

	memset(s, 0, sizeof(*s));
	s->tos = buf[1];
	s->ip_id = pkt_get16(buf + 4);
	s->ttl = buf[8];
	s->saddr = pkt_get32(buf + 12);
	s->daddr = pkt_get32(buf + 16);
	if (pkt_csum(buf + ihl, tot - ihl,
		     pkt_pseudo4(s->saddr, s->daddr, 6,
				 (uint16_t)(tot - ihl))) != 0)
		return -1;
	return get_tcp(buf + ihl, tot - ihl, s);
}

int pkt_parse6(const uint8_t *buf, size_t len, struct pkt_tcp *s)
{
	size_t plen;

	if (len < PKT_IPV6_HLEN || buf[0] >> 4 != 6 || buf[6] != 6)
		return -1;
	plen = pkt_get16(buf + 4);
	if (PKT_IPV6_HLEN + plen > len)
		return -1;

	memset(s, 0, sizeof(*s));
	s->v6 = 1;
	s->tos = (uint8_t)((buf[0] & 0x0f) << 4 | buf[1] >> 4);
	s->ttl = buf[7];
	memcpy(s->saddr6, buf + 8, 16);
	memcpy(s->daddr6, buf + 24, 16);
	if (pkt_csum(buf + PKT_IPV6_HLEN, plen,
		     pkt_pseudo6(s->saddr6, s->daddr6, 6, (uint32_t)plen)) != 0)
		return -1;
	return get_tcp(buf + PKT_IPV6_HLEN, plen, s);
}

int pkt_parse(const uint8_t *buf, size_t len, struct pkt_tcp *s)
{
	if (len && buf[0] >> 4 == 6)
		return pkt_parse6(buf, len, s);
	return pkt_parse4(buf, len, s);
}

const char *pkt_addr4(uint32_t addr, char *buf)
{
	snprintf(buf, 16, "%u.%u.%u.%u", addr >> 24, (addr >> 16) & 0xff,
		 (addr >> 8) & 0xff, addr & 0xff);
	return buf;
}
