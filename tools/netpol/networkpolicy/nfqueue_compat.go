// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package networkpolicy is not a package of its own: its one file is added to
// sigs.k8s.io/kube-network-policies/pkg/networkpolicy when the Makefile builds the engine
// (go build -overlay, with nfqueue-compat.patch applied to that package's controller.go).
//
// Why: the engine hands the first packet of a connection to userspace with nftables' queue
// expression (nft_queue), which this machine's kernel lacks: a rule with it fails
// ("Could not process rule: No such file or directory") and the engine's whole nftables
// transaction with it, so nothing would ever be judged. The kernel has nft_compat and the
// xtables NFQUEUE target (/proc/net/ip_tables_targets), which iptables-nft uses for
// `-j NFQUEUE`: the same verdict, NF_QUEUE to the same queue number, with the same bypass
// flag (accept while no program reads the queue) when the engine runs fail-open.
package networkpolicy

import (
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
)

// xt_NFQ_info_v3 flags (linux/netfilter/xt_NFQUEUE.h).
const nfqFlagBypass = 0x01

// nfqueueVerdict is the verdict expression of the engine's queue rules: the xtables
// NFQUEUE target, revision 3 (struct xt_NFQ_info_v3 {__u16 queuenum, queues_total, flags},
// host byte order), padded to XT_ALIGN (8 bytes) as iptables-nft sends it.
func nfqueueVerdict(num uint16, failOpen bool) expr.Any {
	var flags uint16
	if failOpen {
		flags = nfqFlagBypass
	}
	info := make([]byte, 0, 8)
	info = append(info, binaryutil.NativeEndian.PutUint16(num)...)
	info = append(info, binaryutil.NativeEndian.PutUint16(1)...) // queues_total: one queue
	info = append(info, binaryutil.NativeEndian.PutUint16(flags)...)
	info = append(info, 0, 0)
	payload := xt.Unknown(info)
	return &expr.Target{Name: "NFQUEUE", Rev: 3, Info: &payload}
}
