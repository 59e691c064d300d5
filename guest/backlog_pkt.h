/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Minimal IPv4/TCP segment crafting and parsing for the backlog tests.
 *
 * Every on-the-wire field is written and read byte by byte in network
 * order, so the same code is right on big- and little-endian guests.
 * Addresses and ports are host-order integers in the API.
 */
#ifndef BACKLOG_PKT_H
#define BACKLOG_PKT_H

#include <stddef.h>
#include <stdint.h>

#define PKT_FIN 0x01
#define PKT_SYN 0x02
#define PKT_RST 0x04
#define PKT_PSH 0x08
#define PKT_ACK 0x10
#define PKT_URG 0x20
#define PKT_ECE 0x40
#define PKT_CWR 0x80

#define PKT_IPV4_HLEN 20
#define PKT_IPV6_HLEN 40
#define PKT_TCP_HLEN 20
#define PKT_MAX_OPT 40

struct pkt_tcp {
	int v6;			/* 0: IPv4 (saddr/daddr), 1: IPv6 (saddr6/daddr6) */
	uint32_t saddr;		/* host order */
	uint32_t daddr;		/* host order */
	uint8_t saddr6[16];	/* network order, as on the wire */
	uint8_t daddr6[16];
	uint16_t sport;
	uint16_t dport;
	uint32_t seq;
	uint32_t ack;
	uint8_t flags;		/* PKT_* */
	uint16_t window;
	uint16_t urg_ptr;
	uint8_t tos;		/* IPv4 TOS or IPv6 traffic class */
	uint8_t ttl;		/* IPv4 TTL or IPv6 hop limit */
	uint16_t ip_id;
	const uint8_t *opt;	/* TCP options, a multiple of 4 bytes */
	size_t optlen;
	const uint8_t *data;
	size_t len;
};

void pkt_put16(uint8_t *p, uint16_t v);
void pkt_put32(uint8_t *p, uint32_t v);
uint16_t pkt_get16(const uint8_t *p);
uint32_t pkt_get32(const uint8_t *p);

/* The unfolded sum of buf as big-endian 16-bit words (odd end padded). */
uint32_t pkt_sum(const uint8_t *buf, size_t len);

/* Internet checksum (RFC 1071) of buf, folded with an initial sum. */
uint16_t pkt_csum(const uint8_t *buf, size_t len, uint32_t sum);

/* Sum of the IPv4 pseudo header, for pkt_csum()'s initial sum. */
uint32_t pkt_pseudo4(uint32_t saddr, uint32_t daddr, uint8_t proto,
		     uint16_t len);

/*
 * Write an IPv4 packet carrying the TCP segment s into buf, with both
 * checksums filled in. Returns its length, or 0 if it does not fit or
 * the options are malformed.
 */
size_t pkt_build4(uint8_t *buf, size_t cap, const struct pkt_tcp *s);

/*
 * As pkt_build4(), but only the headers, for sending the s->len data
 * bytes from where they are (writev()): the checksum takes data_sum,
 * pkt_sum(s->data, s->len), as the data's part. Returns the header
 * length, or 0.
 */
size_t pkt_build4_hdr(uint8_t *buf, size_t cap, const struct pkt_tcp *s,
		      uint32_t data_sum);

/* Sum of the IPv6 pseudo header, for pkt_csum()'s initial sum. */
uint32_t pkt_pseudo6(const uint8_t *saddr, const uint8_t *daddr,
		     uint8_t proto, uint32_t len);

/* As pkt_build4(), for an IPv6 packet (no extension headers). */
size_t pkt_build6(uint8_t *buf, size_t cap, const struct pkt_tcp *s);

/* pkt_build4() or pkt_build6(), as s->v6 says. */
size_t pkt_build(uint8_t *buf, size_t cap, const struct pkt_tcp *s);

/*
 * Parse an IPv6 packet whose next header is TCP (no extension headers),
 * with a valid TCP checksum. Returns 0 and fills s, or -1.
 */
int pkt_parse6(const uint8_t *buf, size_t len, struct pkt_tcp *s);

/* pkt_parse4() or pkt_parse6(), by the version nibble. */
int pkt_parse(const uint8_t *buf, size_t len, struct pkt_tcp *s);

/*
 * Parse an IPv4/TCP packet. Returns 0 and fills s (data and opt point
 * into buf) when buf holds a whole IPv4 TCP segment with valid
 * checksums; -1 otherwise.
 */
int pkt_parse4(const uint8_t *buf, size_t len, struct pkt_tcp *s);

/* "198.18.0.1" style text for a host-order address; buf >= 16 bytes. */
const char *pkt_addr4(uint32_t addr, char *buf);

#endif /* BACKLOG_PKT_H */
