// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of backlog_pkt.c: checksums, byte order and layout, options, and
 * rejection of damaged packets. KTAP output; runs natively and in a
 * guest (the layout checks are byte by byte, so they hold on either
 * byte order).
 */
#include <stdio.h>
#include <string.h>

#include "backlog_pkt.h"

static int num, failed;

static void check(int cond, const char *name)
{
	num++;
	if (!cond)
		failed++;
	printf("%sok %d %s\n", cond ? "" : "not ", num, name);
}

/* RFC 1071 section 3 example: the one's complement sum is 0xddf2. */
static void test_csum_rfc1071(void)
{
	static const uint8_t b[] = { 0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7 };

	check(pkt_csum(b, sizeof(b), 0) == (uint16_t)~0xddf2, "csum_rfc1071");
}

static void test_csum_odd(void)
{
	static const uint8_t b[] = { 0x12, 0x34, 0x56 };

	/* 0x1234 + 0x5600 = 0x6834 */
	check(pkt_csum(b, sizeof(b), 0) == (uint16_t)~0x6834, "csum_odd_length");
}

static void test_byte_order(void)
{
	uint8_t b[4];

	pkt_put32(b, 0xc6120001u);
	check(b[0] == 198 && b[1] == 18 && b[2] == 0 && b[3] == 1 &&
	      pkt_get32(b) == 0xc6120001u, "put32_network_order");
	pkt_put16(b, 0x1389);
	check(b[0] == 0x13 && b[1] == 0x89 && pkt_get16(b) == 5001,
	      "put16_network_order");
}

static size_t build_sample(uint8_t *buf, size_t cap, const uint8_t *opt,
			   size_t optlen)
{
	static const uint8_t data[] = "hello, backlog";
	struct pkt_tcp s = {
		.saddr = 0xc6120002u, .daddr = 0xc6120001u,
		.sport = 40000, .dport = 5001,
		.seq = 0x11223344u, .ack = 0xaabbccddu,
		.flags = PKT_ACK | PKT_PSH, .window = 65535,
		.tos = 0x10, .ip_id = 0x0102,
		.opt = opt, .optlen = optlen,
		.data = data, .len = sizeof(data) - 1,
	};

	return pkt_build4(buf, cap, &s);
}

static void test_layout(void)
{
	uint8_t b[128];
	size_t n = build_sample(b, sizeof(b), NULL, 0);

	check(n == 20 + 20 + 14, "build_length");
	check(b[0] == 0x45 && b[1] == 0x10 && b[2] == 0 && b[3] == 54 &&
	      b[4] == 1 && b[5] == 2 && b[6] == 0x40 && b[9] == 6,
	      "ipv4_header_layout");
	check(b[12] == 198 && b[13] == 18 && b[15] == 2 && b[19] == 1,
	      "ipv4_addresses_layout");
	check(b[20] == 0x9c && b[21] == 0x40 && b[22] == 0x13 && b[23] == 0x89,
	      "tcp_ports_layout");
	check(b[24] == 0x11 && b[25] == 0x22 && b[26] == 0x33 && b[27] == 0x44 &&
	      b[28] == 0xaa && b[31] == 0xdd, "tcp_seq_ack_layout");
	check(b[32] == 0x50 && b[33] == (PKT_ACK | PKT_PSH) &&
	      b[34] == 0xff && b[35] == 0xff, "tcp_doff_flags_window_layout");
	check(pkt_csum(b, 20, 0) == 0, "ipv4_checksum_verifies");
	check(pkt_csum(b + 20, n - 20, pkt_pseudo4(0xc6120002u, 0xc6120001u, 6,
						   (uint16_t)(n - 20))) == 0,
	      "tcp_checksum_verifies");
}

static void test_roundtrip(void)
{
	static const uint8_t mss[4] = { 2, 4, 0x05, 0xb4 };
	struct pkt_tcp s;
	uint8_t b[128];
	size_t n = build_sample(b, sizeof(b), mss, sizeof(mss));

	check(n == 20 + 24 + 14 && b[32] == 0x60, "options_set_doff");
	check(pkt_parse4(b, n, &s) == 0 && s.saddr == 0xc6120002u &&
	      s.daddr == 0xc6120001u && s.sport == 40000 && s.dport == 5001 &&
	      s.seq == 0x11223344u && s.ack == 0xaabbccddu &&
	      s.flags == (PKT_ACK | PKT_PSH) && s.window == 65535 &&
	      s.tos == 0x10 && s.optlen == 4 && !memcmp(s.opt, mss, 4) &&
	      s.len == 14 && !memcmp(s.data, "hello, backlog", 14),
	      "parse_roundtrip");
}

static void test_rejects(void)
{
	static const uint8_t bad_opt[3] = { 1, 1, 1 };
	struct pkt_tcp s = { 0 };
	uint8_t b[128];
	size_t n = build_sample(b, sizeof(b), NULL, 0);

	b[n - 1] ^= 0x01;
	check(pkt_parse4(b, n, &s) == -1, "rejects_bad_tcp_checksum");
	b[n - 1] ^= 0x01;
	b[8] ^= 0x01;
	check(pkt_parse4(b, n, &s) == -1, "rejects_bad_ip_checksum");
	b[8] ^= 0x01;
	check(pkt_parse4(b, n - 1, &s) == -1, "rejects_truncated");
	check(pkt_parse4(b, n, &s) == 0, "accepts_restored");
	check(build_sample(b, sizeof(b), bad_opt, sizeof(bad_opt)) == 0,
	      "refuses_unaligned_options");
	check(build_sample(b, 40, NULL, 0) == 0, "refuses_short_buffer");
}

static void test_ipv6(void)
{
	static const uint8_t data[] = "v6";
	struct pkt_tcp s = {
		.v6 = 1, .sport = 40000, .dport = 5001,
		.seq = 1, .ack = 2, .flags = PKT_ACK, .window = 1000,
		.tos = 0xb8, .ttl = 7, .data = data, .len = 2,
	}, p;
	uint8_t b[128];
	size_t n;

	s.saddr6[0] = 0x20;
	s.saddr6[1] = 0x01;
	s.saddr6[3] = 0x02;
	s.saddr6[15] = 2;
	memcpy(s.daddr6, s.saddr6, 16);
	s.daddr6[15] = 1;
	n = pkt_build(b, sizeof(b), &s);
	check(n == 40 + 20 + 2, "ipv6_build_length");
	/* version 6, class 0xb8 split over two bytes, no flow label */
	check(b[0] == 0x6b && b[1] == 0x80 && b[2] == 0 && b[3] == 0 &&
	      b[4] == 0 && b[5] == 22 && b[6] == 6 && b[7] == 7,
	      "ipv6_header_layout");
	check(b[8] == 0x20 && b[9] == 0x01 && b[11] == 0x02 && b[23] == 2 &&
	      b[39] == 1, "ipv6_addresses_layout");
	check(pkt_csum(b + 40, n - 40, pkt_pseudo6(s.saddr6, s.daddr6, 6,
						   (uint32_t)(n - 40))) == 0,
	      "ipv6_tcp_checksum_verifies");
	check(pkt_parse(b, n, &p) == 0 && p.v6 && p.tos == 0xb8 &&
	      p.ttl == 7 && !memcmp(p.saddr6, s.saddr6, 16) &&
	      !memcmp(p.daddr6, s.daddr6, 16) && p.sport == 40000 &&
	      p.seq == 1 && p.ack == 2 && p.len == 2 && p.data[0] == 'v',
	      "ipv6_parse_roundtrip");
	b[n - 1] ^= 0x40;
	check(pkt_parse(b, n, &p) == -1, "ipv6_rejects_bad_checksum");
	b[n - 1] ^= 0x40;
	b[6] = 17;
	check(pkt_parse(b, n, &p) == -1, "ipv6_rejects_non_tcp");
}

/* Headers built apart, data sent from elsewhere: the same packet. */
static void test_build_hdr(void)
{
	uint8_t data[301], whole[512], hdr[64];
	struct pkt_tcp s = {
		.saddr = 0xc6120002u, .daddr = 0xc6120001u,
		.sport = 41000, .dport = 5001, .seq = 7, .ack = 9,
		.flags = PKT_ACK | PKT_PSH, .window = 512, .ip_id = 3,
		.data = data,
	};
	size_t n, h;
	int i;

	for (i = 0; i < (int)sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + 1);
	s.len = 300;
	n = pkt_build4(whole, sizeof(whole), &s);
	h = pkt_build4_hdr(hdr, sizeof(hdr), &s, pkt_sum(data, s.len));
	check(n == 340 && h == 40 && !memcmp(hdr, whole, h) &&
	      !memcmp(whole + h, data, s.len), "build_hdr_even_data");
	s.len = 301;
	n = pkt_build4(whole, sizeof(whole), &s);
	h = pkt_build4_hdr(hdr, sizeof(hdr), &s, pkt_sum(data, s.len));
	check(h == 40 && !memcmp(hdr, whole, h), "build_hdr_odd_data");
	check(pkt_build4_hdr(hdr, 39, &s, 0) == 0, "build_hdr_too_small");
}

int main(void)
{
	printf("TAP version 13\n1..30\n");
	test_csum_rfc1071();
	test_csum_odd();
	test_byte_order();
	test_layout();
	test_roundtrip();
	test_rejects();
	test_ipv6();
	test_build_hdr();
	printf("# Totals: pass:%d fail:%d xfail:0 xpass:0 skip:0 error:0\n",
	       num - failed, failed);
	return failed ? 1 : 0;
}
